//! End-to-end harness: the real registry with the standard fixtures, the real `noe` server
//! in-process with a test CA, and an HTTPS client trusting it.

use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::core::v1::Pod;
use noe::cli::{Args, Run};
use noe::serve::Serving;
use noe_test_support::{push_standard_fixtures, Fixtures, Registry, TestCa};
use serde_json::{json, Value};

pub struct Harness {
    pub registry: Registry,
    pub fixtures: Fixtures,
    pub cert_dir: tempfile::TempDir,
    pub client: reqwest::Client,
}

pub struct Server {
    pub running: Serving,
    pub url: String,
    pub client: reqwest::Client,
}

impl Harness {
    pub async fn start() -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let registry = Registry::start().await.unwrap();
        let fixtures = push_standard_fixtures(&registry).await.unwrap();
        let ca = TestCa::new().unwrap();
        let cert_dir = tempfile::tempdir().unwrap();
        noe_test_support::write_cert_dir(&ca, cert_dir.path()).unwrap();
        let client = reqwest::Client::builder()
            .use_preconfigured_tls(ca.client_config().unwrap())
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        Self {
            registry,
            fixtures,
            cert_dir,
            client,
        }
    }

    /// The flags every test server gets: loopback ports, the test certificate, the fixture
    /// registry over plain HTTP, no host credential files.
    pub fn base_flags(&self) -> Vec<String> {
        let mut flags = vec![
            "noe".into(),
            format!("--cert-dir={}", self.cert_dir.path().display()),
            "--webhook-addr=127.0.0.1:0".into(),
            "--metrics-addr=127.0.0.1:0".into(),
            "--health-probe-addr=127.0.0.1:0".into(),
        ];
        flags.extend(self.registry_flags());
        flags.push("--kubeconfig=".into());
        flags
    }

    /// The registry flags of every command (`inspect`, `explain`, `report`, the server): the
    /// fixture registry over plain HTTP, no host credential files.
    pub fn registry_flags(&self) -> Vec<String> {
        let none = self.cert_dir.path().join("absent");
        vec![
            format!("--insecure-registries={}", self.registry.host()),
            // The registries here run on loopback, which noe refuses unless told.
            format!(
                "--allow-registry-cidrs={}",
                noe_test_support::LOOPBACK_CIDRS
            ),
            format!("--docker-config-path={}", none.display()),
            format!("--containerd-config-path={}", none.display()),
        ]
    }

    /// Starts a `noe` server with the base flags plus `extra` (Go spellings allowed).
    pub async fn server(&self, extra: &[&str]) -> Server {
        let mut argv = self.base_flags();
        argv.extend(extra.iter().map(|s| (*s).to_owned()));
        let running = start_server(argv).await;
        let url = format!("https://localhost:{}/mutate", running.webhook_addr.port());
        Server {
            running,
            url,
            client: self.client.clone(),
        }
    }

    /// `host/fixtures/NAME:v1` for a repository that does not exist.
    pub fn missing_image(&self) -> String {
        format!("{}/fixtures/missing:v1", self.registry.host())
    }
}

impl Server {
    /// POSTs raw bytes; the HTTP status and the JSON answer.
    pub async fn post(&self, body: impl Into<reqwest::Body>) -> (u16, Value) {
        post_at(&self.client, &self.url, body).await
    }

    /// Reviews a pod creation in `admission.k8s.io/v1`; returns `response`.
    pub async fn review(&self, pod: &Value) -> Value {
        self.review_as(pod, "admission.k8s.io/v1", "CREATE").await
    }

    pub async fn review_as(&self, pod: &Value, version: &str, operation: &str) -> Value {
        review_at(&self.client, &self.url, pod, version, operation).await
    }

    pub async fn metrics(&self) -> String {
        reqwest::get(format!("http://{}/metrics", self.running.metrics_addr))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

/// Reviews `pod` at the webhook `url` (a server in-process or a `noe` process); returns
/// `response`.
pub async fn review_at(
    client: &reqwest::Client,
    url: &str,
    pod: &Value,
    version: &str,
    operation: &str,
) -> Value {
    let uid = format!("uid-{}", rand_suffix());
    let review = admission_review(pod, version, operation, &uid);
    let (status, answer) = post_at(client, url, serde_json::to_vec(&review).unwrap()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["apiVersion"], version);
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(answer["response"]["uid"], uid.as_str());
    answer["response"].clone()
}

/// POSTs raw bytes to `url`; the HTTP status and the JSON answer.
pub async fn post_at(
    client: &reqwest::Client,
    url: &str,
    body: impl Into<reqwest::Body>,
) -> (u16, Value) {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let value = serde_json::from_str(&text).unwrap_or_else(|_| json!({ "raw": text }));
    (status, value)
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::SeqCst)
}

/// A TCP port on 127.0.0.1 free right now (for a process started next).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `api`'s kubeconfig written into `dir`.
pub fn write_kubeconfig(
    api: &noe_test_support::KubeApi,
    dir: &std::path::Path,
) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(&path, api.kubeconfig_yaml()).unwrap();
    path
}

pub fn admission_review(pod: &Value, version: &str, operation: &str, uid: &str) -> Value {
    noe_test_support::admission_review(version, operation, "team-a", uid, pod)
}

/// A pod with these container images.
pub fn pod(images: &[&str]) -> Value {
    let containers: Vec<Value> = images
        .iter()
        .enumerate()
        .map(|(i, image)| json!({"name": format!("c{i}"), "image": image}))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "demo-", "labels": {"app": "demo"}},
        "spec": {"containers": containers}
    })
}

/// The decoded JSON patch of a response (empty when there is none).
pub fn patch_of(response: &Value) -> Vec<Value> {
    let Some(encoded) = response.get("patch").and_then(Value::as_str) else {
        return Vec::new();
    };
    assert_eq!(response["patchType"], "JSONPatch");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// Applies the response's patch with `json-patch` (RFC 6902) and checks the result is a valid Pod.
pub fn apply(pod: &Value, response: &Value) -> (Value, Pod) {
    assert_eq!(response["allowed"], true, "{response}");
    let ops = patch_of(response);
    let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops.clone())).unwrap();
    let mut patched = pod.clone();
    json_patch::patch(&mut patched, &patch)
        .unwrap_or_else(|e| panic!("patch {ops:?} does not apply: {e}"));
    let typed: Pod = serde_json::from_value(patched.clone()).unwrap();
    (patched, typed)
}

/// `nodeSelector["kubernetes.io/arch"]`.
pub fn selector_arch(pod: &Pod) -> Option<String> {
    pod.spec
        .as_ref()?
        .node_selector
        .as_ref()?
        .get("kubernetes.io/arch")
        .cloned()
}

/// Per required term: the values of its `kubernetes.io/arch In` expressions (empty when none)
/// and the number of its other expressions.
pub fn required_arch_terms(pod: &Pod) -> Vec<(Vec<String>, usize)> {
    let Some(terms) = pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
    else {
        return Vec::new();
    };
    terms
        .node_selector_terms
        .iter()
        .map(|term| {
            let expressions = term.match_expressions.clone().unwrap_or_default();
            let arch: Vec<String> = expressions
                .iter()
                .filter(|e| e.key == "kubernetes.io/arch" && e.operator == "In")
                .flat_map(|e| e.values.clone().unwrap_or_default())
                .collect();
            let others = expressions
                .iter()
                .filter(|e| e.key != "kubernetes.io/arch")
                .count();
            (arch, others)
        })
        .collect()
}

/// The `arch.noe.adevinta.com/platforms` annotation.
pub fn platforms_annotation(pod: &Pod) -> Option<String> {
    pod.metadata
        .annotations
        .as_ref()?
        .get("arch.noe.adevinta.com/platforms")
        .cloned()
}

/// Runs the `noe` binary with `args`: exit code, stdout, stderr (logs at error level only).
pub async fn run_noe(args: &[String]) -> (i32, String, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_noe"))
        .args(args)
        .env("NOE_LOG_LEVEL", "error")
        .env_remove("RUST_LOG")
        .output()
        .await
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// Starts the server in-process from a command line, as `noe` would (Go spellings allowed).
pub async fn start_server(argv: Vec<String>) -> Serving {
    let args = Args::try_parse_normalized(argv.into_iter().map(Into::into)).unwrap();
    let Run::Serve(config) = args.to_run().unwrap() else {
        panic!("not a server command line")
    };
    noe::serve::start(config).await.unwrap()
}
