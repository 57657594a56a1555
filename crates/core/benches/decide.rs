//! The pure decision on a realistic pod (two containers, an init container, labels, an existing
//! affinity, tolerations) with its platforms already looked up: the CPU cost of a warm admission
//! besides JSON and TLS. `plan` reads the pod (what the admission needs to look up), `decide`
//! decides from the plan; `plan_and_decide` is what one admission costs. Run with
//! `scripts/bench.sh` (or `cargo bench -p noe-core --bench decide`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use noe_core::decide::{decide, plan, Facts, Lookups, Policy, PreferenceMode};
use noe_core::Platform;
use serde_json::{json, Value};

fn pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "web-7d9f8b6c5d-",
            "namespace": "shop",
            "labels": {"app": "web", "pod-template-hash": "7d9f8b6c5d", "team": "checkout"},
            "annotations": {"prometheus.io/scrape": "true"}
        },
        "spec": {
            "initContainers": [{"name": "migrate", "image": "ghcr.io/acme/migrate:1.4"}],
            "containers": [
                {"name": "web", "image": "ghcr.io/acme/web:2.31.0",
                 "ports": [{"containerPort": 8080}],
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}},
                {"name": "envoy", "image": "docker.io/envoyproxy/envoy:v1.31.2"}
            ],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "node.kubernetes.io/pool", "operator": "In", "values": ["general"]}
                ]}]
            }}},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}],
            "serviceAccountName": "web"
        }
    })
}

fn platforms(specs: &[&str]) -> Result<std::sync::Arc<[Platform]>, noe_core::decide::LookupError> {
    Ok(specs
        .iter()
        .map(|s| {
            let mut parts = s.split('/');
            let os = parts.next().unwrap();
            let arch = parts.next().unwrap();
            Platform::new(os, arch, parts.next())
        })
        .collect())
}

fn lookups() -> Lookups {
    [
        (
            "ghcr.io/acme/migrate:1.4",
            &["linux/amd64", "linux/arm64"][..],
        ),
        (
            "ghcr.io/acme/web:2.31.0",
            &["linux/amd64", "linux/arm64", "linux/arm/v7"][..],
        ),
        (
            "docker.io/envoyproxy/envoy:v1.31.2",
            &["linux/amd64", "linux/arm64", "unknown/unknown"][..],
        ),
    ]
    .into_iter()
    .map(|(image, specs)| (image.to_owned(), platforms(specs)))
    .collect()
}

fn bench(c: &mut Criterion) {
    let pod = pod();
    let lookups = lookups();
    let required = Policy::default();
    let preferred = Policy {
        preference_mode: PreferenceMode::Preferred,
        preferred_arch: Some("arm64".into()),
        ..Policy::default()
    };
    let facts = Facts::default();
    c.bench_function("plan", |b| b.iter(|| plan(black_box(&pod), &required)));
    let required_plan = plan(&pod, &required);
    let preferred_plan = plan(&pod, &preferred);
    c.bench_function("decide_required_mode", |b| {
        b.iter(|| {
            decide(
                black_box(&required_plan),
                black_box(&lookups),
                &facts,
                black_box(&required),
            )
        })
    });
    c.bench_function("decide_preferred_mode", |b| {
        b.iter(|| {
            decide(
                black_box(&preferred_plan),
                black_box(&lookups),
                &facts,
                black_box(&preferred),
            )
        })
    });
    c.bench_function("plan_and_decide", |b| {
        b.iter(|| {
            let plan = plan(black_box(&pod), &required);
            decide(&plan, black_box(&lookups), &facts, &required)
        })
    });
    let raw = serde_json::to_vec(&pod).unwrap();
    c.bench_function("parse_pod_json_and_decide", |b| {
        b.iter(|| {
            let pod: Value = serde_json::from_slice(black_box(&raw)).unwrap();
            let plan = plan(&pod, &required);
            decide(&plan, &lookups, &facts, &required)
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
