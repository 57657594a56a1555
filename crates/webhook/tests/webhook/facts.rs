//! The facts I/O with kube's real `Client` against the scripted API server
//! (`noe_test_support::KubeApi`): namespaces and nodes read with cached GETs (failures cached
//! briefly, bounded by a timeout, invalid names never sent), and the admission using them — the
//! namespace's preferred arch for a pod, a node's platform for a debug container.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use noe_core::decide::{NodeFacts, OnContradiction, Policy};
use noe_core::Platform;
use noe_test_support::{ephemeral_review, namespace_json, node_json, Fault, KubeApi, Resource};
use noe_webhook::admission::Admission;
use noe_webhook::facts::{
    ClusterFacts, FactRequest, FactSource, NamespacePreferences, NodeGets, NodeLookup,
};
use noe_webhook::metrics::Metrics;
use noe_webhook::resolve::{Anonymous, LookupError, PlatformLookup, PodCredentials, Resolve};
use serde_json::{json, Value};

const PREFERRED: &str = "arch.noe.adevinta.com/preferred";

fn gets(api: &KubeApi, path: &str) -> usize {
    api.requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path == path)
        .count()
}

fn namespaces(api: &KubeApi) -> NamespacePreferences {
    NamespacePreferences::with_limits(
        api.client().unwrap(),
        Duration::from_secs(30),
        Duration::from_millis(300),
        Duration::from_secs(2),
    )
}

#[tokio::test]
async fn namespace_labels_are_read_once_and_bounded() {
    let api = KubeApi::start().await.unwrap();
    api.put(
        Resource::Namespaces,
        "",
        namespace_json("team-a", &[(PREFERRED, "arm64")]),
    );
    api.put(Resource::Namespaces, "", namespace_json("plain", &[]));
    api.put(
        Resource::Namespaces,
        "",
        namespace_json("odd", &[(PREFERRED, "not an arch")]),
    );
    let ns = namespaces(&api);

    assert_eq!(ns.preferred_arch("team-a").await.as_deref(), Some("arm64"));
    assert_eq!(ns.preferred_arch("team-a").await.as_deref(), Some("arm64"));
    assert_eq!(gets(&api, "/api/v1/namespaces/team-a"), 1, "cached");
    assert_eq!(ns.preferred_arch("plain").await, None);
    assert_eq!(ns.preferred_arch("odd").await, None, "not a label value");
    // A namespace that does not exist has no preference, and is remembered like one that does.
    assert_eq!(ns.preferred_arch("gone").await, None);
    assert_eq!(ns.preferred_arch("gone").await, None);
    assert_eq!(gets(&api, "/api/v1/namespaces/gone"), 1);
    // Names a namespace cannot have never reach the API (a review's namespace is untrusted).
    for bad in ["../secrets", "A", "", &"a".repeat(64), "a/b"] {
        assert_eq!(ns.preferred_arch(bad).await, None, "{bad}");
    }
    assert_eq!(api.requests().len(), 4, "{:?}", api.requests());
}

#[tokio::test]
async fn namespace_failures_are_cached_briefly() {
    let api = KubeApi::start().await.unwrap();
    api.put(
        Resource::Namespaces,
        "",
        namespace_json("team-a", &[(PREFERRED, "arm64")]),
    );
    api.fault(Fault::new("GET", "/api/v1/namespaces/team-a", 403));
    let metrics = Metrics::register(&prometheus::Registry::new()).unwrap();
    let clock = noe_core::clock::Clock::manual();
    let ns = namespaces(&api)
        .with_error_counter(metrics.fact_errors.clone())
        .with_clock(clock.clone());
    assert_eq!(ns.preferred_arch("team-a").await, None, "forbidden");
    assert_eq!(ns.preferred_arch("team-a").await, None, "failure cached");
    assert_eq!(gets(&api, "/api/v1/namespaces/team-a"), 1);
    // Counted once per failure remembered, not once per admission answered from it.
    let forbidden = metrics
        .fact_errors
        .with_label_values(&["namespace", "forbidden"]);
    assert_eq!(forbidden.get(), 1);
    // Still remembered just before the failure's lifetime (300 ms) ends, asked again after.
    clock.advance(Duration::from_millis(299));
    assert_eq!(
        ns.preferred_arch("team-a").await,
        None,
        "failure still remembered"
    );
    assert_eq!(gets(&api, "/api/v1/namespaces/team-a"), 1);
    clock.advance(Duration::from_millis(1));
    assert_eq!(ns.preferred_arch("team-a").await.as_deref(), Some("arm64"));
    assert_eq!(gets(&api, "/api/v1/namespaces/team-a"), 2);
}

#[tokio::test]
async fn an_api_that_never_answers_costs_one_timeout() {
    // Accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    let metrics = Metrics::register(&prometheus::Registry::new()).unwrap();
    let ns = NamespacePreferences::with_limits(
        client.clone(),
        Duration::from_secs(30),
        Duration::from_secs(30),
        Duration::from_millis(200),
    )
    .with_error_counter(metrics.fact_errors.clone());
    let nodes = NodeGets::with_limits(
        client,
        Duration::from_secs(30),
        Duration::from_secs(30),
        Duration::from_millis(200),
    )
    .with_error_counter(metrics.fact_errors.clone());
    assert_eq!(ns.preferred_arch("team-a").await, None);
    assert_eq!(nodes.node("n1").await, None);
    // The failure is remembered: answered at once, without another timeout.
    let again = tokio::time::timeout(Duration::from_millis(100), async {
        (ns.preferred_arch("team-a").await, nodes.node("n1").await)
    })
    .await;
    assert_eq!(again.ok(), Some((None, None)));
    for fact in ["namespace", "node"] {
        let timeouts = metrics.fact_errors.with_label_values(&[fact, "timeout"]);
        assert_eq!(timeouts.get(), 1, "{fact}");
    }
    held.abort();
}

#[tokio::test]
async fn node_platforms_from_gets() {
    let api = KubeApi::start().await.unwrap();
    api.put_node(node_json("arm-1", "arm64", "linux"));
    let mut windows = node_json("win-1", "amd64", "windows");
    windows["metadata"]["labels"]["node.kubernetes.io/windows-build"] = json!("10.0.20348");
    api.put_node(windows);
    let nodes = NodeGets::new(api.client().unwrap());
    assert_eq!(
        nodes.node("arm-1").await,
        Some(NodeFacts {
            arch: Some("arm64".into()),
            os: Some("linux".into()),
            windows_build: None,
        })
    );
    assert_eq!(
        nodes.node("win-1").await.and_then(|n| n.windows_build),
        Some("10.0.20348".into())
    );
    assert_eq!(
        nodes.node("arm-1").await.unwrap().arch.as_deref(),
        Some("arm64")
    );
    assert_eq!(gets(&api, "/api/v1/nodes/arm-1"), 1, "cached");
    assert_eq!(nodes.node("absent").await, None);
    assert_eq!(nodes.node("../pods").await, None);
    assert_eq!(api.requests().len(), 3);
}

#[tokio::test]
async fn cluster_facts_ask_only_what_is_wanted() {
    let api = KubeApi::start().await.unwrap();
    api.put(
        Resource::Namespaces,
        "",
        namespace_json("team-a", &[(PREFERRED, "arm64")]),
    );
    api.put_node(node_json("arm-1", "arm64", "linux"));
    let client = api.client().unwrap();
    let namespaces_only =
        ClusterFacts::new().with_namespaces(NamespacePreferences::new(client.clone()));
    assert!(!namespaces_only.knows_nodes() && namespaces_only.knows_namespaces());
    let facts = namespaces_only
        .facts(FactRequest {
            namespace: Some("team-a"),
            node_name: Some("arm-1"),
        })
        .await;
    assert_eq!(facts.namespace_preferred_arch.as_deref(), Some("arm64"));
    assert_eq!(facts.node, None, "nodes are not read without their flag");
    assert_eq!(gets(&api, "/api/v1/nodes/arm-1"), 0);

    let both = namespaces_only.with_nodes(Arc::new(NodeGets::new(client)));
    assert!(both.knows_nodes());
    assert!(!ClusterFacts::new()
        .with_nodes(Arc::new(NodeGets::new(api.client().unwrap())))
        .knows_namespaces());
    let facts = both
        .facts(FactRequest {
            namespace: None,
            node_name: Some("arm-1"),
        })
        .await;
    assert_eq!(facts.namespace_preferred_arch, None, "not asked for");
    assert_eq!(facts.node.and_then(|n| n.arch).as_deref(), Some("arm64"));
}

/// Platforms by image; anything else is not found.
struct Platforms(HashMap<String, Vec<Platform>>);

impl PlatformLookup for Platforms {
    fn lookup<'a>(
        &'a self,
        image: &'a str,
        _scope: Option<noe_registry::cache::Scope>,
        _credentials: &'a PodCredentials<'a>,
    ) -> BoxFuture<'a, Result<Arc<[Platform]>, LookupError>> {
        Box::pin(async move {
            self.0
                .get(image)
                .map(|p| Arc::from(p.clone()))
                .ok_or_else(|| LookupError::Registry {
                    kind: noe_core::decide::LookupKind::Registry,
                    message: "not found".into(),
                    registry: "other".into(),
                })
        })
    }
}

fn linux(archs: &[&str]) -> Vec<Platform> {
    archs
        .iter()
        .map(|a| Platform::new("linux", *a, None))
        .collect()
}

fn admission_with(api: &KubeApi, policy: Policy) -> Admission {
    let lookup = Platforms(HashMap::from([
        ("multi:1".to_owned(), linux(&["amd64", "arm64"])),
        ("amd-only:1".to_owned(), linux(&["amd64"])),
    ]));
    let resolve = Resolve::new(
        Arc::new(lookup),
        Arc::new(Anonymous),
        Duration::from_secs(5),
    );
    let metrics = Metrics::register(&prometheus::Registry::new()).unwrap();
    let client = api.client().unwrap();
    let facts = ClusterFacts::new()
        .with_namespaces(NamespacePreferences::new(client.clone()))
        .with_nodes(Arc::new(NodeGets::new(client)));
    Admission::new(resolve, policy, metrics).with_facts(Arc::new(facts))
}

fn review_response(answer: &[u8]) -> Value {
    serde_json::from_slice::<Value>(answer).unwrap()["response"].clone()
}

#[tokio::test]
async fn the_admission_uses_the_namespace_preference_and_the_node() {
    let api = KubeApi::start().await.unwrap();
    api.put(
        Resource::Namespaces,
        "",
        namespace_json("team-a", &[(PREFERRED, "arm64")]),
    );
    api.put_node(node_json("arm-1", "arm64", "linux"));
    let admission = admission_with(&api, Policy::default());

    // The namespace prefers arm64 over the flag's amd64.
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "multi:1"}]}});
    let decision = admission.decider().decision(&pod, "team-a").await;
    let ops = serde_json::to_value(match decision.verdict {
        noe_core::decide::Verdict::Patch { ops, .. } => ops,
        other => panic!("{other:?}"),
    })
    .unwrap();
    let selector = ops
        .as_array()
        .unwrap()
        .iter()
        .find(|op| op["path"] == "/spec/nodeSelector")
        .map(|op| op["value"].clone());
    assert_eq!(
        selector,
        Some(json!({"kubernetes.io/arch": "arm64"})),
        "{ops}"
    );
    // A pod with its own schedulable preference label does not need the namespace.
    api.reset_requests();
    let mut labelled = pod.clone();
    labelled["metadata"]["labels"] = json!({PREFERRED: "amd64"});
    admission.decider().decision(&labelled, "other-ns").await;
    assert_eq!(gets(&api, "/api/v1/namespaces/other-ns"), 0);

    // kubectl debug with an amd64-only image on an arm64 node: warned, allowed.
    let bound = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a"},
        "spec": {"nodeName": "arm-1", "containers": [{"name": "c", "image": "multi:1"}]}});
    let mut debugged = bound.clone();
    debugged["spec"]["ephemeralContainers"] = json!([{"name": "debugger", "image": "amd-only:1"}]);
    let review = ephemeral_review("admission.k8s.io/v1", "team-a", "u1", &debugged, &bound);
    let response = review_response(
        &admission
            .review(&serde_json::to_vec(&review).unwrap())
            .await,
    );
    assert_eq!(response["allowed"], true, "{response}");
    let warnings = response["warnings"].to_string();
    assert!(
        warnings.contains(
            "debug image amd-only:1 [linux/amd64] cannot run on the pod's node (linux/arm64)"
        ),
        "{warnings}"
    );
    // A debug image that runs there: no warning.
    debugged["spec"]["ephemeralContainers"] = json!([{"name": "debugger", "image": "multi:1"}]);
    let review = ephemeral_review("admission.k8s.io/v1", "team-a", "u2", &debugged, &bound);
    let response = review_response(
        &admission
            .review(&serde_json::to_vec(&review).unwrap())
            .await,
    );
    assert_eq!(response, json!({"uid": "u2", "allowed": true}));

    // --on-contradiction=deny: denied, in the version asked.
    let deny = admission_with(
        &api,
        Policy {
            on_contradiction: OnContradiction::Deny,
            ..Policy::default()
        },
    );
    debugged["spec"]["ephemeralContainers"] = json!([{"name": "debugger", "image": "amd-only:1"}]);
    let review = ephemeral_review(
        "admission.k8s.io/v1beta1",
        "team-a",
        "u3",
        &debugged,
        &bound,
    );
    let answer: Value =
        serde_json::from_slice(&deny.review(&serde_json::to_vec(&review).unwrap()).await).unwrap();
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    assert_eq!(answer["response"]["status"]["code"], 403);
    // An earlier debug container is not checked again when another is added.
    let mut before = debugged.clone();
    before["spec"]["ephemeralContainers"] = json!([{"name": "debugger", "image": "amd-only:1"}]);
    let mut after = before.clone();
    after["spec"]["ephemeralContainers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "second", "image": "multi:1"}));
    let review = ephemeral_review("admission.k8s.io/v1", "team-a", "u4", &after, &before);
    let response = review_response(&deny.review(&serde_json::to_vec(&review).unwrap()).await);
    assert_eq!(response["allowed"], true, "{response}");
}
