//! The gate controller end to end against the scripted API server, which validates every
//! release as the apiserver does (KEP-3838): a release that adds a term, changes a
//! nodeSelector value or removes a toleration fails these tests with a 422. The decision is a
//! scripted [`GatePlanner`] here (the composition root's, with the real resolver, is tested in
//! the `noe` crate).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use noe_controller::gate::{self, GatePlanner, Plan};
use noe_controller::{Config, Controllers, Deps, GateConfig, LeaseConfig, Metrics, Running};
use noe_core::patch::{Op, PatchBuilder};
use noe_test_support::{gated_pod_json, lease_json, Fault, KubeApi, Resource, NOE_GATE};
use serde_json::{json, Value};

use super::support::{now_rfc3339, short_lease};

/// Fails `failures` lookups, then constrains every pod to arm64 as the inline writer would:
/// the arch expression ANDed into every non-empty term (and a per-arch copy of the first
/// term, which a release must drop), or a new term.
struct Scripted {
    failures: AtomicU32,
    calls: AtomicU32,
    answer: Answer,
    /// Held while planning (a release in flight), when set.
    hold: Option<Arc<tokio::sync::Semaphore>>,
}

#[derive(Clone, Copy, PartialEq)]
enum Answer {
    Arm,
    NoCommon,
}

impl Scripted {
    fn new(failures: u32, answer: Answer) -> Arc<Self> {
        Arc::new(Self {
            failures: AtomicU32::new(failures),
            calls: AtomicU32::new(0),
            answer,
            hold: None,
        })
    }
}

fn arch() -> Value {
    json!({"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]})
}

const TERMS: &str =
    "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms";

/// The inline decision's patch for `pod`, as the inline writer makes it: the arch ANDed into
/// each non-empty required term plus a term of its own (KEP-3838 forbids adding it on a gated
/// pod: the release appends instead), or one term when the pod has none.
fn decision(pod: &Value) -> Vec<Op> {
    const PATH: [&str; 5] = [
        "spec",
        "affinity",
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "nodeSelectorTerms",
    ];
    let mut patch = PatchBuilder::new(pod);
    match pod.pointer(TERMS).and_then(Value::as_array) {
        None => patch.set(&PATH, json!([{"matchExpressions": [arch()]}])),
        Some(terms) => {
            for (i, term) in terms.iter().enumerate() {
                let empty =
                    term.get("matchExpressions").is_none() && term.get("matchFields").is_none();
                if !empty {
                    let index = i.to_string();
                    let mut path = PATH.to_vec();
                    path.extend([index.as_str(), "matchExpressions"]);
                    patch.append(&path, arch());
                }
            }
            patch.append(
                &PATH,
                json!({"matchExpressions": [arch(), {"key": "pool", "operator": "In", "values": ["graviton"]}]}),
            );
        }
    }
    patch.set(
        &["metadata", "annotations", "arch.noe.adevinta.com/platforms"],
        json!("arm64"),
    );
    patch.finish()
}

impl GatePlanner for Scripted {
    fn plan<'a>(&'a self, pod: &'a Value, _last_attempt: bool) -> BoxFuture<'a, Plan> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if let Some(hold) = &self.hold {
                let _permit = hold.acquire().await;
            }
            let failed = self
                .failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if failed {
                return Plan::LookupFailed {
                    message: "registry.example.com/app:1 (500 Internal Server Error)".to_owned(),
                };
            }
            match self.answer {
                Answer::Arm => Plan::Constrain { ops: decision(pod) },
                Answer::NoCommon => Plan::NoCommonPlatform {
                    message: "app:1 (linux/amd64), tool:1 (linux/arm64)".to_owned(),
                },
            }
        })
    }
}

fn fast_gate() -> GateConfig {
    GateConfig {
        max_attempts: 5,
        backoff_min: Duration::from_millis(50),
        backoff_max: Duration::from_millis(200),
        ..GateConfig::default()
    }
}

fn start(
    api: &KubeApi,
    planner: Arc<dyn GatePlanner>,
    lease: Option<LeaseConfig>,
) -> (Running, prometheus::Registry) {
    start_with(api, planner, lease, fast_gate())
}

fn start_with(
    api: &KubeApi,
    planner: Arc<dyn GatePlanner>,
    lease: Option<LeaseConfig>,
    gate: GateConfig,
) -> (Running, prometheus::Registry) {
    let registry = prometheus::Registry::new();
    let metrics = Metrics::new(&registry, 10).unwrap();
    let config = Config {
        gate: Some(gate),
        leader_election: lease,
        ..Config::default()
    };
    let mut running =
        Controllers::start(api.client().unwrap(), config, Deps::default(), metrics).unwrap();
    running.start_gate(planner);
    (running, registry)
}

/// Polls `condition` every 20 ms for at most 20 s.
async fn eventually(what: &str, condition: impl FnMut() -> bool) {
    super::support::poll(what, 1000, condition).await;
}

fn value(registry: &prometheus::Registry, name: &str, label: Option<(&str, &str)>) -> f64 {
    super::support::metric(registry, name, label.as_slice())
}

fn gated(api: &KubeApi, name: &str) -> bool {
    api.get(Resource::Pods, "shop", name).is_some_and(|pod| {
        pod["spec"]["schedulingGates"]
            .as_array()
            .is_some_and(|gates| gates.iter().any(|g| g["name"] == NOE_GATE))
    })
}

fn pod_patches(api: &KubeApi, name: &str) -> Vec<noe_test_support::RecordedRequest> {
    api.writes()
        .into_iter()
        .filter(|w| w.method == "PATCH" && w.path == format!("/api/v1/namespaces/shop/pods/{name}"))
        .collect()
}

/// The reasons of the Events created (a repeated Event is a PATCH of its series).
fn event_reasons(api: &KubeApi) -> Vec<String> {
    api.writes()
        .into_iter()
        .filter(|w| w.method == "POST" && w.path.contains("/events"))
        .filter_map(|w| w.body["reason"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_gated_pod_is_released_with_its_constraints_in_one_write() {
    let api = KubeApi::start().await.unwrap();
    // The user's own terms: one with matchFields, one empty (left alone).
    let mut pod = gated_pod_json("shop", "web", &["app:1"]);
    pod["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}]},
        {},
    ]}}});
    pod["spec"]["schedulingGates"] =
        json!([{"name": "quota.example.com/wait"}, {"name": NOE_GATE}]);
    api.put_pod(pod);
    api.put_pod(gated_pod_json("shop", "plain", &["app:1"]));
    let (running, registry) = start(&api, Scripted::new(0, Answer::Arm), None);
    eventually("both released", || {
        !gated(&api, "web") && !gated(&api, "plain")
    })
    .await;
    let web = api.get(Resource::Pods, "shop", "web").unwrap();
    assert_eq!(
        web["spec"]["schedulingGates"],
        json!([{"name": "quota.example.com/wait"}]),
        "another controller's gate stays"
    );
    assert_eq!(
        web.pointer(TERMS).unwrap(),
        &json!([
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}], "matchExpressions": [arch()]},
            {},
        ])
    );
    assert_eq!(
        web["metadata"]["labels"]["arch.noe.adevinta.com/lookup"],
        "released"
    );
    assert_eq!(
        web["metadata"]["annotations"]["arch.noe.adevinta.com/platforms"],
        "arm64"
    );
    let plain = api.get(Resource::Pods, "shop", "plain").unwrap();
    assert_eq!(
        plain.pointer(TERMS).unwrap(),
        &json!([{"matchExpressions": [arch()]}])
    );
    for name in ["web", "plain"] {
        let patches = pod_patches(&api, name);
        assert_eq!(patches.len(), 1, "one write for {name}");
        assert_eq!(patches[0].status, 200);
    }
    // Counted right after the write the test saw.
    eventually("two releases counted", || {
        value(
            &registry,
            "noe_gate_releases_total",
            Some(("outcome", "constrained")),
        ) == 2.0
            && value(&registry, "noe_gate_duration_seconds", None) == 2.0
    })
    .await;
    // Each release's parts, once per pod: the watch event's wait for a worker, the lookup, the
    // write.
    for stage in [gate::stage::QUEUE, gate::stage::LOOKUP, gate::stage::WRITE] {
        assert_eq!(
            value(&registry, "noe_gate_stage_seconds", Some(("stage", stage))),
            2.0,
            "{stage}"
        );
    }
    eventually("the gauge counts none", || {
        value(&registry, "noe_gated_pods", None) == 0.0
    })
    .await;
    running.shutdown().await;
}

#[tokio::test]
async fn failed_lookups_back_off_then_the_pod_is_released() {
    let api = KubeApi::start().await.unwrap();
    api.put_pod(gated_pod_json("shop", "web", &["app:1"]));
    let planner = Scripted::new(2, Answer::Arm);
    let (running, registry) = start(&api, planner.clone(), None);
    eventually("released", || !gated(&api, "web")).await;
    assert_eq!(planner.calls.load(Ordering::SeqCst), 3);
    let reasons = event_reasons(&api);
    assert!(
        !reasons.is_empty() && reasons.iter().all(|r| r == "LookupFailed"),
        "{reasons:?}"
    );
    let web = api.get(Resource::Pods, "shop", "web").unwrap();
    assert!(
        web["metadata"]["annotations"]
            .get("arch.noe.adevinta.com/lookup-error")
            .is_none(),
        "the error annotation goes with the release"
    );
    // Two annotations, one release.
    let patches = pod_patches(&api, "web");
    assert_eq!(patches.len(), 3);
    assert_eq!(
        patches[0].body["metadata"]["annotations"]["arch.noe.adevinta.com/lookup-error"],
        "registry.example.com/app:1 (500 Internal Server Error)"
    );
    eventually("one release counted", || {
        value(&registry, "noe_gate_releases_total", None) == 1.0
    })
    .await;
    running.shutdown().await;
}

/// Holds every pod for `verifying` attempts (`--gate-verify`), then constrains it.
struct Verifying {
    left: AtomicU32,
    last_attempts: AtomicU32,
}

impl GatePlanner for Verifying {
    fn plan<'a>(&'a self, pod: &'a Value, last_attempt: bool) -> BoxFuture<'a, Plan> {
        Box::pin(async move {
            if last_attempt {
                self.last_attempts.fetch_add(1, Ordering::SeqCst);
            }
            let waiting = self
                .left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if waiting && !last_attempt {
                return Plan::Verifying {
                    message: "waiting for the verification of app:1 (--gate-verify)".to_owned(),
                };
            }
            Plan::Constrain { ops: decision(pod) }
        })
    }
}

#[tokio::test]
async fn a_pod_waits_for_its_images_verification_then_is_released_constrained() {
    let api = KubeApi::start().await.unwrap();
    api.put_pod(gated_pod_json("shop", "web", &["app:1"]));
    let planner = Arc::new(Verifying {
        left: AtomicU32::new(2),
        last_attempts: AtomicU32::new(0),
    });
    let (running, _registry) = start(&api, planner.clone(), None);
    eventually("released", || !gated(&api, "web")).await;
    let reasons = event_reasons(&api);
    assert!(
        !reasons.is_empty() && reasons.iter().all(|r| r == "VerificationPending"),
        "{reasons:?}"
    );
    let web = api.get(Resource::Pods, "shop", "web").unwrap();
    assert_eq!(
        web["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"][0]["matchExpressions"][0]["values"],
        json!(["arm64"])
    );
    assert_eq!(
        planner.last_attempts.load(Ordering::SeqCst),
        0,
        "released before the last"
    );
    running.shutdown().await;

    // A verification that never ends holds the pod only until its last attempt.
    let api = KubeApi::start().await.unwrap();
    api.put_pod(gated_pod_json("shop", "web", &["app:1"]));
    let planner = Arc::new(Verifying {
        left: AtomicU32::new(u32::MAX),
        last_attempts: AtomicU32::new(0),
    });
    let (running, _registry) = start(&api, planner.clone(), None);
    eventually("released", || !gated(&api, "web")).await;
    assert_eq!(planner.last_attempts.load(Ordering::SeqCst), 1);
    running.shutdown().await;
}

#[tokio::test]
async fn no_common_platform_releases_with_a_requirement_no_node_meets() {
    let api = KubeApi::start().await.unwrap();
    api.put_pod(gated_pod_json("shop", "web", &["app:1", "tool:1"]));
    let (running, registry) = start(&api, Scripted::new(0, Answer::NoCommon), None);
    eventually("released", || !gated(&api, "web")).await;
    let web = api.get(Resource::Pods, "shop", "web").unwrap();
    assert_eq!(
        web.pointer(TERMS).unwrap(),
        &json!([{"matchExpressions": [{"key": "arch.noe.adevinta.com/no-common-platform", "operator": "Exists"}]}])
    );
    assert_eq!(event_reasons(&api), ["NoCommonPlatform"]);
    let events: Vec<_> = api
        .writes()
        .into_iter()
        .filter(|w| w.method == "POST" && w.path.contains("/events"))
        .collect();
    assert!(events[0].body["note"]
        .as_str()
        .unwrap()
        .contains("app:1 (linux/amd64), tool:1 (linux/arm64)"));
    eventually("counted", || {
        value(
            &registry,
            "noe_gate_releases_total",
            Some(("outcome", "no_common_platform")),
        ) == 1.0
    })
    .await;
    running.shutdown().await;
}

#[tokio::test]
async fn a_release_refused_by_another_webhook_is_an_event_and_a_backoff() {
    let api = KubeApi::start().await.unwrap();
    api.fault(
        Fault::new("PATCH", "/api/v1/namespaces/shop/pods/web", 403)
            .message("admission webhook \"policy.example.com\" denied the request: privileged")
            .times(2),
    );
    api.put_pod(gated_pod_json("shop", "web", &["app:1"]));
    let (running, _registry) = start(&api, Scripted::new(0, Answer::Arm), None);
    eventually("released", || !gated(&api, "web")).await;
    let patches = pod_patches(&api, "web");
    let statuses: Vec<u16> = patches.iter().map(|p| p.status).collect();
    assert_eq!(statuses, [403, 403, 200]);
    let reasons = event_reasons(&api);
    assert!(
        !reasons.is_empty() && reasons.iter().all(|r| r == "ReleaseRefused"),
        "{reasons:?}"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn a_pod_deleted_while_gated_is_forgotten() {
    let api = KubeApi::start().await.unwrap();
    api.put_pod(gated_pod_json("shop", "web", &["app:1"]));
    let planner = Scripted::new(u32::MAX, Answer::Arm);
    let (running, registry) = start(&api, planner.clone(), None);
    eventually("a lookup failed", || !event_reasons(&api).is_empty()).await;
    eventually("the gauge counts it", || {
        value(&registry, "noe_gated_pods", None) == 1.0
    })
    .await;
    assert!(api.delete(Resource::Pods, "shop", "web"));
    eventually("the gauge counts none", || {
        value(&registry, "noe_gated_pods", None) == 0.0
    })
    .await;
    let calls = planner.calls.load(Ordering::SeqCst);
    // The watch (DELETED) removed it from the queue: a later pod is handled, the deleted not.
    api.put_pod(gated_pod_json("shop", "later", &["app:1"]));
    eventually("later looked up", || {
        planner.calls.load(Ordering::SeqCst) > calls
    })
    .await;
    assert!(pod_patches(&api, "web")
        .iter()
        .all(|p| p.status == 200 || p.status == 404));
    running.shutdown().await;
}

#[tokio::test]
async fn a_replica_that_lost_the_lease_mid_release_does_not_write() {
    let api = KubeApi::start().await.unwrap();
    api.put_pod(gated_pod_json("shop", "web", &["app:1"]));
    let hold = Arc::new(tokio::sync::Semaphore::new(0));
    let planner = Arc::new(Scripted {
        failures: AtomicU32::new(0),
        calls: AtomicU32::new(0),
        answer: Answer::Arm,
        hold: Some(hold.clone()),
    });
    let (running, _registry) = start(&api, planner.clone(), Some(short_lease()));
    let leadership = running.leadership();
    eventually("leading", || leadership.is_leader()).await;
    eventually("a release in flight", || {
        planner.calls.load(Ordering::SeqCst) == 1
    })
    .await;
    // Another replica takes the lease (a long one): this one stops leading mid-release.
    api.put(
        Resource::Leases,
        "noe",
        lease_json("noe-controller", "replica-b", &now_rfc3339(), 3600),
    );
    eventually("leadership lost", || !leadership.is_leader()).await;
    hold.add_permits(100);
    // The lease comes back (replica b's expires): the new term releases the pod.
    api.put(
        Resource::Leases,
        "noe",
        lease_json("noe-controller", "replica-b", &now_rfc3339(), 1),
    );
    eventually("released by the next term", || !gated(&api, "web")).await;
    let patches = pod_patches(&api, "web");
    assert_eq!(patches.len(), 1, "the lost term wrote nothing");
    assert_eq!(patches[0].status, 200);
    running.shutdown().await;
}

#[tokio::test]
async fn a_conflict_is_retried_with_the_pod_read_again() {
    let api = KubeApi::start().await.unwrap();
    api.fault(Fault::new("PATCH", "/api/v1/namespaces/shop/pods/web", 409).times(1));
    api.put_pod(gated_pod_json("shop", "web", &["app:1"]));
    let (running, _registry) = start(&api, Scripted::new(0, Answer::Arm), None);
    eventually("released", || !gated(&api, "web")).await;
    let statuses: Vec<u16> = pod_patches(&api, "web").iter().map(|p| p.status).collect();
    assert_eq!(statuses, [409, 200]);
    assert!(event_reasons(&api).is_empty(), "a conflict is no failure");
    running.shutdown().await;
}

#[tokio::test]
async fn an_update_while_in_flight_runs_the_pod_once_more_with_the_new_version() {
    let api = KubeApi::start().await.unwrap();
    api.put_pod(gated_pod_json("shop", "web", &["app:1"]));
    let hold = Arc::new(tokio::sync::Semaphore::new(0));
    let planner = Arc::new(Scripted {
        failures: AtomicU32::new(0),
        calls: AtomicU32::new(0),
        answer: Answer::Arm,
        hold: Some(hold.clone()),
    });
    // Retries far beyond the test's patience: only the watch's update can run it again.
    let slow = GateConfig {
        backoff_min: Duration::from_secs(600),
        backoff_max: Duration::from_secs(600),
        ..fast_gate()
    };
    let (running, _registry) = start_with(&api, planner.clone(), None, slow);
    eventually("a release in flight", || {
        planner.calls.load(Ordering::SeqCst) == 1
    })
    .await;
    // Updated while its release is in flight: that release meets a conflict, and the update
    // (whether its event comes before or after) runs the pod again.
    let mut pod = api.get(Resource::Pods, "shop", "web").unwrap();
    pod["metadata"]["labels"]["tier"] = json!("front");
    api.put_pod(pod);
    hold.add_permits(100);
    eventually("released", || !gated(&api, "web")).await;
    let patches = pod_patches(&api, "web");
    let statuses: Vec<u16> = patches.iter().map(|p| p.status).collect();
    assert_eq!(statuses, [409, 200]);
    let version = api.get(Resource::Pods, "shop", "web").unwrap();
    assert_eq!(version["metadata"]["labels"]["tier"], "front");
    assert_eq!(planner.calls.load(Ordering::SeqCst), 2);
    running.shutdown().await;
}

#[tokio::test]
async fn many_gated_pods_are_each_released_by_one_write() {
    let api = KubeApi::start().await.unwrap();
    let names: Vec<String> = (0..120).map(|i| format!("p{i:03}")).collect();
    let (before, after) = names.split_at(60);
    for name in before {
        api.put_pod(gated_pod_json("shop", name, &["app:1"]));
    }
    let planner = Scripted::new(0, Answer::Arm);
    let (running, _registry) = start(&api, planner.clone(), None);
    for name in after {
        api.put_pod(gated_pod_json("shop", name, &["app:1"]));
    }
    eventually("all released", || {
        names.iter().all(|name| !gated(&api, name))
    })
    .await;
    for name in &names {
        let statuses: Vec<u16> = pod_patches(&api, name).iter().map(|p| p.status).collect();
        assert_eq!(statuses, [200], "{name}");
    }
    assert_eq!(planner.calls.load(Ordering::SeqCst), 120);
    running.shutdown().await;
}

/// A work queue of 4 and 12 gated pods while every release is held: the pods it cannot take
/// are counted, its depth is a gauge, and each is released once by the resync.
#[tokio::test]
async fn a_full_queue_is_counted_and_its_pods_released_by_the_resync() {
    let api = KubeApi::start().await.unwrap();
    let names: Vec<String> = (0..12).map(|i| format!("q{i:02}")).collect();
    for name in &names {
        api.put_pod(gated_pod_json("shop", name, &["app:1"]));
    }
    let hold = Arc::new(tokio::sync::Semaphore::new(0));
    let planner = Arc::new(Scripted {
        failures: AtomicU32::new(0),
        calls: AtomicU32::new(0),
        answer: Answer::Arm,
        hold: Some(hold.clone()),
    });
    let small = GateConfig {
        queue_capacity: 4,
        resync: Duration::from_millis(200),
        ..fast_gate()
    };
    let (running, registry) = start_with(&api, planner.clone(), None, small);
    eventually("the full queue counted", || {
        value(&registry, "noe_gate_queue_full_total", None) >= 8.0
    })
    .await;
    eventually("its depth shown", || {
        value(&registry, "noe_gate_queued", None) == 4.0
    })
    .await;
    assert!(names.iter().all(|name| gated(&api, name)));
    hold.add_permits(1000);
    eventually("all released", || {
        names.iter().all(|name| !gated(&api, name))
    })
    .await;
    for name in &names {
        let statuses: Vec<u16> = pod_patches(&api, name).iter().map(|p| p.status).collect();
        assert_eq!(statuses, [200], "{name}");
    }
    eventually("the queue empty", || {
        value(&registry, "noe_gate_queued", None) == 0.0
    })
    .await;
    running.shutdown().await;
}

#[tokio::test]
async fn gated_pods_are_not_lost_when_the_watch_restarts() {
    let api = KubeApi::start().await.unwrap();
    api.put_pod(gated_pod_json("shop", "first", &["app:1"]));
    let (running, _registry) = start(&api, Scripted::new(0, Answer::Arm), None);
    eventually("first released", || !gated(&api, "first")).await;
    let lists = || {
        api.requests()
            .iter()
            .filter(|r| {
                r.method == "GET" && r.path == "/api/v1/pods" && r.query_param("watch").is_none()
            })
            .count()
    };
    let listed = lists();
    // The history is gone and every watch ends: the controller must relist.
    api.compact();
    api.put_pod(gated_pod_json("shop", "second", &["app:1"]));
    eventually("second released", || !gated(&api, "second")).await;
    eventually("listed again", || lists() > listed).await;
    assert_eq!(pod_patches(&api, "second").len(), 1);
    running.shutdown().await;
}

#[tokio::test]
async fn ungate_releases_every_gated_pod_once() {
    let api = KubeApi::start().await.unwrap();
    api.put_pod(gated_pod_json("shop", "web", &["app:1"]));
    api.put_pod(gated_pod_json("shop", "api", &["app:1"]));
    api.put_pod(gated_pod_json("tools", "job", &["app:1"]));
    let done = gate::ungate(
        api.client().unwrap(),
        Some("shop"),
        Scripted::new(1, Answer::Arm),
        fast_gate(),
        false,
        Duration::from_secs(20),
    )
    .await
    .unwrap();
    assert_eq!(done.released.get("constrained"), Some(&2));
    assert!(done.remaining.is_empty());
    assert!(!gated(&api, "web") && !gated(&api, "api"));
    let job = api.get(Resource::Pods, "tools", "job").unwrap();
    assert_eq!(job["spec"]["schedulingGates"][0]["name"], NOE_GATE);
    let forced = gate::ungate(
        api.client().unwrap(),
        None,
        Scripted::new(u32::MAX, Answer::Arm),
        fast_gate(),
        true,
        Duration::from_secs(20),
    )
    .await
    .unwrap();
    assert_eq!(forced.released.get("forced"), Some(&1));
    let job = api.get(Resource::Pods, "tools", "job").unwrap();
    assert_eq!(job["spec"]["schedulingGates"], json!([]));
    assert!(job.pointer(TERMS).is_none(), "forced: no constraint");
}
