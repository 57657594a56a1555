//! The scripted API server answers kube's real `Client` as the apiserver would: pages, watches
//! from a resource version, `410 Gone`, conflicts, evictions and scripted faults.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::Api;
use noe_test_support::{lease_json, node_json, Fault, KubeApi, PodFixture, Resource, TestCa};
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
