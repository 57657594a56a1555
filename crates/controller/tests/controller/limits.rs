//! The controllers at Kubernetes' limits, against the scripted API server through kube's real
//! `Client` over in-memory pipes (`KubeApi::in_memory_client`), on tokio's paused clock: a
//! `409` on the leader's own renewal, watches the server ends at once, `Retry-After` on a
//! throttled list, and the namespaces remediation never evicts from. Waits are polls of
//! virtual time (the clock only moves when every task waits on a timer).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use noe_controller::{
    Config, Controllers, Deps, LeaseConfig, Metrics, Platform, PodPlatforms, Remediate, Running,
    Support,
};
use noe_test_support::{node_json, Fault, KubeApi, PodFixture, RecordedRequest, Resource};

use super::support::metric;

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
async fn eventually(what: &str, condition: impl FnMut() -> bool) {
    super::support::poll(what, 30_000, condition).await;
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

fn node_pair(api: &KubeApi) {
    api.put_node(node_json("amd", "amd64", "linux"));
    api.put_node(node_json("arm", "arm64", "linux"));
}

#[tokio::test(start_paused = true)]
async fn evictions_spare_kube_system_and_our_own_namespace() {
    let api = KubeApi::start().await.unwrap();
    node_pair(&api);
    for namespace in ["kube-system", "noe", "shop"] {
        api.put_pod(PodFixture::new(namespace, "web", "arm", &["amd-only:1"]).json());
    }
    let (running, registry) = start(
        &api,
        Config {
            remediate: Remediate::Evict,
            remediate_rate_per_minute: 100,
            // What the command line builds by default with POD_NAMESPACE=noe.
            evict_exempt_namespaces: ["kube-system".to_owned(), "noe".to_owned()].into(),
            ..Config::default()
        },
    );
    eventually("three reported, shop evicted", || {
        api.writes()
            .iter()
            .filter(|w| w.path.ends_with("/events"))
            .count()
            == 3
            && api.get(Resource::Pods, "shop", "web").is_none()
    })
    .await;
    // Let the reconciler run a while longer: nothing else is evicted.
    tokio::time::sleep(Duration::from_secs(120)).await;
    let evictions: Vec<String> = api
        .writes()
        .into_iter()
        .filter(|w| w.path.ends_with("/eviction"))
        .map(|w| w.path)
        .collect();
    assert_eq!(evictions, ["/api/v1/namespaces/shop/pods/web/eviction"]);
    assert!(api.get(Resource::Pods, "kube-system", "web").is_some());
    assert!(api.get(Resource::Pods, "noe", "web").is_some());
    for namespace in ["kube-system", "noe"] {
        let event = api
            .writes()
            .into_iter()
            .find(|w| w.path == format!("/apis/events.k8s.io/v1/namespaces/{namespace}/events"))
            .unwrap();
        let note = event.body["note"].as_str().unwrap();
        assert!(
            note.ends_with("; not evicted: its namespace is exempt"),
            "{note}"
        );
        assert_eq!(event.body["action"], "Report");
    }
    assert_eq!(
        metric(
            &registry,
            "noe_pods_deletion_total",
            &[("status", "success")]
        ),
        1.0
    );
    running.shutdown().await;
}

/// Requests to the node collection (lists and watches): whether each was a watch, its status,
/// and the virtual time it was answered at, from `t0`, until `until` of virtual time passed or
/// `max` arrived.
async fn node_requests(
    requests: &mut tokio::sync::broadcast::Receiver<RecordedRequest>,
    t0: tokio::time::Instant,
    until: Duration,
    max: usize,
) -> Vec<(bool, u16, Duration)> {
    let mut seen = Vec::new();
    let deadline = t0 + until;
    while seen.len() < max {
        tokio::select! {
            request = requests.recv() => match request {
                Ok(request) if request.path == "/api/v1/nodes" => {
                    let watch = request.query_param("watch").is_some();
                    seen.push((watch, request.status, t0.elapsed()));
                }
                Ok(_) => {}
                // Lagging behind means a flood: count it as such.
                Err(_) => seen.push((true, 0, t0.elapsed())),
            },
            () = tokio::time::sleep_until(deadline) => break,
        }
    }
    seen
}

/// The time between the `429` in `seen` and the request after it.
fn pause_after_429(seen: &[(bool, u16, Duration)]) -> Duration {
    let at = seen
        .iter()
        .position(|(_, status, _)| *status == 429)
        .unwrap();
    seen[at + 1].2 - seen[at].2
}

#[tokio::test(start_paused = true)]
async fn watches_the_server_ends_at_once_back_off() {
    let api = KubeApi::start().await.unwrap();
    node_pair(&api);
    // Every watch ends as soon as it is opened (a proxy or an overloaded apiserver).
    api.watch_lifetime(Some(Duration::ZERO));
    let mut requests = api.subscribe_requests();
    let t0 = tokio::time::Instant::now();
    let (running, _registry) = start(
        &api,
        Config {
            watch_nodes: true,
            ..Config::default()
        },
    );
    // kube-runtime alone reopens them in a tight loop; with the backoff (800 ms doubling to
    // 30 s, jittered up) one list and at most 7 watches fit in a virtual minute.
    let seen = node_requests(&mut requests, t0, Duration::from_secs(60), 50).await;
    let watches: Vec<Duration> = seen
        .iter()
        .filter(|(watch, _, _)| *watch)
        .map(|(_, _, at)| *at)
        .collect();
    assert!(
        (3..=7).contains(&watches.len()),
        "{} watches in a minute: {seen:?}",
        watches.len()
    );
    // Each wait at least doubles (jitter adds up to half of the base).
    for pair in watches.windows(3) {
        let (first, second) = (pair[1] - pair[0], pair[2] - pair[1]);
        assert!(second >= first.mul_f64(1.3), "no backoff between {pair:?}");
    }
    assert!(running.node_view().unwrap().is_ready());
    // Once watches live again, the pace resets: a change arrives without delay.
    api.watch_lifetime(None);
    tokio::time::sleep(Duration::from_secs(31)).await;
    api.put_node(node_json("s390", "s390x", "linux"));
    let view = running.node_view().unwrap();
    eventually("the new node seen", || view.node("s390").is_some()).await;
    running.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn retry_after_on_a_throttled_list_is_honoured_up_to_a_minute() {
    let api = KubeApi::start().await.unwrap();
    node_pair(&api);
    // The apiserver's priority and fairness: 429 with Retry-After on the first list.
    api.fault(Fault::new("GET", "/api/v1/nodes", 429).retry_after(20));
    let mut requests = api.subscribe_requests();
    let t0 = tokio::time::Instant::now();
    let (running, _registry) = start(
        &api,
        Config {
            watch_nodes: true,
            ..Config::default()
        },
    );
    let lists = node_requests(&mut requests, t0, Duration::from_secs(30), 2).await;
    assert_eq!(lists.len(), 2, "{lists:?}");
    assert!(
        pause_after_429(&lists) >= Duration::from_secs(20),
        "{lists:?}"
    );
    let view = running.node_view().unwrap();
    eventually("listed", || view.is_ready()).await;

    // History compacted: the watch resumes, gets 410, relists. Throttled for an hour on the
    // way, the reflector waits a minute, not an hour (and not kube-runtime's 800 ms).
    api.fault(Fault::new("GET", "/api/v1/nodes", 429).retry_after(3600));
    let t1 = tokio::time::Instant::now();
    api.compact();
    api.put_node(node_json("riscv", "riscv64", "linux"));
    let seen = node_requests(&mut requests, t1, Duration::from_secs(300), 4).await;
    let waited = pause_after_429(&seen);
    assert!(
        waited >= Duration::from_secs(60) && waited < Duration::from_secs(65),
        "{seen:?}"
    );
    eventually("relisted", || view.node("riscv").is_some()).await;
    running.shutdown().await;
}
