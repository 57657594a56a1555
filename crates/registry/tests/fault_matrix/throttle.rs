//! The per-host rate limiter and circuit breaker against the fake registry: after a 429 the
//! host is not asked again until its `Retry-After` has passed (every lookup to it fails at once,
//! saying why), five 5xx in a row do the same, other hosts are unaffected, and a client-side
//! rate limit refuses what it would delay past the request timeout.

use std::time::Duration;

use noe_registry::{Config, Error, Resolver};
use noe_test_support::{Behavior, FakeRegistry};

use crate::{counter_sum, index_body, Harness, OCI_INDEX, TIMEOUT};

fn manifest(fake: &FakeRegistry, repository: &str, arch: &str) {
    fake.route(
        &format!("/v2/{repository}/manifests/1"),
        Behavior::manifest(OCI_INDEX, index_body(arch)),
    );
}

#[tokio::test]
async fn a_429_holds_the_host_back_until_retry_after_passes() {
    let mut h = Harness::start().await;
    let busy = h.busy.host();
    // Retry-After: 1 s fits in the 2 s request timeout: retried once, then held back.
    h.busy.route(
        "/v2/limited/app/manifests/1",
        Behavior::too_many_requests(1),
    );
    manifest(&h.busy, "healthy/app", "riscv64");
    let error = h
        .resolver
        .resolve(&format!("{busy}/limited/app:1"), &[])
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::Status { status: 429, .. }),
        "{error:?}"
    );
    assert_eq!(h.busy.request_count(), 2);

    // Another image of that host fails at once, without a request, and says why.
    let healthy = format!("{busy}/healthy/app:1");
    let error = h.resolver.resolve(&healthy, &[]).await.unwrap_err();
    assert_eq!(error.kind(), "circuit_open");
    let message = error.to_string();
    assert!(
        message.contains("429") && message.contains(&busy),
        "{message}"
    );
    assert_eq!(h.busy.request_count(), 2);
    // Other hosts are not held back.
    h.assert_healthy("429 on another host").await;
    // Opened by the first 429, and again by the retry's once the first second had passed.
    assert_eq!(
        counter_sum(
            &h.metrics,
            "noe_registry_circuit_opened_total",
            "cause",
            &["too_many_requests"]
        ),
        2.0
    );
    assert!(
        counter_sum(
            &h.metrics,
            "noe_registry_throttled_total",
            "reason",
            &["circuit_open"]
        ) >= 1.0
    );

    // Once Retry-After has passed, the host is asked again (a fresh image: the failure cache
    // answers the held-back one for a few seconds more).
    tokio::time::sleep(Duration::from_millis(1100)).await;
    h.busy.reset_requests();
    manifest(&h.busy, "fresh/app", "riscv64");
    let resolution = h
        .resolver
        .resolve(&format!("{busy}/fresh/app:1"), &[])
        .await
        .unwrap();
    assert_eq!(resolution.platforms[0].architecture, "riscv64");
    assert_eq!(h.busy.request_count(), 1);
}

#[tokio::test]
async fn five_server_errors_in_a_row_hold_the_host_back() {
    let h = Harness::start().await;
    let busy = h.busy.host();
    for i in 0..3 {
        h.busy.route(
            &format!("/v2/broken{i}/app/manifests/1"),
            Behavior::status(500),
        );
    }
    manifest(&h.busy, "healthy/app", "riscv64");
    let mut kinds = Vec::new();
    for i in 0..3 {
        let error = h
            .resolver
            .resolve(&format!("{busy}/broken{i}/app:1"), &[])
            .await
            .unwrap_err();
        kinds.push(error.kind());
    }
    // Two requests per lookup (one retry); the fifth 500 opened the breaker, so the third
    // lookup's retry was not sent.
    assert_eq!(kinds, ["http_status", "http_status", "circuit_open"]);
    assert_eq!(h.busy.request_count(), 5);
    let error = h
        .resolver
        .resolve(&format!("{busy}/healthy/app:1"), &[])
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("5xx 5 times in a row"),
        "{error}"
    );
    assert_eq!(h.busy.request_count(), 5);
    assert_eq!(
        counter_sum(
            &h.metrics,
            "noe_registry_circuit_opened_total",
            "cause",
            &["server_errors"]
        ),
        1.0
    );
}

#[tokio::test]
async fn the_rate_limit_refuses_what_it_would_delay_past_the_timeout() {
    let fake = FakeRegistry::start().await.unwrap();
    for i in 0..4 {
        manifest(&fake, &format!("app{i}"), "amd64");
    }
    let metrics = prometheus::Registry::new();
    let resolver = Resolver::new(
        Config {
            insecure_registries: vec![fake.host()],
            request_timeout: TIMEOUT,
            // One request per 10 s after a burst of two: a third one would wait ~10 s.
            registry_qps: 0.1,
            registry_burst: 2,
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &metrics,
    )
    .unwrap();
    let lookups = (0..4).map(|i| {
        let (resolver, image) = (&resolver, format!("{}/app{i}:1", fake.host()));
        async move { resolver.resolve(&image, &[]).await }
    });
    let results = futures::future::join_all(lookups).await;
    let kinds: Vec<&str> = results
        .iter()
        .map(|r| r.as_ref().map_or_else(Error::kind, |_| "ok"))
        .collect();
    assert_eq!(kinds.iter().filter(|k| **k == "ok").count(), 2, "{kinds:?}");
    assert_eq!(
        kinds.iter().filter(|k| **k == "rate_limited").count(),
        2,
        "{kinds:?}"
    );
    assert_eq!(fake.request_count(), 2);
    assert_eq!(
        counter_sum(
            &metrics,
            "noe_registry_throttled_total",
            "reason",
            &["rate_limited"]
        ),
        2.0
    );
}
