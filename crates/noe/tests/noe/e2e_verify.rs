//! Verification end to end: `noe inspect --verify` as a process against the real registry,
//! on the image that lies about its platforms (an arm64 manifest whose `/app` is x86-64).

use super::harness;

use harness::{run_noe as noe, Harness};
use noe_test_support::{push_mislabelled_index, LayerEntry, RunnableImage};
use serde_json::Value;

fn inspect(h: &Harness, extra: &[&str]) -> Vec<String> {
    let absent = h.cert_dir.path().join("absent");
    let mut args = vec![
        "inspect".to_owned(),
        "--verify".to_owned(),
        format!("--insecure-registries={}", h.registry.host()),
        format!("--docker-config-path={}", absent.display()),
        format!("--containerd-config-path={}", absent.display()),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_verify_names_the_lying_platform_and_fails() {
    let h = Harness::start().await;
    let pusher = h.registry.pusher().unwrap();
    let lies = push_mislabelled_index(&pusher, "verify/lies", "1", "e2e")
        .await
        .unwrap();
    let reference = h.registry.reference("verify/lies", "1");

    let (code, stdout, stderr) = noe(&inspect(&h, &[&reference])).await;
    assert_eq!(code, 1, "a mismatch fails the run: {stdout}{stderr}");
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("verify:"))
        .collect();
    assert_eq!(
        lines,
        [
            "verify: linux/amd64 verified: /app is an x86-64 ELF (EM_X86_64)",
            "verify: linux/arm64 mismatch: /app is an x86-64 ELF (EM_X86_64)",
        ],
        "{stdout}"
    );
    assert!(
        stdout.contains("platforms:"),
        "the usual record too: {stdout}"
    );

    let (code, stdout, stderr) = noe(&inspect(&h, &["-o", "json", &reference])).await;
    assert_eq!(code, 1, "{stderr}");
    let record: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(record["digest"], lies.index.digest);
    let verification = record["verification"].as_array().unwrap();
    assert_eq!(verification.len(), 2);
    let arm64 = &verification[1];
    assert_eq!(arm64["platform"], "linux/arm64");
    assert_eq!(arm64["digest"], lies.arm64.digest);
    assert_eq!(arm64["verdict"], "mismatch");
    assert_eq!(arm64["program"], "/app");
    assert_eq!(arm64["machine"], "x86-64");
    assert_eq!(arm64["reason"], Value::Null);
    assert_eq!(verification[0]["verdict"], "verified");

    // Honest images, and an unverifiable one, pass.
    let jar = RunnableImage::new(
        "linux/amd64",
        serde_json::json!({"Entrypoint": ["/app.jar"]}),
        vec![noe_test_support::LayerBlob::new(
            &[LayerEntry::program("app.jar", b"PK\x03\x04".to_vec())],
            noe_test_support::Compression::Gzip,
        )
        .unwrap()],
        noe_test_support::Flavor::Oci,
    )
    .unwrap();
    jar.push(&pusher, "verify/jar", Some("1")).await.unwrap();
    let honest = h.fixtures.oci_single.reference();
    let jar_ref = h.registry.reference("verify/jar", "1");
    let (code, stdout, stderr) = noe(&inspect(&h, &[&jar_ref, &honest])).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout
            .contains("verify: linux/amd64 unverifiable (not-elf): /app.jar is not an ELF program"),
        "{stdout}"
    );
}
