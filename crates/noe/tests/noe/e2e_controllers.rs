//! The controllers as a user runs them, end to end: the real `noe` binary (and its server
//! in-process) pointed through a kubeconfig at the scripted API server (`KubeApi`, kube's real
//! client on loopback), with image platforms from the real registry.
//!
//! - `noe --kubeconfig ... --watch-nodes --remediate=report --leader-elect`: the Lease is taken
//!   under the pod's name, a wrong-arch pod gets its Event, the metrics say so, and SIGTERM
//!   releases the Lease and exits 0;
//! - the server with `--taint-arches` and `--cluster-schedulable-archs=auto,arm64`: nodes of the
//!   arch get the taint, admitted pods its toleration, and the schedulable archs follow the
//!   nodes (a pod whose arch lost its last node is warned, not denied);
//! - `noe untaint` removes our taints and nothing else.
//!
//! Waits are bounded polls for a condition; nothing asserts on time.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use noe_test_support::{node_json, KubeApi, PodFixture, RecordedRequest, Resource};
use serde_json::{json, Value};

use super::harness::{self, free_port, patch_of, pod, run_noe, write_kubeconfig, Harness};

const TAINT_KEY: &str = "arch.noe.adevinta.com/arch";

/// Polls `condition` every 20 ms for at most 30 s; `what` and `context()` explain a timeout.
async fn eventually(what: &str, context: impl Fn() -> String, mut condition: impl FnMut() -> bool) {
    for _ in 0..1500 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}\n{}", context());
}

fn writes_to(api: &KubeApi, path: &str) -> Vec<RecordedRequest> {
    api.writes()
        .into_iter()
        .filter(|write| write.path.contains(path))
        .collect()
}

fn taints(api: &KubeApi, node: &str) -> Vec<Value> {
    api.get(Resource::Nodes, "", node)
        .and_then(|node| node["spec"]["taints"].as_array().cloned())
        .unwrap_or_default()
}

fn with_taints(mut node: Value, taints: Value) -> Value {
    node["spec"]["taints"] = taints;
    node
}

/// The `noe` process, killed on drop; its stderr goes to a file shown when a wait times out.
struct Noe {
    child: Child,
    log: PathBuf,
    metrics: u16,
}

impl Drop for Noe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Noe {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn metrics(&self) -> String {
        match reqwest::get(format!("http://127.0.0.1:{}/metrics", self.metrics)).await {
            Ok(response) => response.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// The value of the sample named exactly `sample` (with its labels), if exposed.
    async fn metric(&self, sample: &str) -> Option<f64> {
        self.metrics().await.lines().find_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            (name == sample).then(|| value.parse().ok()).flatten()
        })
    }
}

/// `noe --kubeconfig ... --watch-nodes --remediate=report --leader-elect`, as in a pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_runs_report_mode_with_leader_election() {
    let h = Harness::start().await;
    let api = KubeApi::start().await.unwrap();
    api.put_node(node_json("amd-1", "amd64", "linux"));
    api.put_node(node_json("arm-1", "arm64", "linux"));
    // oci_single is linux/arm64 only: on an amd64 node it cannot run.
    let wrong = h.fixtures.oci_single.reference();
    let right = h.fixtures.oci_index.reference();
    api.put_pod(PodFixture::new("shop", "wrong", "amd-1", &[&wrong]).json());
    api.put_pod(PodFixture::new("shop", "right", "amd-1", &[&right]).json());

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(&api, dir.path());
    let log = dir.path().join("noe.log");
    let (webhook, metrics, health) = (free_port(), free_port(), free_port());
    let mut argv = h.base_flags();
    argv.retain(|flag| !flag.starts_with("--kubeconfig") && !flag.ends_with(":0"));
    argv.remove(0);
    argv.extend([
        format!("--webhook-addr=127.0.0.1:{webhook}"),
        format!("--metrics-addr=127.0.0.1:{metrics}"),
        format!("--health-probe-addr=127.0.0.1:{health}"),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--watch-nodes".into(),
        "--remediate=report".into(),
        "--leader-elect".into(),
        "--shutdown-delay=0s".into(),
        "--log-format=text".into(),
    ]);
    let noe = Noe {
        child: Command::new(env!("CARGO_BIN_EXE_noe"))
            .args(&argv)
            .env("POD_NAME", "noe-5d8f-abcde")
            .env("POD_NAMESPACE", "noe-system")
            .env("NOE_LOG_LEVEL", "info")
            .env_remove("RUST_LOG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
        log,
        metrics,
    };

    // The Lease, in the pod's namespace, held under the pod's name.
    let lease = || api.get(Resource::Leases, "noe-system", "noe");
    eventually("the Lease", || noe.log(), || lease().is_some()).await;
    let held = lease().unwrap();
    assert_eq!(held["spec"]["holderIdentity"], "noe-5d8f-abcde");
    assert_eq!(held["spec"]["leaseDurationSeconds"], 15);

    // The misplaced pod's Event, and only its.
    let events = "/apis/events.k8s.io/v1/namespaces/shop/events";
    eventually(
        "an Event on the wrong-arch pod",
        || noe.log(),
        || !writes_to(&api, events).is_empty(),
    )
    .await;
    let event = &writes_to(&api, events)[0];
    assert_eq!(event.body["regarding"]["name"], "wrong");
    assert_eq!(event.body["reason"], "UnsupportedPlatform");
    assert_eq!(event.body["type"], "Warning");
    assert_eq!(event.body["reportingInstance"], "noe-5d8f-abcde");
    assert_eq!(
        event.body["note"],
        format!("node amd-1 is linux/amd64; images that cannot run there: {wrong} [linux/arm64]")
    );
    let mut checked = None;
    for _ in 0..500 {
        checked = noe
            .metric(r#"noe_controller_pods_checked_total{result="fits"}"#)
            .await;
        if checked == Some(1.0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(checked, Some(1.0), "{}", noe.log());
    assert_eq!(noe.metric("noe_controller_leader").await, Some(1.0));
    assert_eq!(noe.metric("noe_controller_nodes").await, Some(2.0));
    assert_eq!(
        noe.metric(r#"noe_controller_pods_misplaced_total{namespace="shop"}"#)
            .await,
        Some(1.0)
    );
    assert!(
        writes_to(&api, "/eviction").is_empty(),
        "report mode never evicts"
    );
    assert_eq!(writes_to(&api, events).len(), 1);

    // SIGTERM: the Lease is released (no holder) and the process exits 0.
    let mut noe = noe;
    let killed = Command::new("kill")
        .args(["-TERM", &noe.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = noe.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "noe did not exit: {}",
            noe.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "{status:?}: {}", noe.log());
    let released = lease().unwrap();
    assert!(
        released["spec"]["holderIdentity"]
            .as_str()
            .is_none_or(str::is_empty),
        "{released}"
    );
}

/// The server in-process with `--taint-arches=arm64` and `--cluster-schedulable-archs=auto,arm64`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taints_are_tolerated_and_schedulable_archs_follow_the_nodes() {
    let h = Harness::start().await;
    let api = KubeApi::start().await.unwrap();
    api.put_node(node_json("amd-1", "amd64", "linux"));
    let gpu = json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]);
    api.put_node(with_taints(node_json("arm-1", "arm64", "linux"), gpu));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(&api, dir.path());
    let mut argv = h.base_flags();
    argv.retain(|flag| !flag.starts_with("--kubeconfig"));
    argv.extend([
        format!("--kubeconfig={}", kubeconfig.display()),
        "--watch-nodes".into(),
        "--taint-arches=arm64".into(),
        "--cluster-schedulable-archs=auto,arm64".into(),
        "--preferred-arch=".into(),
    ]);
    let running = harness::start_server(argv).await;
    let server = harness::Server {
        url: format!("https://localhost:{}/mutate", running.webhook_addr.port()),
        running,
        client: h.client.clone(),
    };
    let view = server.running.node_view().expect("a node view");
    tokio::time::timeout(Duration::from_secs(30), view.ready())
        .await
        .expect("the nodes listed");

    // The arm64 node gets our taint beside its own; the amd64 node none.
    eventually(
        "the arm64 node tainted",
        || format!("{:?}", taints(&api, "arm-1")),
        || taints(&api, "arm-1").len() == 2,
    )
    .await;
    assert_eq!(
        taints(&api, "arm-1"),
        [
            json!({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}),
            json!({"key": TAINT_KEY, "value": "arm64", "effect": "NoSchedule"}),
        ]
    );
    assert!(taints(&api, "amd-1").is_empty());

    // A multi-arch image: constrained to the nodes' archs (arm/v7 has no node and is not
    // listed), tolerating the arm64 taint.
    let f = &h.fixtures;
    let response = server.review(&pod(&[&f.oci_index.reference()])).await;
    assert_eq!(response["allowed"], true, "{response}");
    let patch = patch_of(&response);
    let op = |path: &str| patch.iter().find(|op| op["path"] == path).cloned();
    assert_eq!(
        op("/spec/affinity").unwrap()["value"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
            ["matchExpressions"][0]["values"],
        json!(["amd64", "arm64"])
    );
    assert_eq!(
        op("/spec/tolerations").unwrap()["value"],
        json!([{"key": TAINT_KEY, "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}])
    );
    assert!(response["warnings"].is_null(), "{response}");

    // An image of no schedulable arch is denied, naming them.
    let response = server.review(&pod(&[&f.docker_single.reference()])).await;
    assert_eq!(response["allowed"], false);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.ends_with("(schedulable: amd64, arm64)"),
        "{message}"
    );

    // The last arm64 node goes (an autoscaler scaled the pool to zero): arm64 stays
    // schedulable (listed after auto), and an arm64-only pod is warned, not denied.
    assert!(api.delete(Resource::Nodes, "", "arm-1"));
    eventually(
        "the node view without arm64",
        || format!("{:?}", view.archs()),
        || view.archs().is_some_and(|archs| !archs.contains("arm64")),
    )
    .await;
    let response = server.review(&pod(&[&f.oci_single.reference()])).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(
        response["warnings"],
        json!(["no node of the cluster has the architecture this pod may run on (arm64): it stays pending until one joins"])
    );
    let metrics = server.metrics().await;
    assert!(
        metrics.contains("noe_controller_node_taint_writes_total{result=\"applied\"} 1"),
        "{metrics}"
    );
    server.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untaint_removes_our_taints_and_nothing_else() {
    let api = KubeApi::start().await.unwrap();
    let ours = json!({"key": TAINT_KEY, "value": "arm64", "effect": "NoSchedule"});
    let other = json!({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"});
    let execute = json!({"key": TAINT_KEY, "value": "arm64", "effect": "NoExecute"});
    api.put_node(with_taints(
        node_json("arm-1", "arm64", "linux"),
        json!([other.clone(), ours.clone()]),
    ));
    api.put_node(with_taints(
        node_json("arm-2", "arm64", "linux"),
        json!([ours.clone()]),
    ));
    api.put_node(with_taints(
        node_json("arm-3", "arm64", "linux"),
        json!([execute.clone()]),
    ));
    api.put_node(node_json("amd-1", "amd64", "linux"));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(&api, dir.path());
    let args = [
        "untaint".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
    ];

    let (code, stdout, stderr) = run_noe(&args).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "node/arm-1: removed arch.noe.adevinta.com/arch:NoSchedule",
            "node/arm-2: removed arch.noe.adevinta.com/arch:NoSchedule",
        ]
    );
    assert_eq!(taints(&api, "arm-1"), [other]);
    assert!(taints(&api, "arm-2").is_empty());
    assert_eq!(
        taints(&api, "arm-3"),
        [execute],
        "another effect is not ours"
    );
    let patched: Vec<String> = api
        .writes()
        .iter()
        .map(|w| format!("{} {}", w.method, w.path))
        .collect();
    assert_eq!(
        patched,
        ["PATCH /api/v1/nodes/arm-1", "PATCH /api/v1/nodes/arm-2"]
    );

    // Again: nothing left to do.
    let (code, stdout, _) = run_noe(&args).await;
    assert_eq!((code, stdout.as_str()), (0, ""));

    // The API failing: exit 1, one line saying what failed (the client also logs the
    // status). No API access at all: exit 2.
    api.fault(noe_test_support::Fault::new("GET", "/api/v1/nodes", 500).times(20));
    let (code, _, stderr) = run_noe(&args).await;
    assert_eq!(code, 1, "{stderr}");
    let reasons: Vec<&str> = stderr.lines().filter(|l| l.starts_with("noe: ")).collect();
    assert_eq!(reasons.len(), 1, "{stderr}");
    assert!(
        reasons[0].starts_with("noe: listing nodes failed"),
        "{stderr}"
    );
    let missing = dir.path().join("missing");
    let (code, _, stderr) = run_noe(&[
        "untaint".to_owned(),
        format!("--kubeconfig={}", missing.display()),
    ])
    .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("cannot read the kubeconfig"), "{stderr}");
}

/// Remediation looks a pod's images up as the pod's own ServiceAccount, as admission does: with
/// `--credential-provider-sa-tokens`, a credential provider plugin with `tokenAttributes` gets
/// that account's token (the scripted API's TokenRequest) and its credential opens a real
/// htpasswd registry. Without the account the image's platforms stay unknown and the misplaced
/// pod is never reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remediation_looks_a_pod_up_as_its_service_account() {
    let h = Harness::start().await;
    let api = KubeApi::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    // linux/arm64 only, behind the plugin's credential: misplaced on an amd64 node.
    let (private, fixtures) =
        super::inspect_account::private_registry(dir.path(), &api, "shop", "app").await;
    let image = fixtures.oci_single.reference();
    api.put_node(node_json("amd-1", "amd64", "linux"));
    let mut pod = PodFixture::new("shop", "wrong", "amd-1", &[&image]).json();
    pod["spec"]["serviceAccountName"] = json!("app");
    api.put_pod(pod);
    let kubeconfig = write_kubeconfig(&api, dir.path());
    let mut argv = h.base_flags();
    argv.retain(|flag| {
        !flag.starts_with("--kubeconfig") && !flag.starts_with("--insecure-registries")
    });
    argv.extend([
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--insecure-registries={}", private.host()),
        "--remediate=report".into(),
        "--credential-provider-sa-tokens".into(),
    ]);
    argv.extend(super::inspect_account::plugin_flags(dir.path()));
    let running = harness::start_server(argv).await;
    let events = "/apis/events.k8s.io/v1/namespaces/shop/events";
    eventually(
        "an Event on the misplaced pod",
        || format!("{:#?}", api.requests()),
        || !writes_to(&api, events).is_empty(),
    )
    .await;
    let event = &writes_to(&api, events)[0];
    assert_eq!(event.body["reason"], "UnsupportedPlatform");
    assert_eq!(
        event.body["note"],
        format!("node amd-1 is linux/amd64; images that cannot run there: {image} [linux/arm64]")
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
    running.shutdown().await;
}
