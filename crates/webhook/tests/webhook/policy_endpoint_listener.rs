//! The policy-engine endpoint behind its own HTTPS listener (`Running::add_https`), with
//! a scripted token reviewer and image source: what real HTTP/1.1 and HTTP/2 clients get.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use noe_test_support::TestCa;
use noe_webhook::policy_endpoint::auth::Verdict;
use noe_webhook::policy_endpoint::{
    self, Auth, ImageSource, KeyAnswer, PolicyEndpoint, TokenAuth, TokenReviewer,
};
use noe_webhook::server::tls::{CertDir, Reloadable};
use noe_webhook::server::{self, Addresses, BodyLimits, Limits, Running};

use crate::cert_dir;

/// Accepts the token [`good`], rejects anything else.
struct Reviewer;

impl TokenReviewer for Reviewer {
    fn review<'a>(
        &'a self,
        token: &'a str,
        _audience: &'a str,
    ) -> BoxFuture<'a, Result<Verdict, String>> {
        Box::pin(async move {
            Ok(if token == good() {
                Verdict::Authenticated {
                    username: "system:serviceaccount:kyverno:kyverno".into(),
                }
            } else {
                Verdict::Rejected
            })
        })
    }
}

/// A projected token for the endpoint's audience `aud`.
fn good() -> &'static str {
    static GOOD: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    GOOD.get_or_init(|| noe_test_support::fresh_token("kyverno", &["aud"]))
}

/// A token for `aud` no review accepts.
fn stranger() -> &'static str {
    static STRANGER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    STRANGER.get_or_init(|| noe_test_support::fresh_token("stranger", &["aud"]))
}

/// Every image is `linux/arm64`, from the cache.
struct Images;

impl ImageSource for Images {
    fn cached(&self, images: &[&str]) -> Vec<Option<KeyAnswer>> {
        images
            .iter()
            .map(|_| {
                Some(KeyAnswer::Found {
                    platforms: Arc::from(vec![noe_core::Platform::new("linux", "arm64", None)]),
                    digest: "sha256:0".into(),
                })
            })
            .collect()
    }

    fn lookup<'a>(&'a self, _image: &'a str) -> BoxFuture<'a, KeyAnswer> {
        Box::pin(async { policy_endpoint::images::failed("notfound", "not found") })
    }
}

struct Endpoint {
    running: Running,
    addr: std::net::SocketAddr,
    ca: TestCa,
    _dir: tempfile::TempDir,
}

async fn start(limits: Limits) -> Endpoint {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (dir, ca) = cert_dir("lookup-ca");
    let (_watched, key) = CertDir::load(dir.path()).unwrap();
    let tls = Reloadable::new(key);
    let any = "127.0.0.1:0".parse().unwrap();
    let addresses = Addresses {
        webhook: any,
        metrics: any,
        health: any,
    };
    let mut running = server::start(
        addresses,
        tls.clone(),
        server::admission_routes(Arc::new(Nothing), BodyLimits::default()),
        limits,
        prometheus::Registry::new(),
    )
    .await
    .unwrap();
    let endpoint = PolicyEndpoint::new(
        Auth {
            certificates: false,
            tokens: Some(TokenAuth::new(Arc::new(Reviewer), "aud")),
        },
        Arc::new(Images),
        Duration::from_secs(2),
        8,
        policy_endpoint::Metrics::register(&prometheus::Registry::new()).unwrap(),
    );
    let config = policy_endpoint::server_config(&tls, None).unwrap();
    let addr = running
        .add_https(
            any,
            config,
            tls,
            policy_endpoint::routes(Arc::new(endpoint)),
            limits,
        )
        .await
        .unwrap();
    Endpoint {
        running,
        addr,
        ca,
        _dir: dir,
    }
}

/// The admission handler is not used here.
struct Nothing;

impl server::Handler for Nothing {
    async fn handle(&self, body: Bytes) -> Bytes {
        body
    }

    fn recover(&self, body: &[u8]) -> Bytes {
        Bytes::copy_from_slice(body)
    }
}

/// A raw HTTP/2 client connection (the `h2` crate under hyper and reqwest, whose API shows the
/// frames a stream ends with) to `addr`, trusting `ca`.
async fn http2(addr: std::net::SocketAddr, ca: &TestCa) -> h2::client::SendRequest<Bytes> {
    let mut config = ca.client_config().unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (sender, connection) = h2::client::handshake(tls).await.unwrap();
    tokio::spawn(connection);
    sender
}

/// How one stream ended: its status and body, or what went wrong; and whether the server reset
/// it (`RST_STREAM`, even with `NO_ERROR`: curl before 8 then drops the answer it was given).
#[derive(Debug)]
struct Ended {
    answer: Result<(u16, Bytes), String>,
    reset: Option<h2::Reason>,
}

/// POSTs `body` to the Kyverno route with `token`, the way clients send: the headers, then the
/// body in DATA frames ending the stream.
async fn post(sender: h2::client::SendRequest<Bytes>, token: Option<&str>, body: Bytes) -> Ended {
    let mut request = http::Request::post(format!(
        "https://localhost{}",
        policy_endpoint::KYVERNO_PATH
    ))
    .header("content-type", "application/json");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let request = request.body(()).unwrap();
    let mut sender = match sender.ready().await {
        Ok(sender) => sender,
        Err(error) => {
            return Ended {
                answer: Err(format!("not ready: {error}")),
                reset: None,
            }
        }
    };
    let (response, mut stream) = sender.send_request(request, false).unwrap();
    let sent = stream.send_data(body, true);
    let answer = async {
        sent.map_err(|error| format!("sending the body: {error}"))?;
        let response = response
            .await
            .map_err(|error| format!("no answer: {error}"))?;
        let status = response.status().as_u16();
        let mut received = response.into_body();
        let mut body = Vec::new();
        while let Some(chunk) = received.data().await {
            let chunk = chunk.map_err(|error| format!("{status}, then: {error}"))?;
            let _ = received.flow_control().release_capacity(chunk.len());
            body.extend_from_slice(&chunk);
        }
        Ok((status, Bytes::from(body)))
    }
    .await;
    let reset = match futures::poll!(futures::future::poll_fn(|cx| stream.poll_reset(cx))) {
        std::task::Poll::Ready(Ok(reason)) => Some(reason),
        _ => None,
    };
    Ended { answer, reset }
}

/// Unauthenticated and forbidden requests over one HTTP/2 connection, interleaved with
/// authenticated ones, each with a body of 30 KiB (a policy engine's request for 250 pinned images;
/// several DATA frames): every refusal is a whole 401 or 403 answer on a stream the
/// server does not reset, and the authenticated streams beside them are answered. Then the
/// same over one HTTP/1.1 keep-alive connection.
#[tokio::test]
async fn refusals_are_whole_answers_over_http2_and_http1() {
    let e = start(Limits::default()).await;
    let sender = http2(e.addr, &e.ca).await;
    let images: Vec<String> = (0..250)
        .map(|i| {
            format!(
                "registry.example/platform-team/services/checkout/app-{i:04}@sha256:{}",
                "0".repeat(64)
            )
        })
        .collect();
    let body = Bytes::from(serde_json::json!({ "images": images }).to_string());
    assert!((30_000..noe_webhook::server::post::DRAIN_BYTES).contains(&body.len()));
    let mut requests = Vec::new();
    for i in 0..60 {
        let token = match i % 4 {
            0 => None,
            1 => Some("garbage"),
            2 => Some(stranger()),
            _ => Some(good()),
        };
        let sender = sender.clone();
        let body = body.clone();
        requests.push(tokio::spawn(async move {
            (token, post(sender, token, body).await)
        }));
    }
    let mut failures = Vec::new();
    for request in requests {
        let (token, ended) = request.await.unwrap();
        let want = match token {
            None => 401,
            Some(token) if token == good() => 200,
            Some(_) => 403,
        };
        match &ended {
            Ended {
                answer: Ok((status, body)),
                reset: None,
            } if *status == want => {
                let json: serde_json::Value = serde_json::from_slice(body).unwrap();
                if want != 200 {
                    assert!(json["error"].is_string(), "{json}");
                }
            }
            _ => failures.push(format!("{token:?}: {ended:?}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 60 streams did not end with their answer alone: {failures:#?}",
        failures.len()
    );

    // HTTP/1.1, one keep-alive connection: the same answers, in turn.
    let mut config = e.ca.client_config().unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let client = reqwest::Client::builder()
        .use_preconfigured_tls(config)
        .http1_only()
        .pool_max_idle_per_host(1)
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let url = format!(
        "https://localhost:{}{}",
        e.addr.port(),
        policy_endpoint::KYVERNO_PATH
    );
    for i in 0..30 {
        let (token, want) = match i % 3 {
            0 => (None, 401),
            1 => (Some(stranger()), 403),
            _ => (Some(good()), 200),
        };
        let mut request = client.post(&url).body(body.clone());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.version(), http::Version::HTTP_11);
        assert_eq!(response.status().as_u16(), want, "{token:?}");
        let json: serde_json::Value = response.json().await.unwrap();
        assert!(want == 200 || json["error"].is_string(), "{json}");
    }
    e.running.shutdown().await;
}

/// 1,100 plain TCP connections that never start TLS, from another loopback address and then
/// from the client's own: a policy engine's next request is still answered, well within its
/// own 1–2 s timeout.
#[tokio::test]
async fn connections_that_never_start_tls_do_not_keep_a_policy_engine_waiting() {
    let e = start(Limits::default()).await;
    let mut config = e.ca.client_config().unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    config.resumption = rustls::client::Resumption::disabled();
    // A new connection (and TLS handshake) per request, as after an idle timeout.
    let client = reqwest::Client::builder()
        .use_preconfigured_tls(config)
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let url = format!(
        "https://localhost:{}{}",
        e.addr.port(),
        policy_endpoint::KYVERNO_PATH
    );
    let mut held = Vec::new();
    for source in ["127.0.0.2", "127.0.0.1"] {
        let source: std::net::IpAddr = source.parse().unwrap();
        held.push(
            noe_test_support::silent_connections(e.addr, source, 1100)
                .await
                .unwrap(),
        );
        let answered = tokio::time::timeout(
            Duration::from_secs(2),
            client
                .post(&url)
                .bearer_auth(good())
                .body(r#"{"images":["nginx"]}"#)
                .send(),
        )
        .await
        .unwrap_or_else(|_| panic!("from {source}: no answer within 2 s"))
        .unwrap();
        assert_eq!(answered.status(), 200);
    }
    drop(held);
    e.running.shutdown().await;
}
