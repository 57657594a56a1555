//! The `noe` binary as a process: `--dev-self-signed-cert`, readiness soon after start, an
//! admission answered, and a clean exit on SIGTERM.

use std::time::{Duration, Instant};

use super::harness::free_port;

#[tokio::test]
async fn serves_with_a_self_signed_cert_and_exits_on_sigterm() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (webhook, metrics, health) = (free_port(), free_port(), free_port());
    let started = Instant::now();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_noe"))
        .args([
            "-dev-self-signed-cert",
            &format!("-webhook-addr=127.0.0.1:{webhook}"),
            &format!("--metrics-addr=127.0.0.1:{metrics}"),
            &format!("--health-probe-addr=127.0.0.1:{health}"),
            "--leader-elect=true",
            "--shutdown-delay=100ms",
            "--kubeconfig=",
            "--log-format=text",
        ])
        .env("NOE_LOG_LEVEL", "warn")
        .env_remove("RUST_LOG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .kill_on_drop(true)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();

    let plain = reqwest::Client::new();
    let ready = format!("http://127.0.0.1:{health}/readyz");
    let ready_after = loop {
        if let Ok(response) = plain.get(&ready).send().await {
            if response.status() == 200 {
                break started.elapsed();
            }
        }
        // Generous: the suite runs this beside a headless browser on two cores.
        assert!(started.elapsed() < Duration::from_secs(60), "never ready");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    eprintln!("ready {ready_after:?} after spawn (process start included)");

    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let body = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/admissionreview-skip.json"
    ))
    .unwrap();
    let answer: serde_json::Value = client
        .post(format!("https://127.0.0.1:{webhook}/mutate"))
        .body(body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(answer["response"]["allowed"], true);
    assert_eq!(
        answer["response"]["uid"],
        "0df28fbd-5f5f-11e8-bc74-36e6bb280816"
    );

    let pid = child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("exits after SIGTERM")
        .unwrap();
    assert!(status.success(), "{status:?}");
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        use tokio::io::AsyncReadExt;
        pipe.read_to_string(&mut stderr).await.unwrap();
    }
    assert!(
        stderr.contains("self-signed"),
        "the dev certificate is logged as a warning: {stderr}"
    );
}
