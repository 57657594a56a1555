//! The `NodeFeature` reflector (`--watch-node-features`) against the scripted API: objects
//! listed and watched in every namespace, keyed by their node-name label; a missing CRD (`404`)
//! counted and retried with backoff, then listed once it is served.

use std::time::Duration;

use noe_controller::{Config, Controllers, Deps, Metrics, NodeFeatureView, Running};
use noe_test_support::{node_feature_json, Fault, KubeApi, Resource, NFD_NAMESPACE};
use serde_json::json;

use super::support::{metric, poll};

fn modules(names: &[&str]) -> serde_json::Value {
    let elements: serde_json::Map<String, serde_json::Value> =
        names.iter().map(|n| ((*n).to_owned(), json!({}))).collect();
    json!({"flags": {"kernel.loadedmodule": {"elements": elements}},
        "attributes": {"kernel.version": {"elements": {"major": "6", "minor": "1"}}}})
}

/// The controllers (none configured) and the `NodeFeature` reflector started on `api`.
fn start(api: &KubeApi) -> (prometheus::Registry, Running, NodeFeatureView) {
    let registry = prometheus::Registry::new();
    let metrics = Metrics::new(&registry, 10).unwrap();
    let mut running = Controllers::start(
        api.client().unwrap(),
        Config::default(),
        Deps::default(),
        metrics,
    )
    .unwrap();
    let view = running.start_node_features();
    (registry, running, view)
}

#[tokio::test]
async fn node_features_are_listed_watched_and_a_missing_crd_is_retried() {
    let api = KubeApi::start().await.unwrap();
    // The CRD is not served for the first lists: the apiserver's 404 for an unknown resource.
    api.fault(Fault::new("GET", "/apis/nfd.k8s-sigs.io/v1alpha1/nodefeatures", 404).times(2));
    api.put_node_feature(node_feature_json("n1", modules(&["kvm"])));
    let mut gpu = node_feature_json("n1", modules(&["nvidia"]));
    gpu["metadata"]["name"] = json!("n1-gpu");
    gpu["metadata"]["namespace"] = json!("gpu-operator");
    // The same attribute as NFD's own object: nfd-master merges the objects of its namespace
    // first, so this one's value wins, element by element.
    gpu["spec"]["features"] = json!({
        "flags": {"kernel.enabledmodule": {"elements": {"nvidia": {}}}},
        "attributes": {"kernel.version": {"elements": {"minor": "15"}}}
    });
    api.put_node_feature(gpu);
    let mut unlabelled = node_feature_json("n9", modules(&["kvm"]));
    unlabelled["metadata"]["labels"] = json!({});
    api.put_node_feature(unlabelled);

    let (registry, running, view) = start(&api);
    poll("listed after the CRD appeared", 1500, || view.is_ready()).await;
    assert_eq!(
        metric(
            &registry,
            "noe_controller_watch_errors_total",
            &[("resource", "nodefeatures")]
        ),
        2.0
    );
    let n1 = view.features("n1").unwrap();
    assert!(n1.get("kernel.loadedmodule").unwrap().has_flag("kvm"));
    assert!(
        n1.get("kernel.enabledmodule").unwrap().has_flag("nvidia"),
        "merged"
    );
    let version = n1.get("kernel.version").unwrap();
    assert_eq!(version.attribute("major"), Some("6"));
    assert_eq!(
        version.attribute("minor"),
        Some("15"),
        "the object outside NFD's namespace is merged last"
    );
    assert!(view.features("n9").is_none(), "no node-name label");
    assert_eq!(view.len(), 1);

    // Watched: a new node's object, a changed one, a deleted one.
    api.put_node_feature(node_feature_json("n2", modules(&["vfio_pci"])));
    poll("n2 seen", 1000, || view.features("n2").is_some()).await;
    api.put_node_feature(node_feature_json("n1", modules(&["kvm", "vhost_net"])));
    poll("n1 changed", 1000, || {
        view.features("n1").is_some_and(|f| {
            f.get("kernel.loadedmodule")
                .is_some_and(|m| m.has_flag("vhost_net"))
        })
    })
    .await;
    assert!(api.delete(Resource::NodeFeatures, NFD_NAMESPACE, "n2"));
    poll("n2 gone", 1000, || view.features("n2").is_none()).await;
    let lists = api
        .requests()
        .into_iter()
        .filter(|r| r.path == "/apis/nfd.k8s-sigs.io/v1alpha1/nodefeatures")
        .count();
    assert!(lists >= 3, "two refused lists, then a list and a watch");
    tokio::time::timeout(Duration::from_secs(10), running.shutdown())
        .await
        .unwrap();
}

/// 2,000 objects labelled for one node, each with a feature of its own, then 200 updates of one
/// of them: each event merges at most `MAX_OBJECTS_PER_NODE` objects (the crowded node's
/// features are unknown, so it is evaluated by its labels), so the list and the updates cost
/// what their events cost; another node's objects merge as before. Merging all of a node's
/// objects at every event, this list alone was quadratic (2,000 objects: a minute of CPU).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_objects_for_one_node_cost_linear_work() {
    use noe_controller::node_features::MAX_OBJECTS_PER_NODE;
    let api = KubeApi::start().await.unwrap();
    let object = |i: usize, value: usize| {
        let mut nf = node_feature_json("busy", json!({}));
        nf["metadata"]["name"] = json!(format!("busy-{i:05}"));
        nf["metadata"]["namespace"] = json!("team");
        let mut elements = serde_json::Map::new();
        elements.insert(format!("v{value}"), json!({}));
        nf["spec"]["features"] =
            json!({"flags": {format!("custom.feature{i}"): {"elements": elements}}});
        nf
    };
    for i in 0..2000 {
        api.put_node_feature(object(i, 0));
    }
    api.put_node_feature(node_feature_json("calm", modules(&["kvm"])));
    let (_registry, running, view) = start(&api);
    poll("listed", 1500, || view.is_ready()).await;
    assert!(
        view.features("busy").is_none(),
        "more than {MAX_OBJECTS_PER_NODE} objects"
    );
    assert!(view.features("calm").is_some());
    for update in 1..=200 {
        api.put_node_feature(object(7, update));
    }
    api.put_node_feature(node_feature_json("calm", modules(&["kvm", "vhost_net"])));
    poll("every update seen", 1500, || {
        view.features("calm").is_some_and(|f| {
            f.get("kernel.loadedmodule")
                .is_some_and(|m| m.has_flag("vhost_net"))
        })
    })
    .await;
    // Back under the bound: the node's features are merged again.
    for i in MAX_OBJECTS_PER_NODE..2000 {
        assert!(api.delete(Resource::NodeFeatures, "team", &format!("busy-{i:05}")));
    }
    poll("busy merged again", 1500, || {
        view.features("busy").is_some_and(|f| {
            f.get("custom.feature7").is_some_and(|m| m.has_flag("v200"))
                && f.get("custom.feature0").is_some()
        })
    })
    .await;
    tokio::time::timeout(Duration::from_secs(10), running.shutdown())
        .await
        .unwrap();
}
