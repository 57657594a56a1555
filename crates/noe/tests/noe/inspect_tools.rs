//! `noe inspect` next to crane, regctl, skopeo and `docker buildx imagetools inspect`, as a
//! process against the real registry: the manifest as served (`--raw`), each platform's child
//! digest, one platform selected (`--platform`), the image config summary (`--config`), the
//! digest alone (`--digest`).

use super::harness;

use harness::{run_noe as noe, Harness};
use noe_test_support::{
    build_image_with_config, push_built, push_index, sha256_digest, Flavor, IndexEntry,
};
use serde_json::{json, Value};

fn inspect(h: &Harness, extra: &[&str]) -> Vec<String> {
    let absent = h.cert_dir.path().join("absent");
    let mut args = vec![
        "inspect".to_owned(),
        format!("--insecure-registries={}", h.registry.host()),
        format!(
            "--allow-registry-cidrs={}",
            noe_test_support::LOOPBACK_CIDRS
        ),
        format!("--docker-config-path={}", absent.display()),
        format!("--containerd-config-path={}", absent.display()),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args
}

/// `text` with every run of spaces made one, so columns do not matter.
fn squeezed(text: &str) -> String {
    text.lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_child_digests_and_digest_alone() {
    let h = Harness::start().await;
    let index = &h.fixtures.oci_index;
    let single = &h.fixtures.oci_single;

    // --raw: the bytes exactly as served (they hash to the digest), media type and digest on
    // stderr.
    let (code, raw, stderr) = noe(&inspect(&h, &["--raw", &index.reference()])).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(sha256_digest(raw.as_bytes()), index.digest);
    assert!(stderr.contains(&index.digest), "{stderr}");
    assert!(stderr.contains(&index.media_type), "{stderr}");
    let served: Value = serde_json::from_str(&raw).unwrap();
    let entries = served["manifests"].as_array().unwrap().clone();
    assert_eq!(entries.len(), 4, "three platforms and an attestation");

    // The normal output lists every entry's digest: text and JSON.
    let (code, text, stderr) = noe(&inspect(&h, &[&index.reference()])).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(text.contains("manifests:"), "{text}");
    for entry in &entries {
        let digest = entry["digest"].as_str().unwrap();
        let line = text.lines().find(|l| l.contains(digest)).unwrap();
        let label = if entry["platform"]["os"] == "unknown" {
            "attestation".to_owned()
        } else {
            let p = &entry["platform"];
            let mut label = format!(
                "{}/{}",
                p["os"].as_str().unwrap(),
                p["architecture"].as_str().unwrap()
            );
            if let Some(variant) = p["variant"].as_str() {
                label = format!("{label}/{variant}");
            }
            label
        };
        assert!(line.trim_start().starts_with(&label), "{line}");
    }
    let mut args = inspect(&h, &["-o", "json", &index.reference(), &single.reference()]);
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 0, "{stderr}");
    let lines = json_lines(&stdout);
    let manifests = lines[0]["manifests"].as_array().unwrap();
    assert_eq!(manifests.len(), entries.len());
    for (listed, entry) in manifests.iter().zip(&entries) {
        assert_eq!(listed["digest"], entry["digest"]);
        assert_eq!(listed["mediaType"], entry["mediaType"]);
    }
    assert_eq!(manifests[2]["platform"], "linux/arm/v7");
    assert_eq!(manifests[3]["attestation"], true);
    assert!(manifests[0].get("attestation").is_none());
    // A single image names its config blob instead.
    assert_eq!(
        lines[1]["configDigest"].as_str(),
        single.config_digest.as_deref()
    );
    assert!(lines[1].get("manifests").is_none());

    // --raw with -o json: the exact text in `raw`, for several images.
    args.insert(1, "--raw".to_owned());
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 0, "{stderr}");
    let lines = json_lines(&stdout);
    assert_eq!(
        sha256_digest(lines[0]["raw"].as_str().unwrap().as_bytes()),
        index.digest
    );
    assert_eq!(
        sha256_digest(lines[1]["raw"].as_str().unwrap().as_bytes()),
        single.digest
    );
    // ... but in text mode one image only: the bytes of several cannot be told apart.
    let (code, _, stderr) = noe(&inspect(
        &h,
        &["--raw", &index.reference(), &single.reference()],
    ))
    .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--raw"), "{stderr}");

    // --digest, like `crane digest`: a HEAD answers (no registry counts it as a pull); with
    // --platform, the child's.
    let arm64 = entries
        .iter()
        .find(|e| e["platform"]["architecture"] == "arm64")
        .unwrap()["digest"]
        .as_str()
        .unwrap();
    h.registry.reset_requests();
    let (code, stdout, stderr) = noe(&inspect(
        &h,
        &["--digest", &index.reference(), &single.reference()],
    ))
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, format!("{}\n{}\n", index.digest, single.digest));
    let manifest_requests: Vec<String> = h
        .registry
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/manifests/"))
        .map(|r| r.method)
        .collect();
    assert_eq!(manifest_requests, ["HEAD", "HEAD"]);
    let (code, stdout, stderr) = noe(&inspect(
        &h,
        &[
            "--digest",
            "--platform=linux/arm64",
            "-o",
            "json",
            &index.reference(),
        ],
    ))
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        json_lines(&stdout)[0],
        json!({"image": index.reference(), "digest": arm64})
    );
    let (code, _, stderr) = noe(&inspect(&h, &["--digest", "--raw", &index.reference()])).await;
    assert_eq!(code, 2, "{stderr}");

    // An override answers plain inspect (as it answers the webhook), but these flags ask the
    // registry what it serves.
    let overrides = h.cert_dir.path().join("overrides.yaml");
    std::fs::write(
        &overrides,
        format!(
            "- images: [\"{}\"]\n  platforms: [\"linux/riscv64\"]\n",
            index.reference()
        ),
    )
    .unwrap();
    let flag = format!("--platform-overrides={}", overrides.display());
    let (code, stdout, stderr) = noe(&inspect(&h, &[&flag, &index.reference()])).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("override:"), "{stdout}");
    let (code, stdout, stderr) = noe(&inspect(&h, &[&flag, "--digest", &index.reference()])).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, format!("{}\n", index.digest));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn platform_selects_a_child_and_its_config() {
    let h = Harness::start().await;
    let index = &h.fixtures.oci_index;

    let (_, raw, _) = noe(&inspect(&h, &["--raw", &index.reference()])).await;
    let served: Value = serde_json::from_str(&raw).unwrap();
    let arm_v7 = served["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["platform"]["variant"] == "v7")
        .unwrap()["digest"]
        .as_str()
        .unwrap()
        .to_owned();

    // JSON: the selected child, its config summary.
    let (code, stdout, stderr) = noe(&inspect(
        &h,
        &[
            "--platform",
            "linux/arm/v7",
            "-o",
            "json",
            &index.reference(),
        ],
    ))
    .await;
    assert_eq!(code, 0, "{stderr}");
    let line = &json_lines(&stdout)[0];
    let selected = &line["selected"];
    assert_eq!(selected["platform"], "linux/arm/v7");
    assert_eq!(selected["digest"], arm_v7.as_str());
    assert_eq!(selected["config"]["architecture"], "arm");
    assert_eq!(selected["config"]["variant"], "v7");
    assert_eq!(selected["config"]["os"], "linux");
    assert!(selected["config"]["digest"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    // Env is not part of the summary.
    assert!(!stdout.contains("PATH=/usr/bin"), "{stdout}");

    // --raw with --platform: that child's manifest; with --config too: its config blob.
    let (code, raw, stderr) = noe(&inspect(
        &h,
        &["--raw", "--platform=linux/arm/v7", &index.reference()],
    ))
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(sha256_digest(raw.as_bytes()), arm_v7);
    let (code, raw, stderr) = noe(&inspect(
        &h,
        &[
            "--raw",
            "--config",
            "--platform=linux/arm/v7",
            &index.reference(),
        ],
    ))
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        sha256_digest(raw.as_bytes()),
        selected["config"]["digest"].as_str().unwrap()
    );
    assert!(raw.contains("PATH=/usr/bin"), "the blob whole: {raw}");

    // A platform the index lacks: exit 1, naming those it has; the JSON record says why.
    let (code, stdout, stderr) = noe(&inspect(
        &h,
        &[
            "--platform",
            "linux/s390x",
            "-o",
            "json",
            &index.reference(),
        ],
    ))
    .await;
    assert_eq!(code, 1);
    assert!(
        stderr
            .contains("no platform linux/s390x (available: linux/amd64 linux/arm64 linux/arm/v7)"),
        "{stderr}"
    );
    assert_eq!(
        json_lines(&stdout)[0]["error"]["kind"],
        "platform_not_found"
    );
    // The attestation is no platform to select.
    let (code, _, stderr) = noe(&inspect(
        &h,
        &["--platform", "unknown/unknown", &index.reference()],
    ))
    .await;
    assert_eq!(code, 1, "{stderr}");

    // --config: an index needs --platform; a single image does not, and must match one given.
    let (code, _, stderr) = noe(&inspect(&h, &["--config", &index.reference()])).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("--config needs --platform"), "{stderr}");
    let single = &h.fixtures.oci_single;
    let (code, text, stderr) = noe(&inspect(&h, &["--config", &single.reference()])).await;
    assert_eq!(code, 0, "{stderr}");
    let text = squeezed(&text);
    assert!(text.contains("architecture: arm64"), "{text}");
    assert!(
        text.contains(&format!(
            "config: {}",
            single.config_digest.as_deref().unwrap()
        )),
        "{text}"
    );
    let (code, _, stderr) = noe(&inspect(
        &h,
        &["--platform=linux/amd64", &single.reference()],
    ))
    .await;
    assert_eq!(code, 1);
    assert!(stderr.contains("available: linux/arm64"), "{stderr}");

    // A platform inside a nested index: the error says how to reach it.
    let nested = &h.fixtures.nested_index;
    let (code, _, stderr) = noe(&inspect(
        &h,
        &["--platform=linux/arm64", &nested.reference()],
    ))
    .await;
    assert_eq!(code, 1);
    assert!(stderr.contains("is in a nested index"), "{stderr}");
    assert!(stderr.contains("available: linux/ppc64le"), "{stderr}");

    // A malformed --platform is refused by the command line.
    let (code, _, stderr) = noe(&inspect(&h, &["--platform=arm64", &single.reference()])).await;
    assert_eq!(code, 2, "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_summary_of_a_windows_platform() {
    let h = Harness::start().await;
    let pusher = h.registry.pusher().unwrap();
    let repo = "tools/windows";
    let config = json!({
        "architecture": "amd64",
        "os": "windows",
        "os.version": "10.0.20348.2227",
        "created": "2024-05-06T07:08:09Z",
        "config": {
            "Entrypoint": ["C:\\app\\app.exe"],
            "Cmd": ["--serve"],
            "User": "ContainerUser",
            "ExposedPorts": {"8080/tcp": {}},
            "Env": ["TOKEN=do-not-print"],
            "Labels": {"org.opencontainers.image.source": "https://example.com/app"},
        },
        "rootfs": {"type": "layers", "diff_ids": []},
    });
    let windows = build_image_with_config("windows", &config, Flavor::Oci).unwrap();
    let windows = push_built(&pusher, repo, None, &windows).await.unwrap();
    let linux = noe_test_support::push_image(&pusher, repo, None, "linux/amd64", Flavor::Oci)
        .await
        .unwrap();
    push_index(
        &pusher,
        repo,
        Some("v1"),
        Flavor::Oci,
        &[
            IndexEntry::new(&linux, Some("linux/amd64")),
            IndexEntry::new(&windows, Some("windows/amd64")),
        ],
    )
    .await
    .unwrap();
    let image = h.registry.reference(repo, "v1");

    // The entry's os.version in the list; the config summary of the Windows platform.
    let (code, text, stderr) = noe(&inspect(
        &h,
        &["--platform=windows/amd64:10.0.20348.2227", &image],
    ))
    .await;
    assert_eq!(code, 0, "{stderr}");
    let text = squeezed(&text);
    let expected = [
        "os.version=10.0.20348.2227",
        &format!("manifest: {}", windows.digest),
        "os: windows",
        "os.version: 10.0.20348.2227",
        "created: 2024-05-06T07:08:09Z",
        r#"entrypoint: ["C:\\app\\app.exe"]"#,
        r#"cmd: ["--serve"]"#,
        "user: ContainerUser",
        "exposedPorts: 8080/tcp",
        "label: org.opencontainers.image.source=https://example.com/app",
    ];
    for line in expected {
        assert!(text.contains(line), "{line:?} missing from:\n{text}");
    }
    assert!(!text.contains("do-not-print"), "{text}");

    // Another build of Windows is not there.
    let (code, _, stderr) = noe(&inspect(
        &h,
        &["--platform=windows/amd64:10.0.17763.1", &image],
    ))
    .await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("available: linux/amd64 windows/amd64"),
        "{stderr}"
    );
}
