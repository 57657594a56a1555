//! The controllers at Kubernetes' limits, against the scripted API server through kube's real
//! `Client` over in-memory pipes (`KubeApi::in_memory_client`), on tokio's paused clock: a
//! `409` on the leader's own renewal, watches the server ends at once, `Retry-After` on a
//! throttled list, and the namespaces remediation never evicts from. Waits are polls of
//! virtual time (the clock only moves when every task waits on a timer).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use noe_controller::{
    Config, Controllers, Deps, LeaseConfig, Metrics, Platform, PodPlatforms, Running, Support,
};
use noe_test_support::{node_json, Fault, KubeApi, RecordedRequest};

fn platforms() -> Arc<dyn PodPlatforms> {
    let only = |arch: &str| Support::Only([Platform::new("linux", arch, None)].into());
    Arc::new(HashMap::from([
        ("amd-only:1".to_owned(), only("amd64")),
        ("arm-only:1".to_owned(), only("arm64")),
    ]))
}

fn start(api: &KubeApi, config: Config) -> (Running, prometheus::Registry) {
    let registry = prometheus::Registry::new();
    let metrics = Metrics::new(&registry, 10).unwrap();
    let running = Controllers::start(
        api.in_memory_client(),
        config,
        Deps {
            platforms: Some(platforms()),
        },
        metrics,
    )
    .unwrap();
    (running, registry)
}

/// Polls `condition` every 20 ms of virtual time, for at most 10 virtual minutes.
async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..30_000 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for: {what}");
}

fn metric(registry: &prometheus::Registry, name: &str, labels: &[(&str, &str)]) -> f64 {
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
        .map(|metric| metric.get_counter().get_value() + metric.get_gauge().get_value())
        .sum()
}

fn lease_writes(api: &KubeApi) -> Vec<RecordedRequest> {
    api.writes()
        .into_iter()
        .filter(|w| w.path.ends_with("/leases/noe-controller"))
        .collect()
}

/// client-go's defaults: a 15 s lease, a 10 s renew deadline, a 2 s retry period.
fn lease() -> LeaseConfig {
    LeaseConfig::new("noe-controller", "noe", "replica-a")
}

#[tokio::test(start_paused = true)]
async fn one_conflict_on_the_leaders_renewal_does_not_end_its_term() {
    let api = KubeApi::start().await.unwrap();
    api.put_node(node_json("arm", "arm64", "linux"));
    let (running, registry) = start(
        &api,
        Config {
            taint_arches: ["arm64".to_owned()].into(),
            leader_election: Some(lease()),
            ..Config::default()
        },
    );
    let leadership = running.leadership();
    eventually("leading", || leadership.is_leader()).await;
    let renewed = |api: &KubeApi| {
        lease_writes(api)
            .iter()
            .filter(|w| w.method == "PUT" && w.status == 200)
            .count()
    };
    eventually("renewed once", || renewed(&api) >= 1).await;

    // The next renewal meets a 409 (a write in between moved the resourceVersion, or the
    // apiserver answered a retried request twice): the lease still names us.
    api.fault(Fault::new("PUT", "/leases/noe-controller", 409));
    eventually("the conflict answered", || {
        lease_writes(&api).iter().any(|w| w.status == 409)
    })
    .await;
    let at_conflict = renewed(&api);
    // Sample leadership at every poll from the conflict to three renewals after it.
    let mut held_throughout = true;
    eventually("three renewals after the conflict", || {
        held_throughout &= leadership.is_leader();
        renewed(&api) >= at_conflict + 3
    })
    .await;
    assert!(held_throughout, "leadership dropped after one 409");
    assert_eq!(
        metric(&registry, "noe_controller_leader_transitions_total", &[]),
        1.0,
        "the term went on: no second start of leading"
    );
    assert_eq!(metric(&registry, "noe_controller_leader", &[]), 1.0);
    // Right after the 409: a fresh read of the lease, then the renewal on its version.
    let requests = api.requests();
    let conflict = requests
        .iter()
        .position(|r| r.path.ends_with("/leases/noe-controller") && r.status == 409)
        .unwrap();
    let next: Vec<(&str, u16)> = requests[conflict + 1..]
        .iter()
        .filter(|r| r.path.ends_with("/leases/noe-controller"))
        .take(2)
        .map(|r| (r.method.as_str(), r.status))
        .collect();
    assert_eq!(next, [("GET", 200), ("PUT", 200)]);
    running.shutdown().await;
}
