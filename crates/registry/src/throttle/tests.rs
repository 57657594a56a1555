//! The limiter and the breaker on a paused clock: waits and open periods are exact virtual
//! time.

use super::*;
use crate::budget::Budget;
use crate::Config;

fn throttle(qps: f64, burst: u32) -> (Throttle, prometheus::Registry) {
    let registry = prometheus::Registry::new();
    let metrics = Metrics::new(&registry, &Config::default()).unwrap();
    (Throttle::new(qps, burst, metrics), registry)
}

fn ctx() -> Context {
    Context {
        reference: "r.example/app:1".into(),
        registry: "r.example".into(),
        budget: Budget::new(32),
    }
}

const HOST: &str = "r.example";
const LONG: Duration = Duration::from_secs(60);

#[tokio::test(start_paused = true)]
async fn the_bucket_lets_a_burst_through_then_spaces_requests() {
    let (throttle, _) = throttle(10.0, 2);
    let started = Instant::now();
    for _ in 0..2 {
        throttle.admit(&ctx(), HOST, LONG).await.unwrap();
    }
    assert_eq!(started.elapsed(), Duration::ZERO);
    throttle.admit(&ctx(), HOST, LONG).await.unwrap();
    throttle.admit(&ctx(), HOST, LONG).await.unwrap();
    // Two more at 10 per second: 100 ms each.
    assert_eq!(started.elapsed(), Duration::from_millis(200));
    // Another host has its own bucket.
    throttle.admit(&ctx(), "other.example", LONG).await.unwrap();
    assert_eq!(started.elapsed(), Duration::from_millis(200));
}

#[tokio::test(start_paused = true)]
async fn a_wait_longer_than_the_request_may_take_fails_at_once() {
    let (throttle, _) = throttle(0.1, 1);
    throttle.admit(&ctx(), HOST, LONG).await.unwrap();
    let started = Instant::now();
    let error = throttle
        .admit(&ctx(), HOST, Duration::from_secs(2))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), "rate_limited");
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert!(error.to_string().contains("r.example"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn unlimited_by_default() {
    let (throttle, _) = throttle(0.0, 1);
    let started = Instant::now();
    for _ in 0..1000 {
        throttle.admit(&ctx(), HOST, LONG).await.unwrap();
    }
    assert_eq!(started.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_429_holds_the_host_back_until_retry_after() {
    let (throttle, registry) = throttle(0.0, 1);
    throttle.record(
        &ctx(),
        HOST,
        StatusCode::TOO_MANY_REQUESTS,
        Some(Duration::from_secs(30)),
    );
    let error = throttle.admit(&ctx(), HOST, LONG).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::CircuitOpen {
                cause: Cause::TooManyRequests,
                retry_in_secs: 31,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("429"), "{error}");
    throttle.admit(&ctx(), "other.example", LONG).await.unwrap();
    tokio::time::advance(Duration::from_secs(29)).await;
    assert!(throttle.admit(&ctx(), HOST, LONG).await.is_err());
    tokio::time::advance(Duration::from_secs(1)).await;
    throttle.admit(&ctx(), HOST, LONG).await.unwrap();
    let text = prometheus::TextEncoder::new()
        .encode_to_string(&registry.gather())
        .unwrap();
    assert!(
        text.contains(
            "noe_registry_circuit_opened_total{cause=\"too_many_requests\",registry=\"other\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains("noe_registry_throttled_total{reason=\"circuit_open\",registry=\"other\"} 2"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_capped_and_defaulted() {
    let (throttle, _) = throttle(0.0, 1);
    throttle.record(
        &ctx(),
        HOST,
        StatusCode::TOO_MANY_REQUESTS,
        Some(Duration::from_secs(u64::MAX)),
    );
    tokio::time::advance(MAX_OPEN).await;
    throttle.admit(&ctx(), HOST, LONG).await.unwrap();
    throttle.record(&ctx(), HOST, StatusCode::TOO_MANY_REQUESTS, None);
    tokio::time::advance(DEFAULT_OPEN - Duration::from_millis(1)).await;
    assert!(throttle.admit(&ctx(), HOST, LONG).await.is_err());
    tokio::time::advance(Duration::from_millis(1)).await;
    throttle.admit(&ctx(), HOST, LONG).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn repeated_server_errors_open_it_and_a_success_closes_it() {
    let (throttle, _) = throttle(0.0, 1);
    for _ in 1..FAILURES_TO_OPEN {
        throttle.record(&ctx(), HOST, StatusCode::SERVICE_UNAVAILABLE, None);
        throttle.admit(&ctx(), HOST, LONG).await.unwrap();
    }
    // A success in between starts the count again.
    throttle.record(&ctx(), HOST, StatusCode::OK, None);
    for _ in 1..FAILURES_TO_OPEN {
        throttle.record(&ctx(), HOST, StatusCode::BAD_GATEWAY, None);
    }
    throttle.admit(&ctx(), HOST, LONG).await.unwrap();
    throttle.record(&ctx(), HOST, StatusCode::INTERNAL_SERVER_ERROR, None);
    let error = throttle.admit(&ctx(), HOST, LONG).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::CircuitOpen {
                cause: Cause::ServerErrors,
                ..
            }
        ),
        "{error:?}"
    );
    // After the open period one request goes; another 5xx opens it again at once.
    tokio::time::advance(DEFAULT_OPEN).await;
    throttle.admit(&ctx(), HOST, LONG).await.unwrap();
    throttle.record(&ctx(), HOST, StatusCode::INTERNAL_SERVER_ERROR, None);
    assert!(throttle.admit(&ctx(), HOST, LONG).await.is_err());
    tokio::time::advance(DEFAULT_OPEN).await;
    throttle.record(&ctx(), HOST, StatusCode::OK, None);
    throttle.admit(&ctx(), HOST, LONG).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_host_table_stays_bounded() {
    let (throttle, _) = throttle(1.0, 1);
    for i in 0..(MAX_HOSTS * 2) {
        let host = format!("r{i}.example");
        throttle.admit(&ctx(), &host, LONG).await.unwrap();
        throttle.record(&ctx(), &host, StatusCode::TOO_MANY_REQUESTS, None);
    }
    let held = throttle.hosts.lock().unwrap().len();
    assert!(held <= MAX_HOSTS, "{held} hosts");
}

#[tokio::test(start_paused = true)]
async fn a_host_flood_never_closes_an_open_breaker() {
    let (throttle, _) = throttle(1.0, 1);
    throttle.admit(&ctx(), HOST, LONG).await.unwrap();
    throttle.record(
        &ctx(),
        HOST,
        StatusCode::TOO_MANY_REQUESTS,
        Some(Duration::from_secs(600)),
    );
    // A pod naming more hosts than the table holds, each asked once (none idle yet).
    for i in 0..5000 {
        let host = format!("r{i}.flood.example");
        throttle.admit(&ctx(), &host, LONG).await.unwrap();
        throttle.record(&ctx(), &host, StatusCode::OK, None);
    }
    let held = throttle.hosts.lock().unwrap().len();
    assert!(held <= MAX_HOSTS, "{held} hosts");
    let error = throttle.admit(&ctx(), HOST, LONG).await.unwrap_err();
    assert_eq!(error.kind(), "circuit_open");
    // The hosts asked last are still limited: the least recently used went first.
    let last = "r4999.flood.example";
    let error = throttle
        .admit(&ctx(), last, Duration::from_millis(10))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), "rate_limited");
}
