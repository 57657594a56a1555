//! The lookup modes as a user runs them: the server in-process with `--lookup-mode=gate` or
//! `hybrid` and a kubeconfig pointing at the scripted API server (which validates the release
//! as the apiserver does), image platforms from the real registry, behind a proxy that adds a
//! 2 s round trip where the test needs a slow registry.
//!
//! Waits are bounded polls for a condition; nothing asserts on time.

use std::process::ExitCode;
use std::time::Duration;

use noe::cli::{Args, Run};
use noe_test_support::{
    gated_pod_json, namespace_json, node_json, DelayProxy, KubeApi, Resource, NOE_GATE,
};
use serde_json::{json, Value};

use super::harness::{self, patch_of, pod, Harness, Server};

const TERMS: &str =
    "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms";

pub(super) async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..1500 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

/// What every test here starts with: the real registry and its fixtures, the scripted API, a
/// scratch directory (the kubeconfig).
pub(super) struct Setup {
    pub h: Harness,
    pub api: KubeApi,
    pub dir: tempfile::TempDir,
}

impl Setup {
    pub async fn start() -> Self {
        Self {
            h: Harness::start().await,
            api: KubeApi::start().await.unwrap(),
            dir: tempfile::tempdir().unwrap(),
        }
    }
}

/// The registry 2 s away (a delaying proxy, kept while the test runs): the proxy, the fixtures'
/// multi-arch image through it, and the `--insecure-registries` flag naming both hosts.
async fn slow_registry(h: &Harness) -> (DelayProxy, String, String) {
    let proxy = DelayProxy::start(h.registry.addr(), Duration::from_secs(2))
        .await
        .unwrap();
    let image = h
        .fixtures
        .oci_index
        .reference()
        .replace(&h.registry.host(), &proxy.host());
    let insecure = format!(
        "--insecure-registries={},{}",
        h.registry.host(),
        proxy.host()
    );
    (proxy, image, insecure)
}

pub(super) async fn server(
    h: &Harness,
    api: &KubeApi,
    dir: &std::path::Path,
    extra: &[&str],
) -> Server {
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, api.kubeconfig_yaml()).unwrap();
    let mut argv = h.base_flags();
    argv.retain(|flag| {
        !flag.starts_with("--kubeconfig") && !flag.starts_with("--insecure-registries")
    });
    argv.push(format!("--kubeconfig={}", kubeconfig.display()));
    argv.extend(extra.iter().map(|flag| (*flag).to_owned()));
    let running = harness::start_server(argv).await;
    let url = format!("https://localhost:{}/mutate", running.webhook_addr.port());
    Server {
        running,
        url,
        client: h.client.clone(),
    }
}

/// The pod as the apiserver stores it after our admission: the patch applied, `Pending`.
pub(super) fn stored(name: &str, pod: &Value, response: &Value) -> Value {
    let (mut stored, _) = harness::apply(pod, response);
    stored["metadata"]["name"] = json!(name);
    stored["metadata"]["namespace"] = json!("shop");
    stored["status"] = json!({"phase": "Pending"});
    stored
}

pub(super) fn gates(api: &KubeApi, name: &str) -> Value {
    api.get(Resource::Pods, "shop", name).unwrap()["spec"]["schedulingGates"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_mode_answers_at_once_and_the_controller_releases_the_pod() {
    let Setup { h, api, dir } = Setup::start().await;
    // A registry 2 s away: admission does not wait for it.
    let (_proxy, image, insecure) = slow_registry(&h).await;
    let s = server(&h, &api, dir.path(), &["--lookup-mode=gate", &insecure]).await;
    // The user's own required term, with matchFields: the release appends to it.
    let mut created = pod(&[&image]);
    created["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}]}]}}});
    let response = s.review(&created).await;
    assert_eq!(response["allowed"], true);
    let ops = patch_of(&response);
    assert_eq!(
        ops,
        vec![
            json!({"op": "add", "path": "/spec/schedulingGates", "value": [{"name": NOE_GATE}]}),
            json!({"op": "add", "path": "/metadata/labels/arch.noe.adevinta.com~1lookup", "value": "gated"}),
        ],
        "only the gate and the label: admission did not wait for the registry"
    );
    api.put_pod(stored("web", &created, &response));
    eventually("released", || gates(&api, "web") == json!([])).await;
    let web = api.get(Resource::Pods, "shop", "web").unwrap();
    let terms = web.pointer(TERMS).unwrap().as_array().unwrap().clone();
    assert_eq!(terms.len(), 1, "no term added: {terms:?}");
    assert_eq!(terms[0]["matchFields"][0]["key"], "metadata.name");
    // As inline: the arch pinned by nodeSelector (the default preference), or ANDed into the
    // user's term.
    let pinned = web["spec"]["nodeSelector"]["kubernetes.io/arch"].is_string();
    let in_term = terms[0]["matchExpressions"][0]["key"] == "kubernetes.io/arch";
    assert!(pinned || in_term, "arch constrained: {web}");
    assert!(web["metadata"]["annotations"]["arch.noe.adevinta.com/platforms"].is_string());
    assert_eq!(
        web["metadata"]["labels"]["arch.noe.adevinta.com/lookup"],
        "released"
    );
    let patches: Vec<_> = api
        .writes()
        .into_iter()
        .filter(|w| w.method == "PATCH" && w.path.ends_with("/pods/web"))
        .collect();
    assert_eq!(patches.len(), 1, "one release write");
    // Counted once the write's answer is back, which may be just after the test sees it.
    let mut metrics = String::new();
    for _ in 0..250 {
        metrics = s.metrics().await;
        if metrics.contains("noe_gate_releases_total{outcome=\"constrained\"} 1") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        metrics.contains("noe_gate_releases_total{outcome=\"constrained\"} 1"),
        "{metrics}"
    );
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_decides_warm_pods_inline_and_gates_cold_ones() {
    let Setup { h, api, dir } = Setup::start().await;
    let (_proxy, image, insecure) = slow_registry(&h).await;
    let s = server(&h, &api, dir.path(), &["--lookup-mode=hybrid", &insecure]).await;
    // Cold: gated, the lookups go on in the background.
    let cold = s.review(&pod(&[&image])).await;
    let ops = patch_of(&cold);
    assert!(
        ops.iter().any(|op| op["path"] == "/spec/schedulingGates"),
        "cold: gated {ops:?}"
    );
    // Warm (after the background lookup): decided inline, no gate, no API write.
    let writes = api.writes().len();
    let mut warm = Vec::new();
    for _ in 0..100 {
        warm = patch_of(&s.review(&pod(&[&image])).await);
        if !warm.iter().any(|op| op["path"] == "/spec/schedulingGates") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        warm.iter().any(|op| op["path"] == "/spec/nodeSelector"
            || op["path"].as_str().unwrap_or_default().contains("affinity")),
        "warm: the arch constraint inline {warm:?}"
    );
    assert!(!warm.iter().any(|op| op["path"] == "/spec/schedulingGates"));
    assert_eq!(api.writes().len(), writes, "no API write for a warm pod");
    s.running.shutdown().await;
}

/// Whether the admission gated the pod (its patch adds our gate).
fn is_gated(response: &Value) -> bool {
    patch_of(response).iter().any(|op| {
        op["path"] == "/spec/schedulingGates"
            || op["path"] == "/spec/schedulingGates/-" && op["value"]["name"] == NOE_GATE
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_pods_the_gate_selectors_select_are_gated() {
    let Setup { h, api, dir } = Setup::start().await;
    api.put(
        Resource::Namespaces,
        "",
        namespace_json("team-a", &[("example.com/gate", "on")]),
    );
    api.put(
        Resource::Namespaces,
        "",
        namespace_json("bank", &[("example.com/gate", "off")]),
    );
    let s = server(
        &h,
        &api,
        dir.path(),
        &[
            "--lookup-mode=gate",
            &format!("--insecure-registries={}", h.registry.host()),
            &format!(
                "--allow-registry-cidrs={}",
                noe_test_support::LOOPBACK_CIDRS
            ),
            "--gate-namespace-selector=example.com/gate in (on)",
            "--gate-object-selector=app=demo,!example.com/no-gate",
        ],
    )
    .await;
    let image = h.fixtures.oci_index.reference();
    // Selected by both: gated.
    assert!(is_gated(&s.review(&pod(&[&image])).await));
    // Outside the object selector: decided inline (the arch constraint, no gate).
    for labels in [
        json!({"app": "other"}),
        json!({"app": "demo", "example.com/no-gate": ""}),
    ] {
        let mut other = pod(&[&image]);
        other["metadata"]["labels"] = labels.clone();
        let response = s.review(&other).await;
        assert!(!is_gated(&response), "{labels}: {response}");
        assert!(!patch_of(&response).is_empty(), "{labels}: decided inline");
    }
    // Outside the namespace selector, and a namespace that does not exist (no labels): inline.
    for namespace in ["bank", "nowhere"] {
        let review = noe_test_support::admission_review(
            "admission.k8s.io/v1",
            "CREATE",
            namespace,
            "uid-ns",
            &pod(&[&image]),
        );
        let (status, answer) = s.post(serde_json::to_vec(&review).unwrap()).await;
        assert_eq!(status, 200);
        let response = &answer["response"];
        assert!(!is_gated(response), "{namespace}: {response}");
        assert!(
            !patch_of(response).is_empty(),
            "{namespace}: decided inline"
        );
    }
    // Each namespace read once (cached).
    let gets = api
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == "/api/v1/namespaces/team-a")
        .count();
    assert_eq!(gets, 1, "the namespace read once");
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_pod_is_decided_with_the_facts_inline_admission_reads() {
    let Setup { h, api, dir } = Setup::start().await;
    // The namespace prefers arm64 (the flag's default is amd64): inline admission reads it.
    api.put(
        Resource::Namespaces,
        "",
        namespace_json("shop", &[("arch.noe.adevinta.com/preferred", "arm64")]),
    );
    let s = server(
        &h,
        &api,
        dir.path(),
        &[
            "--lookup-mode=gate",
            "--namespace-preference=true",
            &format!("--insecure-registries={}", h.registry.host()),
            &format!(
                "--allow-registry-cidrs={}",
                noe_test_support::LOOPBACK_CIDRS
            ),
        ],
    )
    .await;
    let f = &h.fixtures;
    let created = pod(&[&f.oci_index.reference(), &f.docker_list.reference()]);
    let response = s.review(&created).await;
    assert!(is_gated(&response), "{response}");
    api.put_pod(stored("multi", &created, &response));
    eventually("released", || gates(&api, "multi") == json!([])).await;
    let multi = api.get(Resource::Pods, "shop", "multi").unwrap();
    assert_eq!(
        multi["spec"]["nodeSelector"]["kubernetes.io/arch"], "arm64",
        "the namespace's preference, as inline: {multi}"
    );
    s.running.shutdown().await;
}

/// Runs `noe ungate -n shop` in-process against the scripted API with the harness's registry
/// flags plus `extra`; its exit code.
async fn ungate(h: &Harness, api: &KubeApi, dir: &std::path::Path, extra: &[&str]) -> ExitCode {
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, api.kubeconfig_yaml()).unwrap();
    let mut argv: Vec<String> = vec!["noe".into(), "ungate".into(), "-n".into(), "shop".into()];
    argv.extend(h.base_flags().into_iter().filter(|flag| {
        [
            "--insecure-registries",
            "--allow-registry-cidrs",
            "--docker-config-path",
            "--containerd-config-path",
        ]
        .iter()
        .any(|name| flag.starts_with(name))
    }));
    argv.push(format!("--kubeconfig={}", kubeconfig.display()));
    argv.extend(extra.iter().map(|flag| (*flag).to_owned()));
    let args = Args::try_parse_normalized(argv.into_iter().map(Into::into)).unwrap();
    let Run::Ungate(config) = args.to_run().unwrap() else {
        panic!("not an ungate command line")
    };
    noe::cli::commands::ungate::run(config).await
}

/// The arch constraints the release wrote (nodeSelector and required terms), as text.
fn constraints(api: &KubeApi, name: &str) -> String {
    let pod = api.get(Resource::Pods, "shop", name).unwrap();
    assert_eq!(pod["spec"]["schedulingGates"], json!([]), "released: {pod}");
    format!(
        "{} {}",
        pod["spec"]["nodeSelector"],
        pod.pointer(TERMS).cloned().unwrap_or_default()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ungate_decides_with_the_namespace_preference_the_server_reads() {
    let Setup { h, api, dir } = Setup::start().await;
    // The namespace prefers arm64 (the flag's default is amd64); both images run on both.
    api.put(
        Resource::Namespaces,
        "",
        namespace_json("shop", &[("arch.noe.adevinta.com/preferred", "arm64")]),
    );
    let f = &h.fixtures;
    let images = [f.oci_index.reference(), f.docker_list.reference()];
    let images: Vec<&str> = images.iter().map(String::as_str).collect();
    api.put_pod(gated_pod_json("shop", "multi", &images));
    let code = ungate(&h, &api, dir.path(), &["--namespace-preference=true"]).await;
    assert_eq!(code, ExitCode::SUCCESS);
    let multi = api.get(Resource::Pods, "shop", "multi").unwrap();
    assert_eq!(
        multi["spec"]["nodeSelector"]["kubernetes.io/arch"], "arm64",
        "the namespace's preference, as inline: {multi}"
    );
    let gets = api
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == "/api/v1/namespaces/shop")
        .count();
    assert_eq!(gets, 1, "the namespace read once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ungate_decides_with_the_architectures_of_the_cluster_s_nodes() {
    let Setup { h, api, dir } = Setup::start().await;
    // Only arm64 nodes: with `--cluster-schedulable-archs=auto` amd64 is not schedulable.
    for name in ["n1", "n2"] {
        api.put(Resource::Nodes, "", node_json(name, "arm64", "linux"));
    }
    let f = &h.fixtures;
    let images = [f.oci_index.reference(), f.docker_list.reference()];
    let images: Vec<&str> = images.iter().map(String::as_str).collect();
    api.put_pod(gated_pod_json("shop", "multi", &images));
    let code = ungate(
        &h,
        &api,
        dir.path(),
        &["--watch-nodes=true", "--cluster-schedulable-archs=auto"],
    )
    .await;
    assert_eq!(code, ExitCode::SUCCESS);
    let written = constraints(&api, "multi");
    assert!(
        written.contains("arm64") && !written.contains("amd64"),
        "the nodes' architectures only: {written}"
    );
}

/// With `--credential-provider-sa-tokens`, a gated pod is looked up as its own ServiceAccount,
/// as inline admission does: the plugin gets that account's token (the scripted API's
/// TokenRequest) and its credential opens a real htpasswd registry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_pod_is_looked_up_as_its_service_account() {
    let Setup { h, api, dir } = Setup::start().await;
    let (private, fixtures) =
        super::inspect_account::private_registry(dir.path(), &api, "shop", "app").await;
    let image = fixtures.oci_index.reference();
    let [bin_dir, config] = super::inspect_account::plugin_flags(dir.path());
    let flags = [
        "--lookup-mode=gate".to_owned(),
        "--credential-provider-sa-tokens".to_owned(),
        format!(
            "--insecure-registries={},{}",
            h.registry.host(),
            private.host()
        ),
        format!(
            "--allow-registry-cidrs={}",
            noe_test_support::LOOPBACK_CIDRS
        ),
        bin_dir,
        config,
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let s = server(&h, &api, dir.path(), &flags).await;
    let mut created = pod(&[&image]);
    created["spec"]["serviceAccountName"] = json!("app");
    let response = s.review(&created).await;
    assert!(is_gated(&response), "{response}");
    api.put_pod(stored("web", &created, &response));
    eventually("released", || gates(&api, "web") == json!([])).await;
    let web = api.get(Resource::Pods, "shop", "web").unwrap();
    assert!(
        web["metadata"]["annotations"]["arch.noe.adevinta.com/platforms"].is_string(),
        "looked up with the account's credential: {web}"
    );
    let tokens = api
        .requests()
        .iter()
        .filter(|r| {
            r.method == "POST"
                && r.path
                    .ends_with("/namespaces/shop/serviceaccounts/app/token")
        })
        .count();
    assert!(tokens >= 1, "a TokenRequest for shop/app");
    s.running.shutdown().await;
}
