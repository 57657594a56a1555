//! The scripted API server answers kube's real `Client` as the apiserver would: pages, watches
//! from a resource version, `410 Gone`, conflicts, evictions and scripted faults.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::Api;
use noe_test_support::{
    gated_pod_json, lease_json, node_json, Fault, KubeApi, PodFixture, Resource, TestCa, NOE_GATE,
    NOE_GATE_LABEL,
};
use serde_json::json;

#[tokio::test]
async fn lists_in_pages_with_a_resource_version() {
    let api = KubeApi::start().await.unwrap();
    for i in 0..5 {
        api.put_node(node_json(&format!("n{i}"), "arm64", "linux"));
    }
    let nodes: Api<Node> = Api::all(api.client().unwrap());
    let first = nodes.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    let token = first.metadata.continue_.clone().unwrap();
    let rest = nodes
        .list(&ListParams::default().limit(10).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 3);
    assert_eq!(rest.metadata.continue_.as_deref(), Some(""));
    assert!(first.metadata.resource_version.is_some());
    let labels = rest.items[0].metadata.labels.clone().unwrap();
    assert_eq!(labels["kubernetes.io/arch"], "arm64");
}

#[tokio::test]
async fn field_selector_keeps_bound_pods() {
    let api = KubeApi::start().await.unwrap();
    api.put_pod(PodFixture::new("a", "bound", "n1", &["app:1"]).json());
    api.put_pod(PodFixture::new("a", "pending", "", &["app:1"]).json());
    let pods: Api<Pod> = Api::all(api.client().unwrap());
    let list = pods
        .list(&ListParams::default().fields("spec.nodeName!="))
        .await
        .unwrap();
    let names: Vec<_> = list
        .items
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["bound"]);
}

#[tokio::test]
async fn watch_resumes_and_gets_gone_after_compaction() {
    let api = KubeApi::start().await.unwrap();
    api.put_node(node_json("n1", "amd64", "linux"));
    let nodes: Api<Node> = Api::all(api.client().unwrap());
    let rv = nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    api.put_node(node_json("n2", "arm64", "linux"));
    let params = WatchParams::default().timeout(5);
    let mut stream = nodes.watch(&params, &rv).await.unwrap().boxed();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Added(node) => assert_eq!(node.metadata.name.as_deref(), Some("n2")),
        other => panic!("expected ADDED n2, got {other:?}"),
    }
    api.bookmark(Resource::Nodes);
    assert!(matches!(
        stream.try_next().await.unwrap().unwrap(),
        WatchEvent::Bookmark(_)
    ));
    api.compact();
    assert!(
        stream.try_next().await.unwrap().is_none(),
        "compaction ends watches"
    );
    let mut stream = nodes.watch(&params, &rv).await.unwrap().boxed();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(status) => assert_eq!(status.code, 410),
        other => panic!("expected 410, got {other:?}"),
    }
}

#[tokio::test]
async fn merge_patch_with_a_stale_resource_version_conflicts() {
    let ca = TestCa::new().unwrap();
    let api = KubeApi::start_tls(&ca).await.unwrap();
    api.put_node(node_json("n1", "arm64", "linux"));
    let nodes: Api<Node> = Api::all(api.client().unwrap());
    let node = nodes.get("n1").await.unwrap();
    let rv = node.metadata.resource_version.clone().unwrap();
    let taint = json!({"metadata": {"resourceVersion": rv},
        "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}});
    nodes
        .patch("n1", &PatchParams::default(), &Patch::Merge(&taint))
        .await
        .unwrap();
    let error = nodes
        .patch("n1", &PatchParams::default(), &Patch::Merge(&taint))
        .await
        .unwrap_err();
    assert!(matches!(error, kube::Error::Api(status) if status.code == 409));
    let taints = nodes.get("n1").await.unwrap().spec.unwrap().taints.unwrap();
    assert_eq!(taints.len(), 1);
}

#[tokio::test]
async fn lease_replace_needs_the_current_version_and_faults_are_scripted() {
    let api = KubeApi::start().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(api.client().unwrap(), "noe");
    let lease: Lease =
        serde_json::from_value(lease_json("noe", "a", "2026-11-01T00:00:00.000000Z", 15)).unwrap();
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();
    let again = leases
        .create(&PostParams::default(), &lease)
        .await
        .unwrap_err();
    assert!(matches!(again, kube::Error::Api(status) if status.code == 409));
    let mut stale = created.clone();
    leases
        .replace("noe", &PostParams::default(), &created)
        .await
        .unwrap();
    stale.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let error = leases
        .replace("noe", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert!(matches!(error, kube::Error::Api(status) if status.code == 409));

    api.fault(Fault::new("GET", "/leases/noe", 503).times(2));
    for _ in 0..2 {
        let error = leases.get("noe").await.unwrap_err();
        assert!(matches!(error, kube::Error::Api(status) if status.code == 503));
    }
    assert!(leases.get("noe").await.is_ok());
    let statuses: Vec<u16> = api
        .requests()
        .iter()
        .filter(|r| r.method == "GET")
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, [503, 503, 200]);
}

#[tokio::test]
async fn eviction_deletes_the_pod_unless_a_budget_refuses() {
    let api = KubeApi::start().await.unwrap();
    api.put_pod(PodFixture::new("a", "web", "n1", &["app:1"]).json());
    let uid = api.get(Resource::Pods, "a", "web").unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    api.fault(Fault::pdb_blocks_eviction("a", "web", 1));
    let pods: Api<Pod> = Api::namespaced(api.client().unwrap(), "a");
    let body = serde_json::to_vec(&json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "web", "namespace": "a"},
        "deleteOptions": {"preconditions": {"uid": uid}}}))
    .unwrap();
    let refused = pods
        .create_subresource::<serde_json::Value>(
            "eviction",
            "web",
            &PostParams::default(),
            body.clone(),
        )
        .await
        .unwrap_err();
    assert!(matches!(refused, kube::Error::Api(status) if status.code == 429));
    assert_eq!(api.count(Resource::Pods), 1);
    pods.create_subresource::<serde_json::Value>("eviction", "web", &PostParams::default(), body)
        .await
        .unwrap();
    assert_eq!(api.count(Resource::Pods), 0);
    let evictions: Vec<u16> = api.writes().iter().map(|w| w.status).collect();
    assert_eq!(evictions, [429, 201]);
}

fn status_of(error: kube::Error) -> kube::core::ErrorResponse {
    match error {
        kube::Error::Api(status) => status,
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test]
async fn gated_pods_are_released_only_as_kep_3838_allows() {
    let api = KubeApi::start().await.unwrap();
    let mut pod = gated_pod_json("shop", "web", &["app:1"]);
    pod["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}});
    api.put_pod(pod);
    let pods: Api<Pod> = Api::namespaced(api.client().unwrap(), "shop");
    let rv = pods.get("web").await.unwrap().metadata.resource_version;
    let arch = json!({"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]});
    // A term added next to the user's: the apiserver refuses it.
    let added = json!({"metadata": {"resourceVersion": rv}, "spec": {"schedulingGates": [],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            {"matchExpressions": [arch]}]}}}}});
    let refused = status_of(
        pods.patch("web", &PatchParams::default(), &Patch::Merge(&added))
            .await
            .unwrap_err(),
    );
    assert_eq!((refused.code, refused.reason.as_str()), (422, "Invalid"));
    assert!(
        refused.message.starts_with("Pod \"web\" is invalid: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: Invalid value: ")
            && refused.message.ends_with(": no additions/deletions to non-empty NodeSelectorTerms list are allowed"),
        "{}",
        refused.message
    );
    // Appended to the term, with the gate removed, in one write: accepted.
    let release = json!({"metadata": {"resourceVersion": rv}, "spec": {"schedulingGates": [],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}, arch]}]}}}}});
    pods.patch("web", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    // The same write again: its resource version is stale.
    let stale = status_of(
        pods.patch("web", &PatchParams::default(), &Patch::Merge(&release))
            .await
            .unwrap_err(),
    );
    assert_eq!(stale.code, 409);
    // No gate may come back.
    let regate = json!({"spec": {"schedulingGates": [{"name": NOE_GATE}]}});
    let refused = status_of(
        pods.patch("web", &PatchParams::default(), &Patch::Merge(&regate))
            .await
            .unwrap_err(),
    );
    assert_eq!(refused.code, 422);
    assert_eq!(refused.message, format!("Pod \"web\" is invalid: spec.schedulingGates[0].name: Forbidden: only deletion is allowed, but found new scheduling gate '{NOE_GATE}'"));
}

#[tokio::test]
async fn a_gated_pod_with_a_node_name_is_not_created() {
    let api = KubeApi::start().await.unwrap();
    let mut pod = gated_pod_json("shop", "web", &["app:1"]);
    pod["spec"]["nodeName"] = json!("n1");
    let pods: Api<Pod> = Api::namespaced(api.client().unwrap(), "shop");
    let pod: Pod = serde_json::from_value(pod).unwrap();
    let refused = status_of(pods.create(&PostParams::default(), &pod).await.unwrap_err());
    assert_eq!(refused.code, 422);
    assert_eq!(refused.message, "Pod \"web\" is invalid: spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared");
    assert_eq!(api.count(Resource::Pods), 0);
}

#[tokio::test]
async fn selector_watches_see_pods_enter_and_leave() {
    let api = KubeApi::start().await.unwrap();
    api.put_pod(PodFixture::new("shop", "bound", "n1", &["app:1"]).json());
    api.put_pod(gated_pod_json("shop", "web", &["app:1"]));
    let pods: Api<Pod> = Api::all(api.client().unwrap());
    let params = ListParams::default()
        .labels(&format!("{NOE_GATE_LABEL}=gated"))
        .fields("status.phase=Pending");
    let list = pods.list(&params).await.unwrap();
    let names: Vec<_> = list
        .items
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["web"]);
    let rv = list.metadata.resource_version.unwrap();
    let watch = WatchParams::default()
        .labels(&format!("{NOE_GATE_LABEL}=gated"))
        .fields("status.phase=Pending");
    let mut events = pods.watch(&watch, &rv).await.unwrap().boxed();
    // A pod that does not match changes: nothing. Ours is released (label dropped): DELETED.
    let mut other = api.get(Resource::Pods, "shop", "bound").unwrap();
    other["metadata"]["labels"]["x"] = json!("y");
    api.put_pod(other);
    api.put_pod(gated_pod_json("shop", "late", &["app:1"]));
    let mut web = api.get(Resource::Pods, "shop", "web").unwrap();
    web["metadata"]["labels"][NOE_GATE_LABEL] = json!("released");
    web["spec"]["schedulingGates"] = json!([]);
    api.put_pod(web);
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match events.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(pod) => seen.push(format!("added {}", pod.metadata.name.unwrap())),
            WatchEvent::Deleted(pod) => {
                seen.push(format!("deleted {}", pod.metadata.name.unwrap()));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, ["added late", "deleted web"]);
}
