//! The controllers end to end against the scripted API server (`noe_test_support::KubeApi`)
//! through kube's real `Client`: remediation Events and evictions (a PDB's 429 retried), taints
//! converging with a 409 in the way, leadership acquired, renewed and lost (writes stop), node
//! reflector relist after `410 Gone` and resume from a bookmark.
//!
//! Waits are bounded polls for a condition (no timed assertions); retry intervals are shortened
//! through `Config::timings` because the API server runs on real sockets, where tokio's paused
//! clock would fire the client's own timeouts.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use noe_controller::{
    Config, Controllers, Deps, Metrics, Platform, PodPlatforms, Remediate, Running, Support,
    Timings,
};
use noe_test_support::{
    lease_json, node_json, Fault, KubeApi, PodFixture, RecordedRequest, Resource,
};
use serde_json::Value;

use super::support::{now_rfc3339, short_lease};

fn platforms() -> Arc<dyn PodPlatforms> {
    let only = |arch: &str| Support::Only([Platform::new("linux", arch, None)].into());
    Arc::new(HashMap::from([
        ("amd-only:1".to_owned(), only("amd64")),
        ("arm-only:1".to_owned(), only("arm64")),
        (
            "multi:1".to_owned(),
            Support::Only(
                [
                    Platform::new("linux", "amd64", None),
                    Platform::new("linux", "arm64", None),
                ]
                .into(),
            ),
        ),
    ]))
}

fn fast() -> Timings {
    let short = Duration::from_millis(100);
    Timings {
        node_wait: short,
        lookup_retry: short,
        blocked_retry: short,
        error_retry: short,
        taint_resync: Duration::from_secs(60),
        recheck: Duration::from_secs(3600),
    }
}

fn start(api: &KubeApi, config: Config) -> (Running, prometheus::Registry) {
    let registry = prometheus::Registry::new();
    let metrics = Metrics::new(&registry, 10).unwrap();
    let config = Config {
        timings: fast(),
        ..config
    };
    let running = Controllers::start(
        api.client().unwrap(),
        config,
        Deps {
            platforms: Some(platforms()),
        },
        metrics,
    )
    .unwrap();
    (running, registry)
}

/// Polls `condition` every 20 ms for at most 20 s.
async fn eventually(what: &str, condition: impl FnMut() -> bool) {
    super::support::poll(what, 1000, condition).await;
}

fn counter(registry: &prometheus::Registry, name: &str, labels: &[(&str, &str)]) -> u64 {
    super::support::metric(registry, name, labels) as u64
}

fn writes_to(api: &KubeApi, path: &str) -> Vec<RecordedRequest> {
    api.writes()
        .into_iter()
        .filter(|write| write.path.contains(path))
        .collect()
}

fn two_nodes(api: &KubeApi) {
    api.put_node(node_json("amd", "amd64", "linux"));
    api.put_node(node_json("arm", "arm64", "linux"));
}

#[tokio::test]
async fn report_writes_one_event_on_the_misplaced_pod_only() {
    let api = KubeApi::start().await.unwrap();
    two_nodes(&api);
    api.put_pod(PodFixture::new("shop", "wrong", "arm", &["amd-only:1", "multi:1"]).json());
    api.put_pod(PodFixture::new("shop", "right", "arm", &["arm-only:1", "multi:1"]).json());
    let mut daemon = PodFixture::new("shop", "daemon", "arm", &["amd-only:1"]);
    daemon.owner = Some(("DaemonSet".into(), "agent".into()));
    api.put_pod(daemon.json());
    api.put_pod(PodFixture::new("shop", "pending", "", &["amd-only:1"]).json());
    let (running, registry) = start(
        &api,
        Config {
            remediate: Remediate::Report,
            ..Config::default()
        },
    );

    let events = "/apis/events.k8s.io/v1/namespaces/shop/events";
    eventually("an Event", || !writes_to(&api, events).is_empty()).await;
    eventually("the fitting pod checked", || {
        counter(
            &registry,
            "noe_controller_pods_checked_total",
            &[("result", "fits")],
        ) == 1
    })
    .await;
    eventually("the DaemonSet pod skipped", || {
        counter(
            &registry,
            "noe_controller_pods_checked_total",
            &[("result", "skipped_daemonset")],
        ) == 1
    })
    .await;
    let event = &writes_to(&api, events)[0];
    assert_eq!(event.method, "POST");
    assert_eq!(event.body["regarding"]["name"], "wrong");
    assert_eq!(event.body["regarding"]["kind"], "Pod");
    assert_eq!(event.body["type"], "Warning");
    assert_eq!(event.body["reason"], "UnsupportedPlatform");
    assert_eq!(
        event.body["note"],
        "node arm is linux/arm64; images that cannot run there: amd-only:1 [linux/amd64]"
    );
    // The counter is bumped after the Event is written: wait for it rather than race it.
    eventually("the misplaced pod counted", || {
        counter(
            &registry,
            "noe_controller_pods_misplaced_total",
            &[("namespace", "shop")],
        ) == 1
    })
    .await;

    // A status update of the misplaced pod does not write a second Event.
    let mut wrong = api.get(Resource::Pods, "shop", "wrong").unwrap();
    wrong["status"]["phase"] = "Running".into();
    api.put_pod(wrong);
    eventually("the update reconciled", || {
        counter(&registry, "noe_controller_pods_checked_total", &[]) >= 3
    })
    .await;
    let evictions = api
        .writes()
        .iter()
        .filter(|w| w.path.ends_with("/eviction"))
        .count();
    assert_eq!(evictions, 0, "report mode never evicts");
    assert_eq!(writes_to(&api, events).len(), 1);
    assert!(api
        .requests()
        .iter()
        .any(|r| r.query_param("fieldSelector").as_deref() == Some("spec.nodeName!=")));
    running.shutdown().await;
}

#[tokio::test]
async fn evict_retries_a_pdb_refusal_and_skips_pods_without_controller() {
    let api = KubeApi::start().await.unwrap();
    two_nodes(&api);
    api.put_pod(PodFixture::new("shop", "web", "arm", &["amd-only:1"]).json());
    let mut orphan = PodFixture::new("shop", "orphan", "arm", &["amd-only:1"]);
    orphan.owner = None;
    api.put_pod(orphan.json());
    api.fault(Fault::pdb_blocks_eviction("shop", "web", 2));
    let (running, registry) = start(
        &api,
        Config {
            remediate: Remediate::Evict,
            remediate_rate_per_minute: 100,
            ..Config::default()
        },
    );

    eventually("web evicted", || {
        api.get(Resource::Pods, "shop", "web").is_none()
    })
    .await;
    let evictions: Vec<RecordedRequest> = api
        .writes()
        .into_iter()
        .filter(|w| w.path.ends_with("/eviction"))
        .collect();
    let statuses: Vec<u16> = evictions.iter().map(|e| e.status).collect();
    assert_eq!(statuses, [429, 429, 201]);
    let uid = evictions[2].body["deleteOptions"]["preconditions"]["uid"]
        .as_str()
        .unwrap();
    assert!(
        uid.starts_with("uid-"),
        "eviction conditional on the pod's UID: {uid}"
    );
    assert_eq!(evictions[2].body["apiVersion"], "policy/v1");
    assert!(evictions
        .iter()
        .all(|e| e.path == "/api/v1/namespaces/shop/pods/web/eviction"));
    assert_eq!(
        counter(
            &registry,
            "noe_pods_deletion_total",
            &[("status", "blocked")]
        ),
        2
    );
    // The pod is gone when the API answers; the count follows that answer.
    eventually("the eviction counted", || {
        counter(
            &registry,
            "noe_pods_deletion_total",
            &[("status", "success"), ("namespace", "shop")],
        ) == 1
    })
    .await;

    // The orphan is reported, never evicted; each pod got exactly one Event.
    eventually("both reported", || {
        writes_to(&api, "/apis/events.k8s.io/v1/namespaces/shop/events").len() == 2
    })
    .await;
    assert!(api.get(Resource::Pods, "shop", "orphan").is_some());
    let notes: Vec<String> = writes_to(&api, "/events")
        .iter()
        .map(|e| e.body["note"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(notes.iter().any(|n| n.ends_with("; evicting")), "{notes:?}");
    assert!(
        notes.iter().any(|n| n.contains("no controller owner")),
        "{notes:?}"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn evictions_are_rate_limited() {
    let api = KubeApi::start().await.unwrap();
    two_nodes(&api);
    for i in 0..3 {
        api.put_pod(PodFixture::new("shop", &format!("web{i}"), "arm", &["amd-only:1"]).json());
    }
    let (running, _registry) = start(
        &api,
        Config {
            remediate: Remediate::Evict,
            remediate_rate_per_minute: 2,
            ..Config::default()
        },
    );
    // A burst of 2, then one every 30 s: the third pod stays (and all three were reported).
    eventually("two evicted", || api.count(Resource::Pods) == 1).await;
    eventually("three reported", || writes_to(&api, "/events").len() == 3).await;
    assert_eq!(
        api.writes()
            .iter()
            .filter(|w| w.path.ends_with("/eviction"))
            .count(),
        2
    );
    running.shutdown().await;
}

fn taints(api: &KubeApi, node: &str) -> Value {
    api.get(Resource::Nodes, "", node).unwrap()["spec"]["taints"].clone()
}

#[tokio::test]
async fn taints_converge_through_a_conflict_and_follow_new_nodes() {
    let api = KubeApi::start().await.unwrap();
    let mut arm = node_json("arm", "arm64", "linux");
    arm["spec"]["taints"] =
        serde_json::json!([{"key": "dedicated", "value": "ci", "effect": "NoSchedule"}]);
    api.put_node(arm);
    let mut amd = node_json("amd", "amd64", "linux");
    amd["spec"]["taints"] = serde_json::json!([{"key": "arch.noe.adevinta.com/arch", "value": "arm64", "effect": "NoSchedule"}]);
    api.put_node(amd);
    api.fault(Fault::new("PATCH", "/api/v1/nodes/arm", 409));
    let (running, registry) = start(
        &api,
        Config {
            taint_arches: ["arm64".to_owned()].into(),
            ..Config::default()
        },
    );

    eventually("arm tainted", || {
        taints(&api, "arm").as_array().is_some_and(|t| t.len() == 2)
    })
    .await;
    assert_eq!(
        taints(&api, "arm"),
        serde_json::json!([
            {"key": "dedicated", "value": "ci", "effect": "NoSchedule"},
            {"key": "arch.noe.adevinta.com/arch", "value": "arm64", "effect": "NoSchedule"},
        ])
    );
    eventually("ours removed from amd", || {
        taints(&api, "amd") == serde_json::json!([])
    })
    .await;
    let arm_writes: Vec<u16> = writes_to(&api, "/api/v1/nodes/arm")
        .iter()
        .map(|w| w.status)
        .collect();
    assert_eq!(arm_writes, [409, 200]);
    let patch = &writes_to(&api, "/api/v1/nodes/arm")[1];
    assert!(
        patch.body["metadata"]["resourceVersion"].is_string(),
        "optimistic concurrency"
    );
    assert_eq!(
        patch.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    // The counter is bumped after the write's answer arrives: wait for it rather than race it.
    eventually("the conflict counted", || {
        counter(
            &registry,
            "noe_controller_node_taint_writes_total",
            &[("result", "conflict")],
        ) == 1
    })
    .await;

    // A new arm node is tainted from the watch.
    api.put_node(node_json("arm2", "arm64", "linux"));
    eventually("arm2 tainted", || {
        taints(&api, "arm2")
            .as_array()
            .is_some_and(|t| t.len() == 1)
    })
    .await;
    running.shutdown().await;

    // untaint removes ours everywhere and nothing else.
    let changed = noe_controller::untaint(api.client().unwrap(), "noe")
        .await
        .unwrap();
    assert_eq!(changed.len(), 2, "{changed:?}");
    assert_eq!(
        taints(&api, "arm"),
        serde_json::json!([{"key": "dedicated", "value": "ci", "effect": "NoSchedule"}])
    );
    assert_eq!(taints(&api, "arm2"), serde_json::json!([]));
    assert!(noe_controller::untaint(api.client().unwrap(), "noe")
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn leadership_is_acquired_renewed_and_lost_and_writes_stop() {
    let api = KubeApi::start().await.unwrap();
    api.put_node(node_json("arm", "arm64", "linux"));
    // Another replica held the lease and stopped renewing.
    api.put(
        Resource::Leases,
        "noe",
        lease_json("noe-controller", "replica-b", &now_rfc3339(), 1),
    );
    let lease = short_lease();
    let (running, registry) = start(
        &api,
        Config {
            taint_arches: ["arm64".to_owned()].into(),
            leader_election: Some(lease),
            ..Config::default()
        },
    );
    let leadership = running.leadership();
    assert!(!leadership.is_leader());
    eventually("lease taken over", || leadership.is_leader()).await;
    let held = api.get(Resource::Leases, "noe", "noe-controller").unwrap();
    assert_eq!(held["spec"]["holderIdentity"], "replica-a");
    assert_eq!(held["spec"]["leaseTransitions"], 4);
    assert_eq!(held["spec"]["leaseDurationSeconds"], 2);
    eventually("arm tainted by the leader", || {
        taints(&api, "arm").as_array().is_some_and(|t| t.len() == 1)
    })
    .await;
    let renewals = || {
        api.writes()
            .iter()
            .filter(|w| {
                w.method == "PUT" && w.path.ends_with("/leases/noe-controller") && w.status == 200
            })
            .count()
    };
    let first = renewals();
    eventually("renewed", || renewals() >= first + 2).await;
    assert_eq!(
        counter(&registry, "noe_controller_leader_transitions_total", &[]),
        1
    );

    // Replica b takes the lease back (a long one): a, seeing it changed, stops leading.
    api.put(
        Resource::Leases,
        "noe",
        lease_json("noe-controller", "replica-b", &now_rfc3339(), 3600),
    );
    eventually("leadership lost", || !leadership.is_leader()).await;
    let writes_at_loss = writes_to(&api, "/api/v1/nodes/").len();
    // A new arm node arrives: the view (every replica) sees it, the taint controller does not
    // write. Wait for several election rounds after the view saw it.
    api.put_node(node_json("arm2", "arm64", "linux"));
    eventually("the view saw arm2", || {
        running.node_view().unwrap().node("arm2").is_some()
    })
    .await;
    let gets = || {
        api.requests()
            .iter()
            .filter(|r| r.method == "GET" && r.path.ends_with("/leases/noe-controller"))
            .count()
    };
    let seen = gets();
    eventually("three more election rounds", || gets() >= seen + 3).await;
    assert_eq!(
        writes_to(&api, "/api/v1/nodes/").len(),
        writes_at_loss,
        "no node write after losing the lease"
    );
    assert_eq!(taints(&api, "arm2"), Value::Null);
    assert_eq!(
        api.get(Resource::Leases, "noe", "noe-controller").unwrap()["spec"]["holderIdentity"],
        "replica-b"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn shutdown_releases_a_held_lease() {
    let api = KubeApi::start().await.unwrap();
    let lease = short_lease();
    let (running, _registry) = start(
        &api,
        Config {
            watch_nodes: true,
            leader_election: Some(lease),
            ..Config::default()
        },
    );
    let leadership = running.leadership();
    eventually("lease created and held", || leadership.is_leader()).await;
    let created = writes_to(&api, "/leases")
        .into_iter()
        .find(|w| w.method == "POST")
        .unwrap();
    assert_eq!(created.body["spec"]["holderIdentity"], "replica-a");
    running.shutdown().await;
    let lease = api.get(Resource::Leases, "noe", "noe-controller").unwrap();
    assert!(lease["spec"]["holderIdentity"].is_null(), "{lease}");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 1);
}

#[tokio::test]
async fn node_view_relists_after_gone_and_resumes_from_bookmarks() {
    let api = KubeApi::start().await.unwrap();
    two_nodes(&api);
    let (running, _registry) = start(
        &api,
        Config {
            watch_nodes: true,
            ..Config::default()
        },
    );
    let view = running.node_view().unwrap();
    tokio::time::timeout(Duration::from_secs(20), view.ready())
        .await
        .unwrap();
    let archs: Vec<String> = view.archs().unwrap().iter().cloned().collect();
    assert_eq!(archs, ["amd64", "arm64"]);
    assert_eq!(
        view.node("arm").unwrap().platform(),
        Some(Platform::new("linux", "arm64", None))
    );

    // A bookmark moves the resume point: the next watch starts from its resource version.
    let watches = || {
        api.requests()
            .into_iter()
            .filter(|r| r.path == "/api/v1/nodes" && r.query_param("watch").is_some())
            .collect::<Vec<_>>()
    };
    eventually("watching", || !watches().is_empty()).await;
    assert_eq!(
        watches()[0].query_param("allowWatchBookmarks").as_deref(),
        Some("true")
    );
    api.put_node(node_json("s390", "s390x", "linux"));
    eventually("s390 seen", || view.node("s390").is_some()).await;
    // No node changes after this version; only the bookmark carries it to the client.
    api.put(
        Resource::Leases,
        "noe",
        lease_json("unrelated", "x", &now_rfc3339(), 1),
    );
    let bookmark_rv = api.get(Resource::Leases, "noe", "unrelated").unwrap()["metadata"]
        ["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let count = watches().len();
    api.bookmark(Resource::Nodes);
    api.end_watches();
    eventually("re-watched", || watches().len() > count).await;
    assert_eq!(
        watches()[count].query_param("resourceVersion"),
        Some(bookmark_rv),
        "resumed from the bookmark"
    );

    // 410 Gone: the history is compacted, the watch resumes from an old version, gets 410 and
    // the reflector lists again; a node added meanwhile appears, a deleted one disappears.
    let lists = || {
        api.requests()
            .iter()
            .filter(|r| r.path == "/api/v1/nodes" && r.query_param("watch").is_none())
            .count()
    };
    let lists_before = lists();
    api.compact();
    api.put_node(node_json("riscv", "riscv64", "linux"));
    assert!(api.delete(Resource::Nodes, "", "amd"));
    api.compact();
    eventually("relisted", || lists() > lists_before).await;
    eventually("riscv seen", || view.node("riscv").is_some()).await;
    eventually("amd gone", || view.node("amd").is_none()).await;
    eventually("archs follow", || {
        view.archs()
            .is_some_and(|a| a.iter().cloned().collect::<Vec<_>>() == ["arm64", "riscv64", "s390x"])
    })
    .await;
    assert!(api
        .requests()
        .iter()
        .any(|r| r.status == 200 && r.query_param("watch").is_some()));
    running.shutdown().await;
}

#[tokio::test]
async fn node_view_relists_when_its_very_first_watch_is_gone() {
    let api = KubeApi::start().await.unwrap();
    two_nodes(&api);
    // The history is compacted between the first list and its watch: that watch's first and
    // only event is `410 Gone`.
    api.fault(Fault::expired_watch("/api/v1/nodes"));
    let (running, _registry) = start(
        &api,
        Config {
            watch_nodes: true,
            ..Config::default()
        },
    );
    let view = running.node_view().unwrap();
    tokio::time::timeout(Duration::from_secs(20), view.ready())
        .await
        .unwrap();
    let node_requests = |watch: bool| {
        api.requests()
            .into_iter()
            .filter(|r| r.path == "/api/v1/nodes" && r.query_param("watch").is_some() == watch)
            .count()
    };
    // Listed again after the 410 (a watch resuming from the same version would get it again),
    // then watching: a node added now is seen.
    eventually("relisted", || node_requests(false) >= 2).await;
    eventually("watching again", || node_requests(true) >= 2).await;
    api.put_node(node_json("s390", "s390x", "linux"));
    eventually("s390 seen", || view.node("s390").is_some()).await;
    let archs: Vec<String> = view.archs().unwrap().iter().cloned().collect();
    assert_eq!(archs, ["amd64", "arm64", "s390x"]);
    running.shutdown().await;
}

/// Platforms that a test can change (a tag moving in the registry).
struct Moving(std::sync::Mutex<HashMap<String, Support>>);

impl PodPlatforms for Moving {
    fn platforms<'a>(
        &'a self,
        pod: &'a noe_controller::PodImages,
    ) -> futures::future::BoxFuture<'a, Vec<noe_controller::ImageLookup>> {
        let map = self.0.lock().unwrap().clone();
        Box::pin(async move { map.platforms(pod).await })
    }
}

#[tokio::test]
async fn pods_are_judged_again_when_an_image_changes_or_a_tag_moves() {
    let api = KubeApi::start().await.unwrap();
    two_nodes(&api);
    api.put_pod(PodFixture::new("shop", "web", "arm", &["multi:1"]).json());
    api.put_pod(PodFixture::new("shop", "api", "arm", &["tag:latest"]).json());
    let only = |arch: &str| Support::Only([Platform::new("linux", arch, None)].into());
    let both = Support::Only(
        [
            Platform::new("linux", "amd64", None),
            Platform::new("linux", "arm64", None),
        ]
        .into(),
    );
    let moving = Arc::new(Moving(std::sync::Mutex::new(HashMap::from([
        ("multi:1".to_owned(), both.clone()),
        ("amd-only:1".to_owned(), only("amd64")),
        ("tag:latest".to_owned(), both),
    ]))));
    let registry = prometheus::Registry::new();
    let config = Config {
        remediate: Remediate::Report,
        timings: Timings {
            recheck: Duration::from_millis(300),
            ..fast()
        },
        ..Config::default()
    };
    let running = Controllers::start(
        api.client().unwrap(),
        config,
        Deps {
            platforms: Some(moving.clone()),
        },
        Metrics::new(&registry, 10).unwrap(),
    )
    .unwrap();
    eventually("both fit", || {
        counter(
            &registry,
            "noe_controller_pods_checked_total",
            &[("result", "fits")],
        ) >= 2
    })
    .await;
    assert!(writes_to(&api, "/events").is_empty());

    // The image of a running pod is changed in place (kubectl set image on a bare pod).
    let mut web = api.get(Resource::Pods, "shop", "web").unwrap();
    web["spec"]["containers"][0]["image"] = "amd-only:1".into();
    api.put_pod(web);
    eventually("web reported", || {
        writes_to(&api, "/events")
            .iter()
            .any(|e| e.body["regarding"]["name"] == "web")
    })
    .await;

    // The tag moves to an amd64-only image: the next recheck finds it, with no pod change.
    moving
        .0
        .lock()
        .unwrap()
        .insert("tag:latest".to_owned(), only("amd64"));
    eventually("api reported", || {
        writes_to(&api, "/events")
            .iter()
            .any(|e| e.body["regarding"]["name"] == "api")
    })
    .await;
    assert_eq!(writes_to(&api, "/events").len(), 2);
    running.shutdown().await;
}
