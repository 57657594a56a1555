//! End to end with the Kubernetes API: the real `noe` server started from a command line with
//! `--kubeconfig` pointing at the scripted API server (`noe_test_support::KubeApi`), images in
//! the real registry. `--namespace-preference` reads the namespace's preferred arch;
//! `--check-ephemeral-containers` checks debug containers against their node.

use serde_json::{json, Value};

use super::harness::{self, apply, patch_of, pod, selector_arch, Harness, Server};
use noe_test_support::{ephemeral_review, namespace_json, node_json, Fault, KubeApi, Resource};

const PREFERRED: &str = "arch.noe.adevinta.com/preferred";

/// A server with the base flags, `--kubeconfig` for `api`, and `extra`.
async fn server(h: &Harness, api: &KubeApi, extra: &[&str]) -> Server {
    let kubeconfig = h.cert_dir.path().join("kubeconfig.yaml");
    std::fs::write(&kubeconfig, api.kubeconfig_yaml()).unwrap();
    let mut argv: Vec<String> = h
        .base_flags()
        .into_iter()
        .filter(|flag| !flag.starts_with("--kubeconfig"))
        .collect();
    argv.push(format!("--kubeconfig={}", kubeconfig.display()));
    argv.extend(extra.iter().map(|s| (*s).to_owned()));
    let running = harness::start_server(argv).await;
    let url = format!("https://localhost:{}/mutate", running.webhook_addr.port());
    Server {
        running,
        url,
        client: h.client.clone(),
    }
}

/// Posts a `pods/ephemeralcontainers` UPDATE adding `debug` to `bound`; returns `response`.
async fn debug(server: &Server, bound: &Value, debug: &[&str], uid: &str) -> Value {
    let mut object = bound.clone();
    object["spec"]["ephemeralContainers"] = debug
        .iter()
        .enumerate()
        .map(|(i, image)| json!({"name": format!("debugger-{i}"), "image": image}))
        .collect();
    let review = ephemeral_review("admission.k8s.io/v1", "team-a", uid, &object, bound);
    let (status, answer) = server.post(serde_json::to_vec(&review).unwrap()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["response"]["uid"], uid);
    answer["response"].clone()
}

fn bound_pod(images: &[&str], node: &str) -> Value {
    let mut bound = pod(images);
    bound["metadata"]["name"] = json!("web-1");
    bound["metadata"]["namespace"] = json!("team-a");
    bound["spec"]["nodeName"] = json!(node);
    bound
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_preference_and_debug_containers() {
    let h = Harness::start().await;
    let f = &h.fixtures;
    let api = KubeApi::start().await.unwrap();
    api.put(
        Resource::Namespaces,
        "",
        namespace_json("team-a", &[(PREFERRED, "arm64")]),
    );
    api.put_node(node_json("arm-1", "arm64", "linux"));
    let multi = pod(&[&f.oci_index.reference(), &f.docker_list.reference()]);
    let s390x = f.docker_single.reference();

    // Off (the default): the flag's amd64, no namespace read, debug containers not checked.
    let off = server(&h, &api, &[]).await;
    let (_, typed) = apply(&multi, &off.review(&multi).await);
    assert_eq!(selector_arch(&typed).as_deref(), Some("amd64"));
    let bound = bound_pod(&[&f.oci_index.reference()], "arm-1");
    let response = debug(&off, &bound, &[&s390x], "off-1").await;
    assert_eq!(response, json!({"uid": "off-1", "allowed": true}));
    assert!(
        api.requests()
            .iter()
            .all(|r| !r.path.starts_with("/api/v1/namespaces/team-a")
                && !r.path.starts_with("/api/v1/nodes")),
        "{:?}",
        api.requests()
    );
    off.running.shutdown().await;

    // On: the namespace's arm64 wins over the flag; the debug image is checked on the node.
    let on = server(
        &h,
        &api,
        &[
            "--namespace-preference",
            "--check-ephemeral-containers=true",
        ],
    )
    .await;
    let (_, typed) = apply(&multi, &on.review(&multi).await);
    assert_eq!(selector_arch(&typed).as_deref(), Some("arm64"));
    let response = debug(&on, &bound, &[&s390x], "on-1").await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(
        response["warnings"]
            .to_string()
            .contains("cannot run on the pod's node (linux/arm64)"),
        "{response}"
    );
    assert!(patch_of(&response).is_empty());
    let response = debug(&on, &bound, &[&f.oci_single.reference()], "on-2").await;
    assert_eq!(response, json!({"uid": "on-2", "allowed": true}));
    // A node the API refuses to show: the debug container is not checked, and the failure is
    // counted by fact and reason.
    api.fault(Fault::new("GET", "/api/v1/nodes/hidden-1", 403));
    let hidden = bound_pod(&[&f.oci_index.reference()], "hidden-1");
    let response = debug(&on, &hidden, &[&s390x], "on-3").await;
    assert_eq!(response, json!({"uid": "on-3", "allowed": true}));
    let metrics = on.metrics().await;
    assert!(
        metrics.contains("noe_hook_fact_errors_total{fact=\"node\",reason=\"forbidden\"} 1"),
        "{metrics}"
    );
    on.running.shutdown().await;

    // --on-contradiction=deny denies the debug container; audit mode only says it would.
    let deny = server(
        &h,
        &api,
        &["--check-ephemeral-containers", "--on-contradiction=deny"],
    )
    .await;
    let response = debug(&deny, &bound, &[&s390x], "deny-1").await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["code"], 403);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.contains(&s390x) && message.contains("s390x"),
        "{message}"
    );
    let metrics = deny.metrics().await;
    assert!(
        metrics.contains("noe_webhook_request_duration_seconds_count{outcome=\"denied\"} 1"),
        "{metrics}"
    );
    deny.running.shutdown().await;
    let audit = server(
        &h,
        &api,
        &[
            "--check-ephemeral-containers",
            "--on-contradiction=deny",
            "--mode=audit",
        ],
    )
    .await;
    let response = debug(&audit, &bound, &[&s390x], "audit-1").await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(
        response["warnings"]
            .to_string()
            .contains("audit: would deny"),
        "{response}"
    );
    audit.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn facts_without_api_access_refuse_to_start() {
    let h = Harness::start().await;
    let mut argv = h.base_flags();
    argv.push("--namespace-preference".into());
    let args = noe::cli::Args::try_parse_normalized(argv.into_iter().map(Into::into)).unwrap();
    let noe::cli::Run::Serve(config) = args.to_run().unwrap() else {
        panic!("not a server command line")
    };
    let error = noe::serve::start(config).await.err().unwrap();
    assert!(
        error.to_string().contains("need Kubernetes API access"),
        "{error:#}"
    );
}
