//! Two `noe` servers (separate `App`s, as two replicas) sharing a real `redis-server`: what one
//! learned, the other answers without asking the registry, and so does `noe inspect` (a
//! process, its password from the environment); then Redis is killed and admissions go on,
//! the metrics saying they fell through.

use std::time::Duration;

use noe_test_support::RedisServer;

use super::harness::{pod, Harness};

fn count(metrics: &str, line_prefix: &str) -> f64 {
    metrics
        .lines()
        .find(|line| line.starts_with(line_prefix))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn two_servers_share_an_entry_and_go_on_when_redis_dies() {
    let h = Harness::start().await;
    let mut redis = RedisServer::builder().password("r3dis").start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (key, password) = (dir.path().join("hmac-key"), dir.path().join("password"));
    std::fs::write(&key, "an install key of 32 bytes......\n").unwrap();
    std::fs::write(&password, "r3dis\n").unwrap();
    let shared = [
        format!("--shared-cache={}", redis.url()),
        format!("--shared-cache-key-file={}", key.display()),
        format!("--shared-cache-password-file={}", password.display()),
        // The test machine is shared with builds: generous, unlike the 10 ms default.
        "--shared-cache-timeout=2s".to_owned(),
    ];
    let flags: Vec<&str> = shared.iter().map(String::as_str).collect();
    let first = h.server(&flags).await;
    let second = h.server(&flags).await;
    let image = h.fixtures.oci_index.reference();

    h.registry.reset_requests();
    let answer = first.review(&pod(&[&image])).await;
    assert!(answer["patch"].is_string(), "{answer}");
    let fetched = h.registry.request_count();
    assert!(fetched >= 1);
    // The write is in the background: wait (bounded) for the tag and the digest entries.
    for _ in 0..300 {
        if redis.command(&["DBSIZE"]).unwrap() == "2" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(redis.command(&["DBSIZE"]).unwrap(), "2");

    let answer = second.review(&pod(&[&image])).await;
    assert!(answer["patch"].is_string(), "{answer}");
    assert_eq!(
        h.registry.request_count(),
        fetched,
        "the second replica asked the registry"
    );
    let metrics = second.metrics().await;
    assert_eq!(
        count(
            &metrics,
            "noe_registry_shared_cache_reads_total{result=\"hit\"}"
        ),
        2.0,
        "a tag and a digest read: {metrics}"
    );

    // `noe inspect` is a third replica: the password from the environment.
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_noe"))
        .args([
            &format!("--shared-cache={}", redis.url()),
            &format!("--shared-cache-key-file={}", key.display()),
            "--shared-cache-timeout=2s",
            &format!("--insecure-registries={}", h.registry.host()),
            &format!(
                "--allow-registry-cidrs={}",
                noe_test_support::LOOPBACK_CIDRS
            ),
            "--docker-config-path=",
            "--containerd-config-path=",
            "inspect",
            "-o",
            "json",
            &image,
        ])
        .env("NOE_SHARED_CACHE_PASSWORD", "r3dis")
        .env("NOE_LOG_LEVEL", "error")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(line["answeredBy"], "shared-cache");
    assert_eq!(h.registry.request_count(), fetched);

    // Redis dies: admissions are still answered (from the registry), and the metrics say so.
    redis.kill();
    for fixture in [&h.fixtures.docker_list, &h.fixtures.oci_single] {
        let answer = second.review(&pod(&[&fixture.reference()])).await;
        assert!(answer["patch"].is_string(), "{answer}");
    }
    let metrics = second.metrics().await;
    let failed = count(
        &metrics,
        "noe_registry_shared_cache_reads_total{result=\"error\"}",
    ) + count(
        &metrics,
        "noe_registry_shared_cache_writes_total{result=\"error\"}",
    );
    assert!(failed >= 1.0, "{metrics}");
}
