//! The decision memo through the real `Admission`: a pod seen twice is remembered, and then
//! answered as a fresh decision would answer it, and decided again as soon as one of its lookups
//! or the facts of its surroundings changed; failures are never remembered; counted by result.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use noe_core::decide::{Facts, Policy};
use noe_core::Platform;
use noe_webhook::admission::Admission;
use noe_webhook::facts::{FactRequest, FactSource};
use noe_webhook::metrics::Metrics;
use noe_webhook::resolve::{Anonymous, LookupError, PlatformLookup, PodCredentials, Resolve};
use serde_json::{json, Value};

/// `fail*` images fail; the others support amd64 and arm64, or arm64 alone once switched.
#[derive(Default)]
struct Switch {
    arm_only: AtomicBool,
}

impl PlatformLookup for Switch {
    fn lookup<'a>(
        &'a self,
        image: &'a str,
        _scope: Option<noe_registry::cache::Scope>,
        _credentials: &'a PodCredentials<'a>,
    ) -> BoxFuture<'a, Result<Arc<[Platform]>, LookupError>> {
        Box::pin(async move {
            if image.starts_with("fail") {
                return Err(LookupError::Registry {
                    kind: noe_core::decide::LookupKind::NotFound,
                    message: format!("{image}: not found"),
                    registry: "other".into(),
                });
            }
            let linux = |arch: &str| Platform::new("linux", arch, None);
            let platforms = if self.arm_only.load(Ordering::SeqCst) {
                vec![linux("arm64")]
            } else {
                vec![linux("amd64"), linux("arm64")]
            };
            Ok(platforms.into())
        })
    }
}

/// Knows the cluster's node architectures, which a test changes.
#[derive(Default)]
struct Cluster {
    archs: Mutex<BTreeSet<String>>,
}

impl FactSource for Cluster {
    fn facts<'a>(&'a self, _request: FactRequest<'a>) -> BoxFuture<'a, Facts> {
        let archs = self.archs.lock().unwrap().clone();
        Box::pin(async move {
            Facts {
                cluster_archs: Some(Arc::new(archs)),
                ..Facts::default()
            }
        })
    }

    fn knows_cluster(&self) -> bool {
        true
    }
}

struct Setup {
    lookup: Arc<Switch>,
    cluster: Arc<Cluster>,
    registry: prometheus::Registry,
    remembering: Admission,
    fresh: Admission,
}

fn setup(policy: Policy) -> Setup {
    let lookup = Arc::new(Switch::default());
    let cluster = Arc::new(Cluster::default());
    cluster.archs.lock().unwrap().insert("amd64".to_owned());
    let registry = prometheus::Registry::new();
    let admission = |metrics: Metrics| {
        Admission::new(
            Resolve::new(lookup.clone(), Arc::new(Anonymous), Duration::from_secs(2)),
            policy.clone(),
            metrics,
        )
        .with_facts(cluster.clone())
    };
    let remembering = admission(Metrics::register(&registry).unwrap());
    let fresh =
        admission(Metrics::register(&prometheus::Registry::new()).unwrap()).without_decision_memo();
    Setup {
        lookup,
        cluster,
        registry,
        remembering,
        fresh,
    }
}

impl Setup {
    /// Reviews `pod` in `namespace` with both admissions; asserts they answer the same bytes.
    async fn review(&self, namespace: &str, uid: &str, pod: &Value) -> Value {
        let body = serde_json::to_vec(&noe_test_support::admission_review(
            "admission.k8s.io/v1",
            "CREATE",
            namespace,
            uid,
            pod,
        ))
        .unwrap();
        let remembered = self.remembering.review(&body).await;
        let decided = self.fresh.review(&body).await;
        assert_eq!(
            String::from_utf8_lossy(&remembered),
            String::from_utf8_lossy(&decided)
        );
        serde_json::from_slice(&remembered).unwrap()
    }

    /// `noe_admission_decision_memo_total` by result: (hit, changed, miss).
    fn counts(&self) -> (u64, u64, u64) {
        let count = |result: &str| {
            self.registry
                .gather()
                .iter()
                .filter(|family| family.name() == "noe_admission_decision_memo_total")
                .flat_map(|family| family.get_metric().iter())
                .filter(|metric| metric.get_label().iter().any(|l| l.value() == result))
                .map(|metric| metric.get_counter().get_value() as u64)
                .sum()
        };
        (count("hit"), count("changed"), count("miss"))
    }
}

fn pod(image: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"generateName": "web-5d8c7b9f6-", "labels": {"app": "web"}},
           "spec": {"containers": [{"name": "c0", "image": image}]}})
}

/// The patch's `op`/`path`/`value` for the arch constraint, decoded.
fn patch(answer: &Value) -> String {
    use base64::Engine as _;
    let patch = answer["response"]["patch"].as_str().unwrap_or_default();
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(patch)
            .unwrap(),
    )
    .unwrap()
}

#[tokio::test]
async fn a_changed_lookup_or_fact_is_decided_again() {
    let setup = setup(Policy::default());
    let web = pod("web:1");

    let first = setup.review("team-a", "u1", &web).await;
    assert_eq!(setup.counts(), (0, 0, 1), "seen once: only noted");
    setup.review("team-a", "u2", &web).await;
    assert_eq!(setup.counts(), (0, 0, 2), "seen twice: remembered");
    let third = setup.review("team-a", "u3", &web).await;
    assert_eq!(setup.counts(), (1, 0, 2), "answered from the memo");
    assert_eq!(patch(&first), patch(&third));
    assert_eq!(third["response"]["uid"], "u3", "the request's own uid");

    // The image's platforms changed (a new push found on revalidation): decided again.
    setup.lookup.arm_only.store(true, Ordering::SeqCst);
    let changed = setup.review("team-a", "u4", &web).await;
    assert_eq!(setup.counts(), (1, 1, 2));
    assert_ne!(patch(&changed), patch(&third));
    assert!(patch(&changed).contains("arm64"), "{}", patch(&changed));
    setup.review("team-a", "u5", &web).await;
    assert_eq!(setup.counts(), (2, 1, 2), "remembered anew");

    // A node of another arch joined the cluster: decided again.
    setup
        .cluster
        .archs
        .lock()
        .unwrap()
        .insert("arm64".to_owned());
    setup.review("team-a", "u6", &web).await;
    assert_eq!(setup.counts(), (2, 2, 2));
    setup.review("team-a", "u7", &web).await;
    assert_eq!(setup.counts(), (3, 2, 2));
}

#[tokio::test]
async fn the_same_pod_elsewhere_or_another_pod_is_decided() {
    let setup = setup(Policy::default());
    let web = pod("web:1");
    for uid in ["u1", "u2"] {
        setup.review("team-a", uid, &web).await;
    }
    setup.review("team-b", "u3", &web).await;
    assert_eq!(
        setup.counts(),
        (0, 0, 3),
        "the namespace is part of the key"
    );
    let mut other = web.clone();
    other["spec"]["nodeSelector"] = json!({"disk": "ssd"});
    setup.review("team-a", "u4", &other).await;
    assert_eq!(setup.counts(), (0, 0, 4));
    setup.review("team-a", "u5", &web).await;
    setup.review("team-b", "u6", &web).await;
    setup.review("team-b", "u7", &web).await;
    assert_eq!(setup.counts(), (2, 0, 5));
}

#[tokio::test]
async fn failed_lookups_are_not_remembered() {
    let setup = setup(Policy::default());
    let failing = pod("fail/me:1");
    for uid in ["u1", "u2", "u3"] {
        let answer = setup.review("team-a", uid, &failing).await;
        assert!(answer["response"]["warnings"].is_array(), "{answer}");
    }
    assert_eq!(setup.counts(), (0, 0, 3));
}

#[tokio::test]
async fn a_pod_that_cannot_be_read_is_not_counted() {
    let setup = setup(Policy::default());
    let mut unreadable = pod("web:1");
    unreadable["metadata"]["labels"] = json!({"app": 1});
    for uid in ["u1", "u2"] {
        let answer = setup.review("team-a", uid, &unreadable).await;
        assert_eq!(answer["response"]["status"]["code"], 400, "{answer}");
    }
    assert_eq!(setup.counts(), (0, 0, 0));
}

#[tokio::test]
async fn gated_and_selecting_admissions_do_not_remember() {
    use noe_webhook::admission::gate::{GateSettings, LookupMode};
    let registry = prometheus::Registry::new();
    let admission = Admission::new(
        Resolve::new(
            Arc::new(Switch::default()),
            Arc::new(Anonymous),
            Duration::from_secs(2),
        ),
        Policy::default(),
        Metrics::register(&registry).unwrap(),
    )
    .with_gate(GateSettings {
        mode: LookupMode::Hybrid,
        hybrid_budget: Duration::from_millis(10),
        own_namespace: None,
        exempt: Default::default(),
        object_selector: Default::default(),
        namespaces: None,
    });
    let body = serde_json::to_vec(&noe_test_support::admission_review(
        "admission.k8s.io/v1",
        "CREATE",
        "team-a",
        "u1",
        &pod("web:1"),
    ))
    .unwrap();
    admission.review(&body).await;
    admission.review(&body).await;
    let counted: f64 = registry
        .gather()
        .iter()
        .filter(|family| family.name() == "noe_admission_decision_memo_total")
        .flat_map(|family| family.get_metric().iter())
        .map(|metric| metric.get_counter().get_value())
        .sum();
    assert_eq!(counted, 0.0, "no memo in hybrid mode");
}

/// Pods of one ReplicaSet as the apiserver sends them seconds apart: each with its own generated
/// name, uid, creation time, field-manager time and token volume. One decision, remembered the
/// second time and answered from the memo the third, byte for byte what deciding answers.
#[tokio::test]
async fn pods_of_one_template_created_seconds_apart_share_a_decision() {
    let setup = setup(Policy::default());
    let replica = |n, suffix| noe_test_support::deployment_pod_replica("web:1", n, suffix);
    let first = setup.review("team-a", "u1", &replica(1, "x2k8q")).await;
    setup.review("team-a", "u2", &replica(2, "7fzpl")).await;
    assert_eq!(setup.counts(), (0, 0, 2), "seen twice: remembered");
    let third = setup.review("team-a", "u3", &replica(3, "b9c4d")).await;
    assert_eq!(setup.counts(), (1, 0, 2), "answered from the memo");
    assert_eq!(patch(&first), patch(&third));

    // Another label, or a name not generated from generateName: another pod.
    let mut labelled = replica(4, "q8w2e");
    labelled["metadata"]["labels"]["tier"] = json!("front");
    setup.review("team-a", "u4", &labelled).await;
    let mut named = replica(5, "r4t6y");
    named["metadata"]["name"] = json!("web-0");
    setup.review("team-a", "u5", &named).await;
    assert_eq!(setup.counts(), (1, 0, 4));
}
