//! The fault matrix through the webhook: the real HTTPS server, the real `Admission`, the real
//! resolver, registries that misbehave (in-process fake) next to a healthy one (the real
//! `docker-registry`). For every registry fault and every `--on-lookup-error` mode, the admission
//! answers within `--admission-deadline` with the configured outcome, `noe_hook_registry_errors_total`
//! counts it, and a pod with only healthy images is then patched as usual. The hostile rows
//! (an absurd `Retry-After`, a 4 MB platform string, a nested fan-out, a redirect to a host that
//! challenges) are answered the same way: no panic ("internal error" would bypass `deny`), no
//! unbounded work.
//! Webhook-port faults: connections that send nothing or stall mid-headers (slowloris) do not
//! delay other clients, and the server closes them after its handshake/header timeouts.
//! (Body limit, certificate rotation under load and drain on shutdown: `tests/server.rs`.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cert_dir;
use base64::Engine as _;
use futures::future::join_all;
use noe_core::decide::{OnLookupError, Policy};
use noe_registry::manifest::{OCI_INDEX, OCI_MANIFEST};
use noe_registry::{Config, Resolver};
use noe_test_support::https_client;
use noe_test_support::{push_standard_fixtures, sha256_digest, Behavior, FakeRegistry, Registry};
use noe_webhook::admission::Admission;
use noe_webhook::metrics::Metrics;
use noe_webhook::resolve::{Anonymous, RegistryLookup, Resolve};
use noe_webhook::server::tls::{CertDir, Reloadable};
use noe_webhook::server::{self, Addresses, BodyLimits, Limits, Running};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const REGISTRY_TIMEOUT: Duration = Duration::from_millis(1400);
const DEADLINE: Duration = Duration::from_millis(1800);
/// Time to encode, send and receive the answer on loopback, on a loaded CI machine.
const SLACK: Duration = Duration::from_millis(700);

fn loopback() -> Addresses {
    let any = "127.0.0.1:0".parse().unwrap();
    Addresses {
        webhook: any,
        metrics: any,
        health: any,
    }
}

async fn serve(
    dir: &std::path::Path,
    admission: Admission,
    limits: Limits,
    metrics: prometheus::Registry,
) -> Running {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (_watched, key) = CertDir::load(dir).unwrap();
    server::start(
        loopback(),
        Reloadable::new(key),
        server::admission_routes(Arc::new(admission), BodyLimits::default()),
        limits,
        metrics,
    )
    .await
    .unwrap()
}

fn review(uid: &str, images: &[&str]) -> Value {
    let containers: Vec<Value> = images
        .iter()
        .enumerate()
        .map(|(i, image)| json!({"name": format!("c{i}"), "image": image}))
        .collect();
    let pod = json!({"metadata": {"generateName": "p-"}, "spec": {"containers": containers}});
    noe_test_support::admission_review("admission.k8s.io/v1", "CREATE", "ns", uid, &pod)
}

fn patched_arch(answer: &Value) -> Option<String> {
    let patch = answer["response"]["patch"].as_str()?;
    let ops: Value = serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(patch)
            .ok()?,
    )
    .ok()?;
    let ops = ops.as_array()?;
    ops.iter().find_map(|op| {
        let path = op["path"].as_str()?;
        if path == "/spec/nodeSelector" {
            op["value"]["kubernetes.io/arch"]
                .as_str()
                .map(str::to_owned)
        } else if path == "/spec/nodeSelector/kubernetes.io~1arch" {
            op["value"].as_str().map(str::to_owned)
        } else {
            None
        }
    })
}

fn counter_sum(metrics: &prometheus::Registry, name: &str) -> f64 {
    metrics
        .gather()
        .iter()
        .filter(|family| family.name() == name)
        .flat_map(|family| family.get_metric().iter())
        .map(|metric| metric.get_counter().get_value())
        .sum()
}

fn index_body() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [{"mediaType": OCI_MANIFEST, "digest": sha256_digest(b"x"), "size": 1,
                       "platform": {"os": "linux", "architecture": "amd64"}}],
    }))
    .unwrap()
}

/// The faulty images, each on a fake scripted to misbehave.
fn script_faults(fake: &FakeRegistry, aux: &FakeRegistry) -> Vec<(&'static str, String)> {
    let host = fake.host();
    let route = |repo: &str, behavior: Behavior| {
        fake.route(&format!("/v2/{repo}/manifests/1"), behavior);
        format!("{host}/{repo}:1")
    };
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let pinned = sha256_digest(b"not the body");
    fake.route(
        &format!("/v2/mismatch/app/manifests/{pinned}"),
        Behavior::manifest(OCI_INDEX, index_body()),
    );
    aux.route(
        "/v2/token/app/manifests/1",
        Behavior::bearer_challenge(&format!("{}/token", aux.base_url()), "aux"),
    );
    aux.route("/token", Behavior::Hang);
    vec![
        ("connection refused", format!("127.0.0.1:{closed}/app:1")),
        ("never answers", route("hang/app", Behavior::Hang)),
        (
            "one byte a second",
            route(
                "trickle/app",
                Behavior::trickle(OCI_INDEX, index_body(), Duration::from_secs(1)),
            ),
        ),
        ("HTTP 500", route("e500/app", Behavior::status(500))),
        (
            "429 Retry-After",
            route("e429/app", Behavior::too_many_requests(5)),
        ),
        (
            "invalid JSON",
            route("garbage/app", Behavior::invalid_json()),
        ),
        (
            "100 MiB body",
            route("huge/app", Behavior::oversized(OCI_INDEX, 100 << 20, false)),
        ),
        ("digest mismatch", format!("{host}/mismatch/app@{pinned}")),
        (
            "token endpoint hangs",
            format!("{}/token/app:1", aux.host()),
        ),
        // A hostile registry: each used to panic the admission, fill memory, cost
        // thousands of requests or hand credentials to another host.
        (
            "absurd Retry-After after a 1 s answer",
            route(
                "retry/app",
                Behavior::retry_after(503, "18446744073709551615")
                    .delayed(Duration::from_millis(1050)),
            ),
        ),
        (
            "4 MB architecture string",
            route(
                "hugearch/app",
                Behavior::huge_platform_index("architecture", 4_000_000, 1),
            ),
        ),
        ("nested fan-out 8 x 4", {
            fake.script_fan_out("fanout/app", "1", 8, 4);
            format!("{host}/fanout/app:1")
        }),
        ("redirect to a host that challenges", {
            fake.script_foreign_challenge("foreign/app", "1");
            format!("{host}/foreign/app:1")
        }),
    ]
}

#[tokio::test]
async fn registry_faults_through_the_webhook() {
    let fake = FakeRegistry::start().await.unwrap();
    let aux = FakeRegistry::start().await.unwrap();
    let real = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&real).await.unwrap();
    let healthy = fixtures.docker_list.reference(); // linux/amd64, linux/arm64
    let faults = script_faults(&fake, &aux);
    let (dir, ca) = cert_dir("fault-matrix");
    let client = https_client(&[&ca]).unwrap();

    for mode in [
        OnLookupError::IgnoreImage,
        OnLookupError::AllowPod,
        OnLookupError::Deny,
    ] {
        let metrics = prometheus::Registry::new();
        let resolver = Resolver::new(
            Config {
                insecure_registries: vec![fake.host(), fake.other_host(), aux.host(), real.host()],
                request_timeout: REGISTRY_TIMEOUT,
                allow_cidrs: noe_test_support::loopback_cidrs(),
                ..Config::default()
            },
            &metrics,
        )
        .unwrap();
        let admission = Admission::new(
            Resolve::new(
                Arc::new(RegistryLookup::new(resolver)),
                Arc::new(Anonymous),
                DEADLINE,
            ),
            Policy {
                on_lookup_error: mode,
                ..Policy::default()
            },
            Metrics::register(&metrics).unwrap(),
        );
        let running = serve(dir.path(), admission, Limits::default(), metrics.clone()).await;
        let url = format!("https://localhost:{}/mutate", running.webhook_addr.port());

        // Every fault at once, each in a pod next to a healthy image.
        let answers = join_all(faults.iter().map(|(name, image)| {
            let body = review(name, &[image, &healthy]);
            let (client, url) = (client.clone(), url.clone());
            async move {
                let started = Instant::now();
                let response = client.post(&url).json(&body).send().await.unwrap();
                assert_eq!(response.status(), 200, "{mode:?}/{name}");
                let answer: Value = response.json().await.unwrap();
                (*name, image, answer, started.elapsed())
            }
        }))
        .await;
        for (name, image, answer, elapsed) in &answers {
            assert!(
                *elapsed <= DEADLINE + SLACK,
                "{mode:?}/{name}: answered after {elapsed:?}"
            );
            assert_eq!(answer["response"]["uid"], *name, "{mode:?}/{name}");
            let response = &answer["response"];
            match mode {
                OnLookupError::IgnoreImage => {
                    assert_eq!(response["allowed"], true, "{mode:?}/{name}: {answer}");
                    assert_eq!(
                        patched_arch(answer).as_deref(),
                        Some("amd64"),
                        "{mode:?}/{name}: decided over the healthy image: {answer}"
                    );
                }
                OnLookupError::AllowPod => {
                    assert_eq!(response["allowed"], true, "{mode:?}/{name}: {answer}");
                    assert!(response.get("patch").is_none(), "{mode:?}/{name}: {answer}");
                    assert!(
                        response["warnings"]
                            .as_array()
                            .is_some_and(|w| !w.is_empty()),
                        "{mode:?}/{name}: no warning: {answer}"
                    );
                }
                OnLookupError::Deny => {
                    assert_eq!(response["allowed"], false, "{mode:?}/{name}: {answer}");
                    let message = response["status"]["message"].as_str().unwrap_or_default();
                    assert!(
                        message.contains(image.as_str()),
                        "{mode:?}/{name}: {message:?} does not name {image}"
                    );
                }
                OnLookupError::Fallback => unreachable!("not one of the modes this test runs"),
            }
        }
        assert_eq!(
            counter_sum(&metrics, "noe_hook_registry_errors_total"),
            faults.len() as f64,
            "{mode:?}: one registry error per faulty image"
        );

        // A pod with only healthy images is unaffected.
        let started = Instant::now();
        let answer: Value = client
            .post(&url)
            .json(&review("healthy", &[&healthy]))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(
            started.elapsed() < DEADLINE,
            "{mode:?}: healthy pod slowed down"
        );
        assert_eq!(
            patched_arch(&answer).as_deref(),
            Some("amd64"),
            "{mode:?}: {answer}"
        );
        running.shutdown().await;
    }
}

#[tokio::test]
async fn slowloris_does_not_delay_other_clients() {
    let (dir, ca) = cert_dir("slowloris");
    let metrics = prometheus::Registry::new();
    // Lookups answered by the real resolver against nothing: the pod has no image to look up.
    let resolver = Resolver::new(
        Config {
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &metrics,
    )
    .unwrap();
    let admission = Admission::new(
        Resolve::new(
            Arc::new(RegistryLookup::new(resolver)),
            Arc::new(Anonymous),
            DEADLINE,
        ),
        Policy::default(),
        Metrics::register(&metrics).unwrap(),
    );
    let limits = Limits {
        handshake_timeout: Duration::from_secs(2),
        header_read_timeout: Duration::from_secs(2),
        ..Limits::default()
    };
    let running = serve(dir.path(), admission, limits, metrics).await;
    let addr = running.webhook_addr;

    // 100 connections that never start TLS, 100 that stall in the middle of their headers.
    let mut silent = Vec::new();
    for _ in 0..100 {
        silent.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    let mut roots = rustls::RootCertStore::empty();
    use rustls_pki_types::pem::PemObject as _;
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(ca.cert_pem().as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let connector = tokio_rustls::TlsConnector::from(Arc::new(
        rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    ));
    let mut stalled = Vec::new();
    for _ in 0..100 {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
        let mut tls = connector.connect(name, tcp).await.unwrap();
        tls.write_all(b"POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-le")
            .await
            .unwrap();
        tls.flush().await.unwrap();
        stalled.push(tls);
    }
    let opened = Instant::now();

    // Meanwhile, other clients are served at once (well before the 2 s timeouts free anything).
    let client = https_client(&[&ca]).unwrap();
    let url = format!("https://localhost:{}/mutate", addr.port());
    for i in 0..20 {
        let started = Instant::now();
        let answer: Value = client
            .post(&url)
            .json(&review(&format!("u{i}"), &[]))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(answer["response"]["allowed"], true);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "request {i} waited {:?} behind idle connections",
            started.elapsed()
        );
    }
    assert!(
        opened.elapsed() < Duration::from_secs(2),
        "the check itself was too slow to prove anything"
    );

    // The server closes both kinds after its timeouts (bounded wait).
    for mut tcp in silent {
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(Duration::from_secs(6), tcp.read(&mut buf)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "a silent connection was not closed"
        );
    }
    for mut tls in stalled {
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(6), tls.read_to_end(&mut buf)).await;
        assert!(read.is_ok(), "a stalled connection was not closed");
    }
    running.shutdown().await;
}
