//! The routes in-process (`oneshot`), with a scripted image source and token reviewer: what
//! each refusal and each answer looks like, and what is counted. Over real TLS, real client
//! certificates, the scripted API's TokenReview and a real registry: `noe/tests/noe/e2e_policy_endpoint.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;
use http_body_util::BodyExt as _;
use noe_core::Platform;
use tower::ServiceExt as _;

use super::auth::Verdict;
use super::*;

#[derive(Default)]
struct Images {
    lookups: AtomicUsize,
    /// Stamp the cached answers (a source that can tell what they depend on).
    stamps: std::sync::atomic::AtomicBool,
    /// What [`ImageSource::holds`] answers.
    holding: std::sync::atomic::AtomicBool,
    /// Calls of `cached_stamped`.
    probes: AtomicUsize,
}

impl ImageSource for Images {
    fn cached_stamped(
        &self,
        images: &[&str],
    ) -> (Vec<Option<KeyAnswer>>, Option<noe_registry::cache::Stamp>) {
        self.probes.fetch_add(1, Ordering::SeqCst);
        let stamp = self.stamps.load(Ordering::SeqCst).then(|| {
            noe_registry::cache::Stamp::new(
                0,
                0,
                Some(std::time::Instant::now() + Duration::from_secs(60)),
            )
        });
        (self.cached(images), stamp)
    }

    fn holds(&self, _stamp: &noe_registry::cache::Stamp) -> bool {
        self.holding.load(Ordering::SeqCst)
    }

    fn cached(&self, images: &[&str]) -> Vec<Option<KeyAnswer>> {
        images
            .iter()
            .map(|image| {
                (*image == "nginx").then(|| KeyAnswer::Found {
                    platforms: Arc::from(vec![Platform::new("linux", "arm64", None)]),
                    digest: "sha256:n".into(),
                })
            })
            .collect()
    }

    fn lookup<'a>(&'a self, image: &'a str) -> BoxFuture<'a, KeyAnswer> {
        self.lookups.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if image == "slow" {
                futures::future::pending::<()>().await;
            }
            images::failed("notfound", &format!("{image}: not found on example.test"))
        })
    }
}

/// A token of `name` for the endpoint's audience `noe`, expiring in 2100: the same text each
/// time it is made (the reviewer compares texts).
fn jwt(name: &str) -> String {
    noe_test_support::service_account_token(name, &["noe"], 4_102_444_800)
}

/// Accepts `jwt("good")` only.
struct Reviewer;

impl TokenReviewer for Reviewer {
    fn review<'a>(
        &'a self,
        token: &'a str,
        _audience: &'a str,
    ) -> BoxFuture<'a, Result<Verdict, String>> {
        Box::pin(async move {
            Ok(if token == jwt("good") {
                Verdict::Authenticated {
                    username: "kyverno".into(),
                }
            } else {
                Verdict::Rejected
            })
        })
    }
}

struct Fixture {
    routes: Routes,
    images: Arc<Images>,
    registry: prometheus::Registry,
}

fn fixture() -> Fixture {
    fixture_with(None)
}

fn fixture_with(corrections: Option<Arc<dyn noe_core::truth::Corrections>>) -> Fixture {
    let registry = prometheus::Registry::new();
    let images = Arc::new(Images::default());
    let auth = Auth {
        certificates: true,
        tokens: Some(TokenAuth::new(Arc::new(Reviewer), "noe")),
    };
    let lookup = PolicyEndpoint::new(
        auth,
        images.clone(),
        Duration::from_secs(5),
        8,
        Metrics::register(&registry).unwrap(),
    );
    let lookup = match corrections {
        Some(corrections) => lookup.with_corrections(corrections),
        None => lookup,
    };
    Fixture {
        routes: routes(Arc::new(lookup)),
        images,
        registry,
    }
}

fn gatekeeper(keys: &[&str]) -> String {
    serde_json::json!({
        "apiVersion": "externaldata.gatekeeper.sh/v1beta1",
        "kind": "ProviderRequest",
        "request": {"keys": keys},
    })
    .to_string()
}

async fn call(
    routes: &Routes,
    path: &str,
    certificate: bool,
    token: Option<&str>,
    body: String,
) -> (StatusCode, serde_json::Value) {
    let mut request = Request::post(path);
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let mut request = request.body(Full::new(Bytes::from(body))).unwrap();
    if certificate {
        request.extensions_mut().insert(ClientCertificate);
    }
    let answer = routes.clone().oneshot(request).await.unwrap();
    let status = answer.status();
    let bytes = answer.into_body().collect().await.unwrap().to_bytes();
    let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    (status, json)
}

fn counted(registry: &prometheus::Registry, caller: &str, result: &str) -> u64 {
    registry
        .gather()
        .iter()
        .filter(|family| family.name() == "noe_lookup_requests_total")
        .flat_map(|family| family.get_metric().iter())
        .filter(|metric| {
            let labels: Vec<(&str, &str)> = metric
                .get_label()
                .iter()
                .map(|l| (l.name(), l.value()))
                .collect();
            labels.contains(&("caller", caller)) && labels.contains(&("result", result))
        })
        .map(|metric| metric.get_counter().get_value() as u64)
        .sum()
}

#[tokio::test]
async fn a_caller_with_neither_certificate_nor_token_gets_nothing() {
    let f = fixture();
    let (status, json) = call(
        &f.routes,
        GATEKEEPER_PATH,
        false,
        None,
        gatekeeper(&["nginx"]),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(json["response"]["items"], serde_json::json!([]));
    assert!(!json.to_string().contains("arm64"), "{json}");
    let (status, json) = call(
        &f.routes,
        KYVERNO_PATH,
        false,
        Some(&jwt("stolen")),
        r#"{"images":["nginx"]}"#.to_owned(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(!json.to_string().contains("arm64"), "{json}");
    assert_eq!(counted(&f.registry, "gatekeeper", "unauthenticated"), 1);
    assert_eq!(counted(&f.registry, "kyverno", "forbidden"), 1);
}

#[tokio::test]
async fn certificate_or_token_gets_answers() {
    let f = fixture();
    let (status, json) = call(
        &f.routes,
        GATEKEEPER_PATH,
        true,
        None,
        gatekeeper(&["nginx", "missing", "nginx"]),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let items = json["response"]["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert_eq!(items[0]["key"], "nginx");
    assert_eq!(
        items[0]["value"],
        serde_json::json!({"platforms": ["linux/arm64"], "digest": "sha256:n"})
    );
    assert_eq!(items[1]["key"], "missing");
    assert!(items[1]["error"]
        .as_str()
        .unwrap()
        .starts_with("notfound: "));
    assert_eq!(json["response"]["idempotent"], true);
    assert!(json["response"].get("systemError").is_none());

    let (status, json) = call(
        &f.routes,
        KYVERNO_PATH,
        false,
        Some(&jwt("good")),
        r#"{"images":["nginx"]}"#.to_owned(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json["common"], serde_json::json!(["linux/arm64"]));
    assert_eq!(json["complete"], true);
    assert_eq!(counted(&f.registry, "gatekeeper", "partial"), 1);
    assert_eq!(counted(&f.registry, "kyverno", "ok"), 1);
    assert_eq!(f.images.lookups.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn bounds() {
    let f = fixture();
    let many: Vec<String> = (0..257).map(|i| format!("image{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let (status, json) = call(&f.routes, GATEKEEPER_PATH, true, None, gatekeeper(&many)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        json["response"]["systemError"],
        "257 keys, at most 256 per request"
    );
    let (status, _) = call(
        &f.routes,
        GATEKEEPER_PATH,
        true,
        None,
        gatekeeper(&many[..256]),
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    // 1 MiB + 1 byte, whatever it holds.
    let body = format!(
        r#"{{"images":["{}"]}}"#,
        "a".repeat(MAX_BODY_BYTES + 1 - 15)
    );
    assert_eq!(body.len(), MAX_BODY_BYTES + 1);
    let (status, _) = call(&f.routes, KYVERNO_PATH, true, None, body).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);

    let (status, json) = call(&f.routes, KYVERNO_PATH, true, None, "not json".to_owned()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(json["error"].as_str().unwrap().contains("not a"));

    let get = Request::get(KYVERNO_PATH)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let answer = f.routes.clone().oneshot(get).await.unwrap();
    assert_eq!(answer.status(), StatusCode::METHOD_NOT_ALLOWED);
    let other = Request::post("/mutate")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let answer = f.routes.clone().oneshot(other).await.unwrap();
    assert_eq!(answer.status(), StatusCode::NOT_FOUND);
    assert_eq!(counted(&f.registry, "gatekeeper", "invalid"), 1);
    assert_eq!(counted(&f.registry, "kyverno", "too_large"), 1);
    assert_eq!(counted(&f.registry, "kyverno", "invalid"), 2);
}

/// Time is paused: the caller's 300 ms ends the slow key's lookup with a `timeout:` error at
/// 270 ms (a tenth kept to answer), the cached key answered.
#[tokio::test(start_paused = true)]
async fn the_callers_timeout_bounds_each_key() {
    let f = fixture();
    let started = tokio::time::Instant::now();
    let (status, json) = call(
        &f.routes,
        "/gatekeeper/v1/platforms?timeout=300ms",
        true,
        None,
        gatekeeper(&["nginx", "slow"]),
    )
    .await;
    assert_eq!(started.elapsed(), Duration::from_millis(270));
    assert_eq!(status, StatusCode::OK);
    let items = &json["response"]["items"];
    assert_eq!(items[0]["value"]["digest"], "sha256:n");
    assert!(items[1]["error"].as_str().unwrap().starts_with("timeout: "));
    assert_eq!(counted(&f.registry, "gatekeeper", "partial"), 1);

    let (status, json) = call(
        &f.routes,
        "/gatekeeper/v1/platforms?timeout=soon",
        true,
        None,
        gatekeeper(&["nginx"]),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(json["response"]["systemError"]
        .as_str()
        .unwrap()
        .contains("invalid timeout"));
}

#[test]
fn caller_timeouts() {
    let ok = [
        (None, None),
        (Some("x=1"), None),
        (Some("timeout=1500ms"), Some(Duration::from_millis(1500))),
        (Some("a=b&timeout=1.5s"), Some(Duration::from_millis(1500))),
        (Some("timeout=1"), Some(Duration::from_secs(1))),
        (Some("timeout=60s"), Some(MAX_DEADLINE)),
    ];
    for (query, want) in ok {
        assert_eq!(caller_timeout(query), Ok(want), "{query:?}");
    }
    for bad in [
        "timeout=",
        "timeout=0",
        "timeout=-1s",
        "timeout=NaN",
        "timeout=1h",
    ] {
        assert!(caller_timeout(Some(bad)).is_err(), "{bad}");
    }
}

/// A request answered from the cache alone is answered again, byte for byte and without a
/// probe, while the source says those answers hold; one with a key the cache did not have is
/// never remembered; every request is counted.
#[tokio::test]
async fn answers_from_the_cache_are_remembered_while_they_hold() {
    let f = fixture();
    f.images.stamps.store(true, Ordering::SeqCst);
    f.images.holding.store(true, Ordering::SeqCst);
    let body = gatekeeper(&["nginx", "nginx", ""]);
    let first = call(&f.routes, GATEKEEPER_PATH, true, None, body.clone()).await;
    assert_eq!(first.0, StatusCode::OK);
    assert_eq!(
        first.1["response"]["items"][0]["value"]["digest"],
        "sha256:n"
    );
    let second = call(&f.routes, GATEKEEPER_PATH, true, None, body.clone()).await;
    assert_eq!(second, first);
    assert_eq!(
        f.images.probes.load(Ordering::SeqCst),
        1,
        "answered as before"
    );
    // The Kyverno route with the same body is another request.
    call(
        &f.routes,
        KYVERNO_PATH,
        true,
        None,
        r#"{"images":["nginx"]}"#.into(),
    )
    .await;
    assert_eq!(f.images.probes.load(Ordering::SeqCst), 2);

    // The cache answers changed (an entry replaced or expired): probed again.
    f.images.holding.store(false, Ordering::SeqCst);
    let third = call(&f.routes, GATEKEEPER_PATH, true, None, body.clone()).await;
    assert_eq!(third, first);
    assert_eq!(f.images.probes.load(Ordering::SeqCst), 3);

    // A key the cache did not have: looked up each time, never remembered.
    f.images.holding.store(true, Ordering::SeqCst);
    let missing = gatekeeper(&["nginx", "redis"]);
    for _ in 0..2 {
        let (status, answer) = call(&f.routes, GATEKEEPER_PATH, true, None, missing.clone()).await;
        assert_eq!(status, StatusCode::OK);
        assert!(answer["response"]["items"][1]["error"]
            .as_str()
            .unwrap()
            .starts_with("notfound:"));
    }
    assert_eq!(f.images.probes.load(Ordering::SeqCst), 5);
    assert_eq!(f.images.lookups.load(Ordering::SeqCst), 2);

    // A caller refused before is refused: the answer is never given without authentication.
    let (status, _) = call(&f.routes, GATEKEEPER_PATH, false, None, body).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let counted: f64 = f
        .registry
        .gather()
        .iter()
        .filter(|family| family.name() == "noe_lookup_requests_total")
        .flat_map(|family| family.get_metric().iter())
        .map(|metric| metric.get_counter().get_value())
        .sum();
    assert_eq!(
        counted, 7.0,
        "every request counted, answered as before or not"
    );
}

/// A platform proven false for an image's digest is left out of its answer, and an answer
/// remembered under one generation of corrections is not given under another.
#[tokio::test]
async fn corrected_platforms_are_left_out_and_never_answered_from_another_generation() {
    let fake = noe_test_support::FakeCorrections::arm64_false("sha256:n");
    let f = fixture_with(Some(fake.clone()));
    f.images.stamps.store(true, Ordering::SeqCst);
    f.images.holding.store(true, Ordering::SeqCst);
    let body = gatekeeper(&["nginx"]);
    for _ in 0..2 {
        let (status, json) = call(&f.routes, GATEKEEPER_PATH, true, None, body.clone()).await;
        assert_eq!(status, StatusCode::OK);
        let value = &json["response"]["items"][0]["value"];
        assert_eq!(value["platforms"], serde_json::json!([]), "{json}");
        assert_eq!(value["digest"], "sha256:n");
    }
    assert_eq!(f.images.probes.load(Ordering::SeqCst), 1, "remembered");
    fake.clear();
    let (_, json) = call(&f.routes, GATEKEEPER_PATH, true, None, body).await;
    assert_eq!(
        json["response"]["items"][0]["value"]["platforms"],
        serde_json::json!(["linux/arm64"]),
        "{json}"
    );
    assert_eq!(
        f.images.probes.load(Ordering::SeqCst),
        2,
        "not the old answer"
    );
}
