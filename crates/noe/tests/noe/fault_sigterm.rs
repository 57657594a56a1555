//! Signals on the real `noe` binary, under load. Admissions in flight (held by a registry that
//! never answers, so each waits for `--admission-deadline`) all get their AdmissionReview.
//! SIGTERM: `/readyz` fails at once while admissions are still answered for `--shutdown-delay`
//! (the endpoint is being removed), then the listener closes and the process exits 0. SIGHUP
//! (a closed terminal) drains at once and exits 0 too.

use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::future::join_all;
use noe_test_support::{https_client, write_cert_dir, Behavior, FakeRegistry, TestCa};
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

struct Noe {
    process: Kill,
    webhook: SocketAddr,
    health: SocketAddr,
    client: reqwest::Client,
    image: String,
    _dir: tempfile::TempDir,
}

async fn start(fake: &FakeRegistry, shutdown_delay: &str) -> Noe {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::with_name("signals").unwrap();
    write_cert_dir(&ca, dir.path()).unwrap();
    let (webhook, metrics, health) = (free_addr(), free_addr(), free_addr());
    let process = Kill(
        Command::new(env!("CARGO_BIN_EXE_noe"))
            .arg(format!("--cert-dir={}", dir.path().display()))
            .arg(format!("--webhook-addr={webhook}"))
            .arg(format!("--metrics-addr={metrics}"))
            .arg(format!("--health-probe-addr={health}"))
            .arg(format!("--insecure-registries={}", fake.host()))
            .arg(format!(
                "--allow-registry-cidrs={}",
                noe_test_support::LOOPBACK_CIDRS
            ))
            .arg("--admission-deadline=2s")
            .arg("--registry-timeout=5s")
            .arg(format!("--shutdown-delay={shutdown_delay}"))
            .arg("--docker-config-path=")
            .env("KUBECONFIG", "/nonexistent")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let noe = Noe {
        process,
        webhook,
        health,
        client: https_client(&[&ca]).unwrap(),
        image: format!("{}/slow/app:1", fake.host()),
        _dir: dir,
    };
    let started = Instant::now();
    while !noe.ready().await {
        assert!(started.elapsed() < Duration::from_secs(20), "noe not ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    noe
}

impl Noe {
    async fn ready(&self) -> bool {
        reqwest::get(format!("http://{}/readyz", self.health))
            .await
            .is_ok_and(|r| r.status().is_success())
    }

    /// One admission of a pod whose image hangs (answered after the deadline).
    async fn admit(&self, uid: String) -> Result<(reqwest::StatusCode, Value), reqwest::Error> {
        let pod = json!({"metadata": {"name": uid},
                         "spec": {"containers": [{"name": "c", "image": self.image}]}});
        let body =
            noe_test_support::admission_review("admission.k8s.io/v1", "CREATE", "ns", &uid, &pod);
        let url = format!("https://localhost:{}/mutate", self.webhook.port());
        let response = self.client.post(&url).json(&body).send().await?;
        let status = response.status();
        Ok((status, response.json().await?))
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.process.0.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits (bounded) for the process to exit 0, then checks nothing listens any more.
    async fn exits_cleanly(mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let exit = loop {
            if let Some(status) = self.process.0.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "noe did not exit");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(exit.success(), "noe exited with {exit}");
        assert!(
            tokio::net::TcpStream::connect(self.webhook).await.is_err(),
            "still accepting after exit"
        );
    }
}

/// Admissions in flight, then `signal` once they reached the registry.
async fn under_load(noe: &Noe, fake: &FakeRegistry, signal: &str) -> Vec<Value> {
    let in_flight = join_all((0..10).map(|i| noe.admit(format!("u{i}"))));
    let send = async {
        let deadline = Instant::now() + Duration::from_secs(10);
        while fake.requests_to("/v2/slow/app/manifests/1").is_empty() {
            assert!(
                Instant::now() < deadline,
                "admissions never reached the registry"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        noe.signal(signal);
    };
    let (answers, ()) = tokio::join!(in_flight, send);
    answers
        .into_iter()
        .enumerate()
        .map(|(i, answer)| {
            let (status, answer) = answer.unwrap_or_else(|e| panic!("admission {i} lost: {e}"));
            assert_eq!(status, 200);
            assert_eq!(answer["response"]["uid"], format!("u{i}"));
            assert_eq!(answer["response"]["allowed"], true, "{answer}");
            answer
        })
        .collect()
}

#[tokio::test]
async fn sigterm_is_not_ready_at_once_answers_during_the_delay_then_drains() {
    let fake = FakeRegistry::start().await.unwrap();
    fake.route("/v2/slow/app/manifests/1", Behavior::Hang);
    let noe = start(&fake, "3s").await;
    under_load(&noe, &fake, "TERM").await;
    // The in-flight admissions took the 2 s deadline: still within the 3 s delay. Not ready, and
    // a new admission (a new connection) is still answered.
    assert!(!noe.ready().await, "ready after SIGTERM");
    let (status, answer) = noe.admit("late".into()).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(answer["response"]["uid"], "late");
    noe.exits_cleanly().await;
}

#[tokio::test]
async fn sighup_drains_at_once() {
    let fake = FakeRegistry::start().await.unwrap();
    fake.route("/v2/slow/app/manifests/1", Behavior::Hang);
    // A 30 s delay that SIGTERM would wait for: `exits_cleanly`'s bound proves SIGHUP does not.
    let noe = start(&fake, "30s").await;
    under_load(&noe, &fake, "HUP").await;
    noe.exits_cleanly().await;
}
