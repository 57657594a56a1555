//! SIGTERM under load, on the real `noe` binary: admissions in flight (held by a registry that
//! never answers, so each waits for `--admission-deadline`) all get their AdmissionReview, new
//! connections are refused once draining started, and the process exits 0.

use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::future::join_all;
use noe_test_support::{https_client, write_cert_dir, TestCa};
use noe_test_support::{Behavior, FakeRegistry};
use serde_json::{json, Value};

fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn sigterm_drains_admissions_in_flight() {
    let fake = FakeRegistry::start().await.unwrap();
    fake.route("/v2/slow/app/manifests/1", Behavior::Hang);
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::with_name("sigterm").unwrap();
    write_cert_dir(&ca, dir.path()).unwrap();
    let (webhook, metrics, health) = (free_addr(), free_addr(), free_addr());
    let mut noe = Kill(
        Command::new(env!("CARGO_BIN_EXE_noe"))
            .arg(format!("--cert-dir={}", dir.path().display()))
            .arg(format!("--webhook-addr={webhook}"))
            .arg(format!("--metrics-addr={metrics}"))
            .arg(format!("--health-probe-addr={health}"))
            .arg(format!("--insecure-registries={}", fake.host()))
            .arg("--admission-deadline=2s")
            .arg("--registry-timeout=5s")
            .arg("--docker-config-path=")
            .env("KUBECONFIG", "/nonexistent")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Ready (bounded).
    let probe = reqwest::Client::new();
    let started = Instant::now();
    loop {
        let ready = probe.get(format!("http://{health}/readyz")).send().await;
        if ready.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "noe not ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let client = https_client(&[&ca]).unwrap();
    let url = format!("https://localhost:{}/mutate", webhook.port());
    let image = format!("{}/slow/app:1", fake.host());
    let in_flight = join_all((0..10).map(|i| {
        let (client, url) = (client.clone(), url.clone());
        let pod = json!({"metadata": {"name": format!("p{i}")},
                         "spec": {"containers": [{"name": "c", "image": image}]}});
        let body = noe_test_support::admission_review(
            "admission.k8s.io/v1",
            "CREATE",
            "ns",
            &format!("u{i}"),
            &pod,
        );
        async move {
            let response = client.post(&url).json(&body).send().await?;
            let status = response.status();
            let answer: Value = response.json().await?;
            Ok::<_, reqwest::Error>((status, answer))
        }
    }));
    let terminate = async {
        // Let the requests reach the registry, then SIGTERM.
        let deadline = Instant::now() + Duration::from_secs(10);
        while fake.requests_to("/v2/slow/app/manifests/1").is_empty() {
            assert!(
                Instant::now() < deadline,
                "admissions never reached the registry"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(noe.0.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    };
    let (answers, ()) = tokio::join!(in_flight, terminate);
    for (i, answer) in answers.into_iter().enumerate() {
        let (status, answer) = answer.unwrap_or_else(|e| panic!("admission {i} lost: {e}"));
        assert_eq!(status, 200);
        assert_eq!(answer["response"]["uid"], format!("u{i}"));
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
    }
    // Exits 0 once drained (bounded wait).
    let deadline = Instant::now() + Duration::from_secs(15);
    let exit = loop {
        if let Some(status) = noe.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "noe did not exit after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exit.success(), "noe exited with {exit}");
    assert!(
        tokio::net::TcpStream::connect(webhook).await.is_err(),
        "still accepting after exit"
    );
}
