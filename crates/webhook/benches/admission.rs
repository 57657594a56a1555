//! The whole admission handler on a warm pod review (platforms answered by the cache), next to
//! what the floor server of `noe-bench warm` does with the same body (parse it into a JSON value):
//! the per-request CPU the warm-path ratio (docs/benchmarks.md) is made of, without TLS, HTTP or the
//! noise of a load generator; then two of its steps alone (which images to look up, the
//! decision), and the handler asking a fact source (`--namespace-preference`'s plumbing). Run with
//! `cargo bench -p noe-webhook --bench admission`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use futures::future::BoxFuture;
use noe_core::decide::{Facts, Policy};
use noe_core::Platform;
use noe_registry::cache::Scope;
use noe_webhook::admission::Admission;
use noe_webhook::facts::{FactRequest, FactSource};
use noe_webhook::metrics::Metrics;
use noe_webhook::resolve::{Anonymous, LookupError, PlatformLookup, PodCredentials, Resolve};

/// Every image runs on linux/amd64 and linux/arm64, cached (the warm path never looks up).
struct MultiArch(Arc<[Platform]>);

impl PlatformLookup for MultiArch {
    fn cached(&self, _image: &str, _scope: Option<Scope>) -> Option<Arc<[Platform]>> {
        Some(self.0.clone())
    }

    fn lookup<'a>(
        &'a self,
        _image: &'a str,
        _scope: Option<Scope>,
        _credentials: &'a PodCredentials<'a>,
    ) -> BoxFuture<'a, Result<Arc<[Platform]>, LookupError>> {
        Box::pin(async { Ok(self.0.clone()) })
    }
}

/// A namespace preference answered at once (what a warm `NamespacePreferences` cache returns):
/// the cost of asking for facts, without the cache's own lookup.
struct Prefers;

impl FactSource for Prefers {
    fn facts<'a>(&'a self, _request: FactRequest<'a>) -> BoxFuture<'a, Facts> {
        Box::pin(async {
            Facts {
                namespace_preferred_arch: Some("arm64".to_owned()),
                ..Facts::default()
            }
        })
    }
}

/// The pod review `noe-bench warm` sends (one container, no pull secret).
fn body() -> Vec<u8> {
    let image = "127.0.0.1:5000/fixtures/oci-index:v1".to_owned();
    serde_json::to_vec(&noe_test_support::pod_review(
        "0b4a3a5e-8f3c-4c8e-9d6e-2f1a7c3b5d9e",
        &[image],
    ))
    .unwrap()
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let admission = Admission::new(
        Resolve::new(
            Arc::new(MultiArch(Arc::from(vec![
                Platform::new("linux", "amd64", None),
                Platform::new("linux", "arm64", None),
            ]))),
            Arc::new(Anonymous),
            Duration::from_secs(10),
        ),
        Policy::default(),
        Metrics::register(&prometheus::Registry::new()).unwrap(),
    );
    let body = body();
    let answer = runtime.block_on(admission.review(&body));
    assert!(String::from_utf8_lossy(&answer).contains("\"patch\""));
    let with_facts = Admission::new(
        Resolve::new(
            Arc::new(MultiArch(Arc::from(vec![
                Platform::new("linux", "amd64", None),
                Platform::new("linux", "arm64", None),
            ]))),
            Arc::new(Anonymous),
            Duration::from_secs(10),
        ),
        Policy::default(),
        Metrics::register(&prometheus::Registry::new()).unwrap(),
    )
    .with_facts(Arc::new(Prefers));

    let mut group = c.benchmark_group("warm admission");
    group.bench_function("parse only (the floor's work)", |b| {
        b.iter(|| black_box(serde_json::from_slice::<serde_json::Value>(black_box(&body)).unwrap()))
    });
    group.bench_function("parse as noe's envelope (review::parse)", |b| {
        b.iter(|| black_box(noe_webhook::admission::review::parse(black_box(&body)).unwrap()))
    });
    // kube's envelope types, for the record (src/admission/review.rs says why they are not used).
    group.bench_function(
        "parse as kube::core::admission::AdmissionReview<DynamicObject>",
        |b| {
            b.iter(|| {
                black_box(
                    serde_json::from_slice::<
                        kube::core::admission::AdmissionReview<kube::core::DynamicObject>,
                    >(black_box(&body))
                    .unwrap(),
                )
            })
        },
    );
    group.bench_function(
        "parse as kube's AdmissionReview<DynamicObject>, then the raw pod rebuilt",
        |b| {
            b.iter(|| {
                let review: kube::core::admission::AdmissionReview<kube::core::DynamicObject> =
                    serde_json::from_slice(black_box(&body)).unwrap();
                let object = review.request.unwrap().object.unwrap();
                let mut pod = object.data;
                pod["metadata"] = serde_json::to_value(&object.metadata).unwrap();
                black_box(pod)
            })
        },
    );
    group.bench_function("review (noe's handler)", |b| {
        b.iter(|| black_box(runtime.block_on(admission.review(black_box(&body)))))
    });
    let realistic = serde_json::to_vec(&noe_test_support::deployment_pod_review(
        "0b4a3a5e-8f3c-4c8e-9d6e-2f1a7c3b5d9e",
        &["127.0.0.1:5000/fixtures/oci-index:v1".to_owned()],
    ))
    .unwrap();
    let answer = runtime.block_on(admission.review(&realistic));
    assert!(String::from_utf8_lossy(&answer).contains("\"patch\""));
    group.bench_function("realistic pod: parse only (the floor's work)", |b| {
        b.iter(|| {
            black_box(serde_json::from_slice::<serde_json::Value>(black_box(&realistic)).unwrap())
        })
    });
    group.bench_function("realistic pod: review (noe's handler)", |b| {
        b.iter(|| black_box(runtime.block_on(admission.review(black_box(&realistic)))))
    });
    group.bench_function(
        "review, with a namespace fact source (answered at once)",
        |b| b.iter(|| black_box(runtime.block_on(with_facts.review(black_box(&body))))),
    );
    let review: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let pod = &review["request"]["object"];
    let policy = Policy::default();
    let planned = noe_core::decide::plan(pod, &policy);
    let lookups: noe_core::decide::Lookups = planned
        .images()
        .map(|image| {
            let platforms: Arc<[Platform]> = Arc::from(vec![
                Platform::new("linux", "amd64", None),
                Platform::new("linux", "arm64", None),
            ]);
            (image.to_owned(), Ok(platforms))
        })
        .collect();
    let facts = noe_core::decide::Facts::default();
    group.bench_function("step: plan", |b| {
        b.iter(|| {
            black_box(
                noe_core::decide::plan(black_box(pod), &policy)
                    .images()
                    .count(),
            )
        })
    });
    group.bench_function("step: decide", |b| {
        b.iter(|| {
            black_box(noe_core::decide::decide(
                black_box(&planned),
                &lookups,
                &facts,
                &policy,
            ))
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
