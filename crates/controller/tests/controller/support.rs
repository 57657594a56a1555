//! What the controller tests share: waiting for a condition, and reading a metric.

use std::time::Duration;

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
