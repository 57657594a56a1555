//! `noe report` and `noe inspect` with upgrade paths, as processes against the real registry:
//! a fleet of workloads sharing a blocked image costs one search; the request count of each
//! search is the registry's (access log); every format shows the path; `--upgrades=false` lists
//! no tag.

use super::harness::run_noe as noe;
use noe_test_support::{push_versions, Registry};
use serde_json::{json, Value};

/// Pushes `(tag, runs on arm64)` versions of `repository`.
async fn push(registry: &Registry, repository: &str, versions: &[(String, bool)]) {
    let versions: Vec<(&str, bool)> = versions.iter().map(|(t, a)| (t.as_str(), *a)).collect();
    push_versions(&registry.pusher().unwrap(), repository, &versions)
        .await
        .unwrap();
}

fn semver(arm_from_minor: u32) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for minor in 0..6 {
        for patch in 0..4 {
            out.push((format!("1.{minor}.{patch}"), minor >= arm_from_minor));
        }
    }
    out.push(("latest".into(), false));
    out
}

fn deployment(name: &str, namespace: &str, image: &str, replicas: u64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [
            {"name": "app", "image": image, "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}
        ]}}}
    })
}

fn flags(registry: &Registry, dir: &std::path::Path) -> Vec<String> {
    let absent = dir.join("absent");
    vec![
        format!("--insecure-registries={}", registry.host()),
        format!(
            "--allow-registry-cidrs={}",
            noe_test_support::LOOPBACK_CIDRS
        ),
        format!("--docker-config-path={}", absent.display()),
        format!("--containerd-config-path={}", absent.display()),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_sharing_a_blocked_image_costs_one_search() {
    let registry = Registry::start().await.unwrap();
    push(&registry, "shop/web", &semver(2)).await;
    push(
        &registry,
        "legacy/batch",
        &[("7".into(), false), ("8".into(), false)],
    )
    .await;
    let web = registry.reference("shop/web", "1.0.1");
    // The other tag and `latest` first: they are looked up before the fleet's image, whose
    // search then finds them in the cache (no two requests for one version at once).
    let mut objects = vec![
        deployment(
            "old-web",
            "team-0",
            &registry.reference("shop/web", "1.1.0"),
            1,
        ),
        deployment(
            "floating",
            "ops",
            &registry.reference("shop/web", "latest"),
            1,
        ),
    ];
    objects.extend(
        (0..30).map(|i| deployment(&format!("web-{i}"), &format!("team-{}", i % 3), &web, 2)),
    );
    objects.push(deployment(
        "batch",
        "ops",
        &registry.reference("legacy/batch", "7"),
        3,
    ));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("workloads.json");
    std::fs::write(
        &file,
        json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string(),
    )
    .unwrap();
    // One lookup and one search at a time: two asking for one version at once would both count
    // the request they share.
    let mut args = vec![
        "report".to_owned(),
        "-o".to_owned(),
        "json".to_owned(),
        "--concurrency=1".to_owned(),
        format!("-f={}", file.display()),
    ];
    args.extend(flags(&registry, dir.path()));
    registry.reset_requests();
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let item = |name: &str| {
        report["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == name)
            .unwrap()
            .clone()
    };
    let path = &item("web-7")["upgrades"]["arm64"][0];
    assert_eq!(path["image"], web);
    assert_eq!(path["current"], "1.0.1");
    assert_eq!(path["first"], "1.2.0");
    assert_eq!(path["newest"], "1.5.3");
    assert_eq!(path["newestSupports"], true);
    assert_eq!(item("old-web")["upgrades"]["arm64"][0]["first"], "1.2.0");
    assert_eq!(item("batch")["upgrades"]["arm64"][0]["first"], Value::Null);
    assert_eq!(
        item("batch")["upgrades"]["arm64"][0]["newestSupports"],
        false
    );
    let floating = &item("floating")["upgrades"]["arm64"][0];
    assert!(
        floating["reason"].as_str().unwrap().contains("latest"),
        "{floating}"
    );
    // Each search once: the fleet's image, the other tag of its repository (the tags listed
    // once for both), the legacy image. The registry saw exactly what the searches say they
    // asked, beside one lookup of each image the workloads name.
    let (pages, manifests) = registry.repository_requests("shop/web");
    assert_eq!(pages, 1, "the repository's tags listed once");
    let searched: u64 = ["web-0", "old-web"]
        .iter()
        .map(|n| {
            item(n)["upgrades"]["arm64"][0]["requests"]
                .as_u64()
                .unwrap()
        })
        .sum();
    // Three images of the repository named (1.0.1, 1.1.0, latest), each looked up once.
    assert_eq!(
        u64::try_from(pages + manifests).unwrap(),
        searched + 3,
        "{:?}",
        registry
            .requests()
            .iter()
            .map(|r| r.summary())
            .collect::<Vec<_>>()
    );
    let budget = u64::try_from(noe_core::upgrade::search::budget(24)).unwrap();
    for name in ["web-0", "old-web"] {
        let requests = item(name)["upgrades"]["arm64"][0]["requests"]
            .as_u64()
            .unwrap();
        assert!(requests <= 1 + budget, "{name}: {requests}");
    }
    let blockers = &report["summary"]["arm64"]["blockingImages"];
    assert_eq!(
        blockers[0]["image"], web,
        "ranked by CPU held back: {blockers}"
    );
    assert_eq!(blockers[0]["replicas"], 60);
    assert_eq!(blockers[0]["upgrade"]["first"], "1.2.0");

    // Every format shows the path.
    for (format, needle) in [
        ("table", "1.2.0 (newest 1.5.3)"),
        ("csv", "1.2.0 (newest 1.5.3)"),
        ("markdown", "1.2.0 (newest 1.5.3)"),
    ] {
        let mut args = vec![
            "report".to_owned(),
            format!("-o={format}"),
            format!("-f={}", file.display()),
        ];
        args.extend(flags(&registry, dir.path()));
        let (code, stdout, stderr) = noe(&args).await;
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains(needle), "{format}: {stdout}");
        assert!(stdout.to_lowercase().contains("upgrade"), "{format}");
    }
    let csv_header = {
        let mut args = vec![
            "report".to_owned(),
            "-o=csv".to_owned(),
            format!("-f={}", file.display()),
        ];
        args.extend(flags(&registry, dir.path()));
        noe(&args).await.1.lines().next().unwrap().to_owned()
    };
    assert!(
        csv_header.ends_with(",blocking,upgrade,unknown"),
        "{csv_header}"
    );

    // Off: no tag listed, no column.
    let mut args = vec![
        "report".to_owned(),
        "--upgrades=false".to_owned(),
        "-o=json".to_owned(),
        format!("-f={}", file.display()),
    ];
    args.extend(flags(&registry, dir.path()));
    registry.reset_requests();
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(registry.repository_requests("shop/web").0, 0);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert!(report["items"][0].get("upgrades").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_upgrade_paths() {
    let registry = Registry::start().await.unwrap();
    push(&registry, "shop/web", &semver(2)).await;
    let dir = tempfile::tempdir().unwrap();
    let image = registry.reference("shop/web", "1.0.1");
    let mut args = vec!["inspect".to_owned(), "--upgrades".to_owned(), image.clone()];
    args.extend(flags(&registry, dir.path()));
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("upgrade:     arm64: 1.2.0 (newest 1.5.3)"),
        "{stdout}"
    );
    let mut args = vec![
        "inspect".to_owned(),
        "--upgrades".to_owned(),
        "--target-arch=arm64,amd64".to_owned(),
        "-o=json".to_owned(),
        image.clone(),
        registry.reference("shop/web", "latest"),
    ];
    args.extend(flags(&registry, dir.path()));
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["upgrades"]["arm64"]["first"], "1.2.0");
    assert!(lines[0]["upgrades"]["amd64"]["reason"]
        .as_str()
        .unwrap()
        .contains("already"));
    assert!(lines[1]["upgrades"]["arm64"]["reason"]
        .as_str()
        .unwrap()
        .contains("latest"));
    // Not with --digest or --raw.
    let (code, _, stderr) = noe(&[
        "inspect".into(),
        "--upgrades".into(),
        "--digest".into(),
        image,
    ])
    .await;
    assert_eq!(code, 2, "{stderr}");
}
