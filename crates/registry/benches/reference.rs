//! Reference parsing and normalization: runs once per container per admission (cache key).
//! Run with `scripts/bench.sh` (or `cargo bench -p noe-registry --bench reference`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use noe_registry::Reference;

const INPUTS: &[(&str, &str)] = &[
    ("short", "nginx"),
    ("tagged", "ghcr.io/acme/team/app:v1.2.3"),
    ("port", "registry.corp.example:5000/platform/base-images/debian:bookworm-slim"),
    (
        "digest",
        "quay.io/prometheus/node-exporter:v1.8.2@sha256:4032c6d5bfd752342c3e631c2f1de93ba6b86c41db6b167b9a35372c139e7706",
    ),
];

fn parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("reference_parse");
    for (name, input) in INPUTS {
        group.bench_function(*name, |b| {
            b.iter(|| Reference::parse(black_box(input)).unwrap())
        });
    }
    group.finish();
    c.bench_function("reference_parse_and_display", |b| {
        b.iter(|| {
            Reference::parse(black_box(INPUTS[1].1))
                .unwrap()
                .to_string()
        })
    });
}

criterion_group!(benches, parse);
criterion_main!(benches);
