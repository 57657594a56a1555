//! Private images end to end: `noe inspect --docker-config-path FILE` and the `noe` server with a
//! pod pull secret resolve private images on the real registry with htpasswd auth and with Bearer
//! token auth, and fail cleanly without credentials. The pull secret is read through the real
//! `kube::Client` from `--kubeconfig`, pointed at a loopback HTTP server answering the Secret JSON
//! of the Kubernetes API reference (no kube-apiserver can run here).

use super::harness;

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use harness::{admission_review, apply, pod, run_noe as noe, selector_arch, Harness};
use noe_test_support::{
    push_standard_fixtures, Behavior, DockerConfig, FakeRegistry, Fixtures, Registry, TokenServer,
};
use serde_json::{json, Value};

const USER: &str = "alice";
const PASSWORD: &str = "s3cret-pa55";

/// A private registry of each auth kind, holding the standard fixtures; anonymous pulls refused.
struct Private {
    registry: Registry,
    fixtures: Fixtures,
    /// Hosts reached over plain HTTP (the registry, and the token realm for the token registry).
    insecure: Vec<String>,
    _token: Option<TokenServer>,
}

async fn htpasswd_registry() -> Private {
    let registry = Registry::builder()
        .htpasswd(USER, PASSWORD)
        .start()
        .await
        .unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    Private {
        insecure: vec![registry.host()],
        registry,
        fixtures,
        _token: None,
    }
}

async fn token_registry() -> Private {
    let token = TokenServer::builder()
        .user(USER, PASSWORD)
        .start()
        .await
        .unwrap();
    let registry = Registry::builder()
        .token_auth(&token)
        .start()
        .await
        .unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    Private {
        insecure: vec![registry.host(), token.addr().to_string()],
        registry,
        fixtures,
        _token: Some(token),
    }
}

fn write_docker_config(dir: &Path, private: &Private, password: &str) -> String {
    let path = dir.join("config.json");
    let config = DockerConfig::new().auth(&private.registry.host(), USER, password);
    std::fs::write(&path, config.to_json().to_string()).unwrap();
    path.display().to_string()
}

async fn inspect_private(private: Private) {
    let dir = tempfile::tempdir().unwrap();
    let absent = dir.path().join("absent").display().to_string();
    let image = private.fixtures.oci_index.reference();
    let base = |docker_config: &str| {
        vec![
            "inspect".to_owned(),
            "--output=json".to_owned(),
            format!("--insecure-registries={}", private.insecure.join(",")),
            format!(
                "--allow-registry-cidrs={}",
                noe_test_support::LOOPBACK_CIDRS
            ),
            format!("--docker-config-path={docker_config}"),
            format!("--containerd-config-path={absent}"),
            "--registry-timeout=5s".to_owned(),
            image.clone(),
        ]
    };

    // Without credentials: exit 1, one line naming the image, and its JSON record says why.
    let (code, stdout, stderr) = noe(&base(&absent)).await;
    assert_eq!(code, 1, "stdout: {stdout} stderr: {stderr}");
    let record: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(record["error"]["kind"], "unauthorized", "{stdout}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("fixtures/oci-index"), "{stderr}");

    // A wrong password is refused the same way, and the password never reaches the output.
    let wrong = write_docker_config(dir.path(), &private, "wrong-password");
    let (code, stdout, stderr) = noe(&base(&wrong)).await;
    assert_eq!(code, 1, "stdout: {stdout} stderr: {stderr}");
    assert!(!stderr.contains("wrong-password"), "{stderr}");

    // With the docker config: the platforms, and the credential source named (not the secret).
    let config = write_docker_config(dir.path(), &private, PASSWORD);
    let (code, stdout, stderr) = noe(&base(&config)).await;
    assert_eq!(code, 0, "stdout: {stdout} stderr: {stderr}");
    assert!(!stdout.contains(PASSWORD) && !stderr.contains(PASSWORD));
    let line: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        line["platforms"],
        json!(["linux/amd64", "linux/arm/v7", "linux/arm64"]),
        "{line}"
    );
    assert_eq!(line["digest"], private.fixtures.oci_index.digest.as_str());
    let source = line["credentialSource"].as_str().unwrap_or_default();
    assert!(source.starts_with("docker-config:"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_with_a_docker_config_resolves_a_private_image_behind_htpasswd() {
    inspect_private(htpasswd_registry().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_with_a_docker_config_resolves_a_private_image_behind_token_auth() {
    inspect_private(token_registry().await).await;
}

/// A Kubernetes API on loopback answering `GET /api/v1/namespaces/team-a/secrets/regcred` with a
/// `kubernetes.io/dockerconfigjson` Secret (404 Status for any other secret).
async fn kube_api(private: &Private) -> FakeRegistry {
    let api = FakeRegistry::start().await.unwrap();
    let dockerconfig = DockerConfig::new()
        .auth(&private.registry.host(), USER, PASSWORD)
        .to_json()
        .to_string();
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "regcred", "namespace": "team-a", "resourceVersion": "1"},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64::engine::general_purpose::STANDARD.encode(dockerconfig)}
    });
    api.route(
        "/api/v1/namespaces/team-a/secrets/regcred",
        Behavior::json(200, &secret),
    );
    api.route(
        "/api/v1/namespaces/team-a/secrets/missing",
        Behavior::json(
            404,
            &json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "secrets \"missing\" not found", "reason": "NotFound",
                "details": {"name": "missing", "kind": "secrets"}, "code": 404
            }),
        ),
    );
    api
}

fn kubeconfig(dir: &Path, api: &FakeRegistry) -> String {
    let path = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\n\
         users:\n- name: noe\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    \
         user: noe\n    namespace: team-a\ncurrent-context: fake\n",
        api.base_url()
    );
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

async fn webhook_with_pull_secret(private: Private) {
    let h = Harness::start().await;
    let api = kube_api(&private).await;
    let absent = h.cert_dir.path().join("absent").display().to_string();
    let argv = vec![
        "noe".to_owned(),
        format!("--cert-dir={}", h.cert_dir.path().display()),
        "--webhook-addr=127.0.0.1:0".to_owned(),
        "--metrics-addr=127.0.0.1:0".to_owned(),
        "--health-probe-addr=127.0.0.1:0".to_owned(),
        format!("--insecure-registries={}", private.insecure.join(",")),
        format!(
            "--allow-registry-cidrs={}",
            noe_test_support::LOOPBACK_CIDRS
        ),
        format!("--docker-config-path={absent}"),
        format!("--containerd-config-path={absent}"),
        format!("--kubeconfig={}", kubeconfig(h.cert_dir.path(), &api)),
        "--admission-deadline=8s".to_owned(),
        "--preferred-arch=arm64".to_owned(),
    ];
    let running = harness::start_server(argv).await;
    let url = format!("https://localhost:{}/mutate", running.webhook_addr.port());
    let review = |pod: &Value| {
        let body = serde_json::to_vec(&admission_review(
            pod,
            "admission.k8s.io/v1",
            "CREATE",
            "uid-private",
        ))
        .unwrap();
        let client = h.client.clone();
        let url = url.clone();
        async move {
            let answer: Value = client
                .post(url)
                .header("content-type", "application/json")
                .body(body)
                .timeout(Duration::from_secs(20))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            answer["response"].clone()
        }
    };

    let image = private.fixtures.oci_index.reference();

    // With the pull secret: constrained to the image's platforms, the preferred arch chosen.
    let mut with_secret = pod(&[&image]);
    with_secret["spec"]["imagePullSecrets"] = json!([{"name": "regcred"}]);
    let response = review(&with_secret).await;
    let (_, typed) = apply(&with_secret, &response);
    assert_eq!(
        selector_arch(&typed).as_deref(),
        Some("arm64"),
        "{response}"
    );
    let annotations = typed.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations
            .get("arch.noe.adevinta.com/platforms")
            .map(String::as_str),
        Some("amd64,arm,arm64")
    );
    let reads = api.requests_to("/api/v1/namespaces/team-a/secrets/regcred");
    assert_eq!(reads.len(), 1, "one namespaced GET per secret");
    assert_eq!(reads[0].method, "GET");

    // Without it (and with a secret that does not exist): anonymous is refused, the pod is
    // allowed unchanged with a warning, and the missing secret is counted.
    let mut without = pod(&[&image]);
    without["spec"]["imagePullSecrets"] = json!([{"name": "missing"}]);
    let response = review(&without).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(response.get("patch").is_none(), "{response}");
    let warnings = response["warnings"].to_string();
    assert!(warnings.contains("fixtures/oci-index"), "{warnings}");
    assert!(!warnings.contains(PASSWORD));
    let metrics = reqwest::get(format!("http://{}/metrics", running.metrics_addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("noe_hook_image_pull_secret_failed_total{namespace=\"team-a\"} 1"),
        "{metrics}"
    );
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_uses_the_pods_pull_secret_behind_htpasswd() {
    webhook_with_pull_secret(htpasswd_registry().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_uses_the_pods_pull_secret_behind_token_auth() {
    webhook_with_pull_secret(token_registry().await).await;
}
