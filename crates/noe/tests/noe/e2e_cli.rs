//! `noe inspect` and `noe explain` as processes against the real registry; `explain` prints the
//! same patch as the server for the same pod; contradictory flags are refused at start-up.

use super::harness;

use harness::{patch_of, pod, run_noe as noe, Harness};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_prints_every_fixture() {
    let h = Harness::start().await;
    let fixtures = h.fixtures.all();
    let mut args = vec!["inspect".to_owned(), "--output=json".to_owned()];
    args.extend(h.registry_flags());
    args.extend(fixtures.iter().map(|f| f.reference()));
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), fixtures.len());
    for (line, fixture) in lines.iter().zip(&fixtures) {
        let mut want = fixture.platforms.clone();
        want.sort();
        let mut got: Vec<String> = serde_json::from_value(line["platforms"].clone()).unwrap();
        got.sort();
        assert_eq!(got, want, "{}", fixture.reference());
        assert_eq!(line["digest"], fixture.digest.as_str());
        assert_eq!(line["mediaType"], fixture.media_type.as_str());
        assert_eq!(line["resolved"], fixture.reference().as_str());
        assert_eq!(line["image"], fixture.reference().as_str());
        assert_eq!(line["credentialSource"], "anonymous");
        // A fresh process: fetched.
        assert_eq!(line["answeredBy"], "get");
        // And an index's entries, or a single image's config digest.
        let keys: Vec<&String> = line.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 8, "{line}");
        let extra = if fixture.config_digest.is_some() {
            "configDigest"
        } else {
            "manifests"
        };
        assert!(line.get(extra).is_some(), "{line}");
    }

    // Text output, Go flag spelling, the registry flag before the subcommand (it was once parsed
    // and dropped there, so the plain-HTTP registry was contacted over HTTPS).
    let args = vec![
        format!("-insecure-registries={}", h.registry.host()),
        format!(
            "--allow-registry-cidrs={}",
            noe_test_support::LOOPBACK_CIDRS
        ),
        "inspect".to_owned(),
        h.fixtures.oci_index.reference(),
    ];
    let (code, stdout, _) = noe(&args).await;
    assert_eq!(code, 0);
    assert!(
        stdout.contains("platforms:   linux/amd64 linux/arm/v7 linux/arm64"),
        "{stdout}"
    );
    assert!(stdout.contains(&h.fixtures.oci_index.digest), "{stdout}");
    assert!(stdout.contains("credential:  anonymous"), "{stdout}");

    // A missing image: exit 1 and one line naming it on stderr; the good one still printed, and
    // the missing one has its record with the error.
    let mut args = vec!["inspect".to_owned(), "-o".to_owned(), "json".to_owned()];
    args.extend(h.registry_flags());
    args.push(h.fixtures.oci_single.reference());
    args.push(h.missing_image());
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 1);
    assert_eq!(stdout.lines().count(), 2);
    assert!(
        stdout.lines().nth(1).unwrap().contains("\"error\""),
        "{stdout}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&h.missing_image()), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_prints_the_servers_patch() {
    let h = Harness::start().await;
    let f = &h.fixtures;
    let server = h.server(&[]).await;
    let dir = tempfile::tempdir().unwrap();

    for images in [
        vec![f.oci_index.reference(), f.docker_list.reference()],
        vec![f.oci_single.reference()],
    ] {
        let refs: Vec<&str> = images.iter().map(String::as_str).collect();
        let pod = pod(&refs);
        let server_patch = patch_of(&server.review(&pod).await);
        assert!(!server_patch.is_empty());

        let file = dir.path().join("pod.yaml");
        std::fs::write(&file, yaml_serde::to_string(&pod).unwrap()).unwrap();
        let mut args = vec![
            "explain".to_owned(),
            "-f".to_owned(),
            file.display().to_string(),
            "--output=json".to_owned(),
        ];
        args.extend(h.registry_flags());
        let (code, stdout, stderr) = noe(&args).await;
        assert_eq!(code, 0, "{stderr}");
        let explained: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(explained["kind"], "Pod");
        assert_eq!(explained["allowed"], true);
        assert_eq!(explained["patch"], Value::Array(server_patch.clone()));
        assert!(explained["message"].is_string());
        assert!(explained["warnings"].is_array());

        // The same pod as a Deployment and a CronJob: the same ops under the template paths,
        // and they apply to the workload.
        for (workload, prefix) in [
            (
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                       "spec": {"template": {"metadata": pod["metadata"], "spec": pod["spec"]}}}),
                "/spec/template",
            ),
            (
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
                       "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template":
                           {"metadata": pod["metadata"], "spec": pod["spec"]}}}}}),
                "/spec/jobTemplate/spec/template",
            ),
        ] {
            let file = dir.path().join("workload.json");
            std::fs::write(&file, serde_json::to_vec(&workload).unwrap()).unwrap();
            args[2] = file.display().to_string();
            let (code, stdout, stderr) = noe(&args).await;
            assert_eq!(code, 0, "{stderr}");
            let explained: Value = serde_json::from_str(stdout.trim()).unwrap();
            let ops = explained["patch"].as_array().unwrap();
            assert_eq!(ops.len(), server_patch.len());
            for (op, server_op) in ops.iter().zip(&server_patch) {
                assert_eq!(
                    op["path"].as_str().unwrap(),
                    format!("{prefix}{}", server_op["path"].as_str().unwrap())
                );
                assert_eq!(op["value"], server_op["value"]);
            }
            let patch: json_patch::Patch =
                serde_json::from_value(explained["patch"].clone()).unwrap();
            let mut applied = workload.clone();
            json_patch::patch(&mut applied, &patch).unwrap();
        }
    }

    // A DaemonSet's pods are pinned to their node by its controller: no architecture constraint
    // for them, so none is shown for the template either; a `kind: List` counts as its items.
    let allowed_pod = pod(&[&f.oci_index.reference()]);
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "kube-system"},
         "spec": {"template": {"metadata": allowed_pod["metadata"], "spec": allowed_pod["spec"]}}},
        allowed_pod,
    ]});
    let file = dir.path().join("list.json");
    std::fs::write(&file, serde_json::to_vec(&list).unwrap()).unwrap();
    let mut args = vec![
        "explain".to_owned(),
        "-f".to_owned(),
        file.display().to_string(),
        "-o".to_owned(),
        "json".to_owned(),
    ];
    args.extend(h.registry_flags());
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert_eq!(lines[0]["kind"], "DaemonSet");
    assert_eq!(lines[0]["name"], "kube-system/agent");
    assert_eq!(lines[0]["allowed"], true);
    assert_eq!(lines[0]["patch"], json!([]), "{stdout}");
    assert!(lines[0]["message"].as_str().unwrap().contains("DaemonSet"));
    assert_eq!(lines[1]["kind"], "Pod");
    assert!(!lines[1]["patch"].as_array().unwrap().is_empty());

    // Text output of a denial, and an unsupported kind.
    let denied = pod(&[&f.oci_single.reference(), &f.docker_single.reference()]);
    let file = dir.path().join("denied.yaml");
    std::fs::write(&file, yaml_serde::to_string(&denied).unwrap()).unwrap();
    let mut args = vec![
        "explain".to_owned(),
        "-f".to_owned(),
        file.display().to_string(),
    ];
    args.extend(h.registry_flags());
    let (code, stdout, _) = noe(&args).await;
    assert_eq!(code, 1, "a denial fails the command, for CI pipelines");
    assert!(stdout.contains("denied (403)"), "{stdout}");
    assert!(stdout.contains("s390x"), "{stdout}");

    // Every document is shown: an unsupported kind is skipped with its reason, the rest decided.
    std::fs::write(
        &file,
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: s}}\n---\n{}",
            yaml_serde::to_string(&allowed_pod).unwrap()
        ),
    )
    .unwrap();
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 0, "{stderr}");
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("Service default/s: skipped"), "{stdout}");
    assert!(
        lines.next().unwrap().contains("kind \"Service\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("Pod default/demo-: allowed, patched"),
        "{stdout}"
    );
    server.running.shutdown().await;
}

#[tokio::test]
async fn contradictory_settings_are_refused_at_start_up() {
    let cases: &[&[&str]] = &[
        &[
            "--preferred-arch=s390x",
            "--cluster-schedulable-archs=amd64,arm64",
        ],
        &["--image-credential-provider-config=/x.yaml"],
        &["inspect", "a:1", "--webhook-addr=:9443"],
    ];
    for case in cases {
        let args: Vec<String> = case.iter().map(|s| (*s).to_owned()).collect();
        let (code, stdout, stderr) = noe(&args).await;
        assert_eq!(code, 2, "{case:?}");
        assert!(stdout.is_empty());
        assert_eq!(stderr.trim().lines().count(), 1, "{case:?}: {stderr}");
        assert!(stderr.starts_with("noe: "), "{stderr}");
    }
    // Values out of range are refused by the parser, naming the flag.
    for case in [
        &["-preference-weight", "0"][..],
        &["--preference-weight=101"],
    ] {
        let args: Vec<String> = case.iter().map(|s| (*s).to_owned()).collect();
        let (code, stdout, stderr) = noe(&args).await;
        assert_eq!(code, 2, "{case:?}");
        assert!(stdout.is_empty());
        assert!(stderr.contains("--preference-weight"), "{stderr}");
    }
    // An env var sets a flag too.
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_noe"))
        .env("NOE_PREFERRED_ARCH", "ppc64le")
        .env("NOE_CLUSTER_SCHEDULABLE_ARCHS", "amd64")
        .output()
        .await
        .unwrap();
    assert_ne!(output.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&output.stderr).contains("ppc64le"));
}
