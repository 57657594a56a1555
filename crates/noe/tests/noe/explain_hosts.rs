//! `noe explain` fails fast on a hung registry host, as `inspect` does: after the host's first
//! timeout, the documents whose images are on that host are not tried again, and say so.

use super::harness::{pod, run_noe as noe};
use noe_test_support::{Behavior, FakeRegistry};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_fails_fast_on_a_hung_registry_host() {
    let fake = FakeRegistry::start().await.unwrap();
    let repositories = ["a", "b", "c", "d"];
    for repository in repositories {
        fake.route(&format!("/v2/{repository}/manifests/1"), Behavior::Hang);
    }
    let host = fake.host();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pods.json");
    let documents: Vec<Value> = repositories
        .iter()
        .map(|r| pod(&[&format!("{host}/{r}:1")]))
        .collect();
    let list = serde_json::json!({"kind": "List", "items": documents});
    std::fs::write(&file, list.to_string()).unwrap();
    let args = vec![
        "explain".to_owned(),
        "-o=json".to_owned(),
        format!("-f={}", file.display()),
        format!("--insecure-registries={host}"),
        format!(
            "--allow-registry-cidrs={}",
            noe_test_support::LOOPBACK_CIDRS
        ),
        "--registry-timeout=1s".to_owned(),
        "--docker-config-path=".to_owned(),
        "--containerd-config-path=".to_owned(),
    ];
    let (code, stdout, stderr) = noe(&args).await;
    // Every lookup failed: explain's own exit code.
    assert_eq!(code, 3, "{stderr}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert!(
        lines.iter().all(|l| l["lookupErrors"].is_array()),
        "{stdout}"
    );
    let not_tried = lines
        .iter()
        .filter(|l| l["lookupErrors"].to_string().contains("not tried"))
        .count();
    assert!(
        not_tried >= 2,
        "the host's later documents fail at once: {stdout}"
    );
    // The two tried first are the only ones the registry saw (a slot each).
    let asked: std::collections::BTreeSet<String> =
        fake.requests().into_iter().map(|r| r.path).collect();
    assert!(asked.len() <= 2, "{asked:?}");
}
