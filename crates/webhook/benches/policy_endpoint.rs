//! The lookup endpoint's handler on the warm requests of `noe-bench lookup` (a Gatekeeper
//! `ProviderRequest` of 1 and of 64 keys, a Bearer token whose TokenReview verdict is cached,
//! every image in the resolver's cache), next to what the floor server does with the same body
//! (parse it into a JSON value): the per-request CPU the lookup ratio (docs/benchmarks.md) is
//! made of, without TLS, HTTP or the noise of a load generator; then its steps alone. The images
//! are found once in a real registry (`docker-registry` on loopback), so the warm path reads the
//! resolver's own cache. Run with `cargo bench -p noe-webhook --bench lookup`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
use futures::future::BoxFuture;
use http::{header, Request};
use http_body_util::Full;
use noe_registry::{Config, Resolver};
use noe_test_support::{build_index, push_image, Flavor, IndexEntry, Registry};
use noe_webhook::policy_endpoint::auth::Verdict;
use noe_webhook::policy_endpoint::{
    wire, Auth, Engine, ImageSource, Metrics, PolicyEndpoint, RegistryImages, TokenAuth,
    TokenReviewer,
};
use noe_webhook::resolve::Anonymous;

/// A projected service account token for [`AUDIENCE`] (its shape is checked before any
/// TokenReview), the same for the whole run.
fn token() -> &'static str {
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN.get_or_init(|| {
        noe_test_support::fresh_token("system:serviceaccount:kyverno:kyverno", &[AUDIENCE])
    })
}
const AUDIENCE: &str = "noe-bench";
const REPOSITORY: &str = "bench/app";

/// Accepts the bench's token (what the scripted API answers `noe-bench lookup`).
struct Accepts;

impl TokenReviewer for Accepts {
    fn review<'a>(
        &'a self,
        token: &'a str,
        _audience: &'a str,
    ) -> BoxFuture<'a, Result<Verdict, String>> {
        Box::pin(async move {
            Ok(if token == self::token() {
                Verdict::Authenticated {
                    username: "system:serviceaccount:kyverno:kyverno".into(),
                }
            } else {
                Verdict::Rejected
            })
        })
    }
}

/// A two-platform OCI index pushed under 64 tags; their references.
async fn images(registry: &Registry) -> Vec<String> {
    let pusher = registry.pusher().unwrap();
    let mut entries = Vec::new();
    for platform in ["linux/amd64", "linux/arm64"] {
        let descriptor = push_image(&pusher, REPOSITORY, None, platform, Flavor::Oci)
            .await
            .unwrap();
        entries.push(IndexEntry::new(&descriptor, Some(platform)));
    }
    let (body, descriptor) = build_index(Flavor::Oci, &entries).unwrap();
    let mut images = Vec::new();
    for i in 0..64 {
        let tag = format!("lookup-{i}");
        pusher
            .push_manifest(REPOSITORY, &tag, &descriptor.media_type, &body)
            .await
            .unwrap();
        images.push(format!("{}/{REPOSITORY}:{tag}", registry.host()));
    }
    images
}

/// The body `noe-bench lookup` sends for `keys`.
fn provider_request(keys: &[String]) -> Bytes {
    Bytes::from(
        serde_json::json!({
            "apiVersion": "externaldata.gatekeeper.sh/v1beta1",
            "kind": "ProviderRequest",
            "request": {"keys": keys},
        })
        .to_string(),
    )
}

/// The request as wrk sends it (headers included: they are read on the way).
fn request(body: &Bytes) -> Request<Full<Bytes>> {
    Request::post(noe_webhook::policy_endpoint::GATEKEEPER_PATH)
        .header(header::HOST, "localhost:8443")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::AUTHORIZATION, format!("Bearer {}", token()))
        .header(header::CONTENT_LENGTH, body.len())
        .body(Full::new(body.clone()))
        .unwrap()
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let registry = runtime.block_on(Registry::start()).unwrap();
    let images = runtime.block_on(images(&registry));
    let resolver = Resolver::new(
        Config {
            insecure_registries: vec![registry.host()],
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &prometheus::Registry::new(),
    )
    .unwrap();
    let source = Arc::new(RegistryImages::new(resolver, Arc::new(Anonymous)));
    runtime.block_on(async {
        for image in &images {
            assert!(matches!(
                source.lookup(image).await,
                noe_webhook::policy_endpoint::KeyAnswer::Found { .. }
            ));
        }
    });
    let lookup = PolicyEndpoint::new(
        Auth {
            certificates: false,
            tokens: Some(TokenAuth::new(Arc::new(Accepts), AUDIENCE)),
        },
        source.clone(),
        Duration::from_secs(2),
        64,
        Metrics::register(&prometheus::Registry::new()).unwrap(),
    );

    let mut group = c.benchmark_group("warm lookup");
    let tokens = TokenAuth::new(Arc::new(Accepts), AUDIENCE);
    runtime.block_on(tokens.check(token())).unwrap();
    group.bench_function("step: the token's verdict (cached)", |b| {
        b.iter(|| black_box(runtime.block_on(tokens.check(black_box(token()))).unwrap()))
    });
    for keys in [1usize, 64] {
        let asked = images.get(..keys).unwrap();
        let body = provider_request(asked);
        let answer = runtime.block_on(lookup.answer(Engine::Gatekeeper, request(&body)));
        assert_eq!(answer.status(), http::StatusCode::OK);
        let answer = runtime.block_on(http_body_util::BodyExt::collect(answer.into_body()));
        let answer = answer.unwrap().to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&answer).unwrap();
        let items = json["response"]["items"].as_array().unwrap();
        assert_eq!(items.len(), keys);
        assert!(items.iter().all(|item| item["value"]["digest"].is_string()));

        group.bench_function(format!("{keys} keys: parse only (the floor's work)"), |b| {
            b.iter(|| {
                black_box(serde_json::from_slice::<serde_json::Value>(black_box(&body)).unwrap())
            })
        });
        group.bench_function(format!("{keys} keys: answer (noe's handler)"), |b| {
            b.iter(|| {
                black_box(runtime.block_on(lookup.answer(Engine::Gatekeeper, request(&body))))
            })
        });
        group.bench_function(format!("{keys} keys: step: parse the keys"), |b| {
            b.iter(|| black_box(wire::gatekeeper_keys(black_box(&body)).unwrap()))
        });
        let images: Vec<&str> = asked.iter().map(String::as_str).collect();
        group.bench_function(format!("{keys} keys: step: cache reads"), |b| {
            b.iter(|| black_box(source.cached(black_box(&images))))
        });
        group.bench_function(format!("{keys} keys: step: cache keys (hashes)"), |b| {
            b.iter(|| {
                for image in asked {
                    black_box(noe_registry::cache::Key::new(black_box(image), None));
                }
            })
        });
        let answers: Vec<_> = source.cached(&images).into_iter().flatten().collect();
        assert_eq!(answers.len(), asked.len(), "every image is cached");
        group.bench_function(format!("{keys} keys: step: write the answer"), |b| {
            b.iter(|| {
                black_box(wire::gatekeeper_response(black_box(asked), |i| {
                    answers.get(i)
                }))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
