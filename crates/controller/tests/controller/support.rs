//! What the controller tests share: waiting for a condition, and reading a metric.

use std::time::Duration;

use noe_controller::LeaseConfig;

/// Polls `condition` every 20 ms of tokio time (virtual under a paused clock), at most
/// `attempts` times, then fails naming `what`.
pub async fn poll(what: &str, attempts: u32, mut condition: impl FnMut() -> bool) {
    for _ in 0..attempts {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// The sum of the counters, gauges and histogram sample counts named `name` whose labels hold
/// every pair of `labels`.
pub fn metric(registry: &prometheus::Registry, name: &str, labels: &[(&str, &str)]) -> f64 {
    registry
        .gather()
        .iter()
        .filter(|family| family.name() == name)
        .flat_map(|family| family.get_metric().to_vec())
        .filter(|metric| {
            labels.iter().all(|(key, value)| {
                metric
                    .get_label()
                    .iter()
                    .any(|pair| pair.name() == *key && pair.value() == *value)
            })
        })
        .map(|metric| {
            metric.get_counter().get_value()
                + metric.get_gauge().get_value()
                + metric.get_histogram().get_sample_count() as f64
        })
        .sum()
}

/// A 2 s lease renewed every 200 ms, given up after 1.5 s without renewal.
pub fn short_lease() -> LeaseConfig {
    LeaseConfig {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
        ..LeaseConfig::new("noe-controller", "noe", "replica-a")
    }
}

/// Now, as a Lease's `renewTime` spells it.
pub fn now_rfc3339() -> String {
    k8s_openapi::chrono::Utc::now()
        .to_rfc3339_opts(k8s_openapi::chrono::SecondsFormat::Micros, true)
}
