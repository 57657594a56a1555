//! `noe report` as a process against the real registry (plain HTTP on a loopback port, a second
//! one behind htpasswd), from files and from the scripted Kubernetes API: golden outputs for
//! mixed init containers, container order, a DaemonSet, a digest-pinned image, a registry with
//! a port, an auth failure and a missing image; each unique image requested once; the pods'
//! pull secrets when connected; exit codes.
//!
//! The goldens are in `report/`; `NOE_UPDATE_GOLDEN=1` rewrites them.

use super::harness;

use base64::Engine as _;
use harness::{run_noe as noe, Harness};
use noe_test_support::{
    push_standard_fixtures, DockerConfig, Fault, Fixtures, KubeApi, Registry, Resource,
};
use serde_json::{json, Value};

const USER: &str = "alice";
const PASSWORD: &str = "s3cret-pa55";

/// The two registries and the flags that reach them.
struct Registries {
    h: Harness,
    private: Registry,
    private_fixtures: Fixtures,
}

impl Registries {
    async fn start() -> Self {
        let h = Harness::start().await;
        let private = Registry::builder()
            .htpasswd(USER, PASSWORD)
            .start()
            .await
            .unwrap();
        let private_fixtures = push_standard_fixtures(&private).await.unwrap();
        Self {
            h,
            private,
            private_fixtures,
        }
    }

    fn flags(&self) -> Vec<String> {
        let absent = self.h.cert_dir.path().join("absent");
        vec![
            format!(
                "--insecure-registries={},{}",
                self.h.registry.host(),
                self.private.host()
            ),
            format!(
                "--allow-registry-cidrs={}",
                noe_test_support::LOOPBACK_CIDRS
            ),
            format!("--docker-config-path={}", absent.display()),
            format!("--containerd-config-path={}", absent.display()),
        ]
    }

    /// Hosts, ports and digests replaced by stable names; error messages by their class.
    fn normalize(&self, text: &str) -> String {
        let mut text = text
            .replace(&self.private.host(), "PRIVATE")
            .replace(&self.h.registry.host(), "REGISTRY")
            .replace(&self.h.fixtures.oci_single.digest, "sha256:DIGEST");
        // JSON error messages and the table's error lines name ports and OS errors.
        let mut out = String::with_capacity(text.len());
        for line in text.lines() {
            let trimmed = line.trim_start();
            if trimmed.starts_with("\"message\": ") {
                let indent = &line[..line.len() - trimmed.len()];
                out.push_str(&format!("{indent}\"message\": \"<message>\""));
            } else if let Some((head, _)) = line
                .split_once(": not_found: ")
                .or_else(|| line.split_once(": not\\_found: "))
                .or_else(|| line.split_once(": unauthorized: "))
            {
                let class = if line.contains(": not_found: ") {
                    "not_found"
                } else if line.contains(": not\\_found: ") {
                    "not\\_found"
                } else {
                    "unauthorized"
                };
                let workloads = line.rsplit_once(" (").map(|(_, w)| w).unwrap_or_default();
                out.push_str(&format!("{head}: {class}: <message> ({workloads}"));
            } else {
                out.push_str(line);
            }
            out.push('\n');
        }
        text = out;
        text
    }

    /// The workloads, as a cluster holds them (`connected`: the private one names its pull
    /// secret).
    fn objects(&self) -> Vec<Value> {
        let f = &self.h.fixtures;
        let resources =
            |cpu: &str, memory: &str| json!({"requests": {"cpu": cpu, "memory": memory}});
        let template = |containers: Value, init: Value| json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": containers, "initContainers": init}});
        // Mixed init containers: the init container is amd64-only, the app containers are not.
        let web = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "team-a", "labels": {"tier": "front"}},
            "spec": {"replicas": 3, "template": template(
                json!([
                    {"name": "app", "image": f.oci_index.reference(), "resources": resources("500m", "256Mi")},
                    {"name": "proxy", "image": f.docker_list.reference(), "resources": resources("100m", "64Mi")},
                ]),
                json!([{"name": "migrate", "image": f.windows_index.reference(), "resources": resources("1", "128Mi")}]),
            )}
        });
        // The same pod, containers in the other order: the same verdict.
        let reordered = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web-reordered", "namespace": "team-a"},
            "spec": {"replicas": 1, "template": template(
                json!([
                    {"name": "proxy", "image": f.docker_list.reference(), "resources": resources("100m", "64Mi")},
                    {"name": "app", "image": f.oci_index.reference(), "resources": resources("500m", "256Mi")},
                ]),
                json!([{"name": "migrate", "image": f.windows_index.reference(), "resources": resources("1", "128Mi")}]),
            )}
        });
        // A DaemonSet on 4 nodes, its image pinned by digest.
        let agent = json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "kube-system"},
            "spec": {"template": template(
                json!([{"name": "agent", "image": f.oci_single.digest_reference(), "resources": resources("50m", "32Mi")}]),
                json!([]),
            )},
            "status": {"desiredNumberScheduled": 4}
        });
        // Behind htpasswd: unauthorized without its pull secret.
        let db = json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "team-b"},
            "spec": {"replicas": 2, "template": {"spec": {
                "imagePullSecrets": [{"name": "regcred"}],
                "containers": [{"name": "db", "image": self.private_fixtures.docker_list.reference(), "resources": resources("2", "4Gi")}]
            }}}
        });
        // A missing image.
        let nightly = json!({
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "nightly", "namespace": "team-b"},
            "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "job", "image": self.h.missing_image(), "resources": resources("250m", "512Mi")}]
            }}}}}
        });
        // A bare pod; a ReplicaSet and a pod its owners stand for (not reported themselves).
        let solo = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "solo", "namespace": "team-a"},
            "spec": {"nodeName": "n2", "containers": [{"name": "c", "image": f.oci_index.reference()}]}
        });
        let replica_set = json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-5d8f", "namespace": "team-a", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "u1", "controller": true}]},
            "spec": {"replicas": 3, "template": template(json!([{"name": "app", "image": f.oci_index.reference()}]), json!([]))}
        });
        let pod = |name: &str, node: Option<&str>| {
            let mut pod = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "team-a", "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f", "uid": "u2", "controller": true}]},
                "spec": {"containers": [{"name": "app", "image": f.oci_index.reference()}]},
                "status": {"phase": "Running"}
            });
            match node {
                Some(node) => pod["spec"]["nodeName"] = json!(node),
                None => pod["status"]["phase"] = json!("Pending"),
            }
            pod
        };
        let node = |name: &str, arch: &str| {
            json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/arch": arch, "kubernetes.io/os": "linux"}}
            })
        };
        vec![
            web,
            reordered,
            agent,
            db,
            nightly,
            solo,
            replica_set,
            pod("web-5d8f-a", Some("n1")),
            pod("web-5d8f-b", Some("n1")),
            pod("web-5d8f-c", None),
            node("n1", "amd64"),
            node("n2", "arm64"),
        ]
    }

    /// How many manifest requests (HEAD and GET) each repository of the public registry got.
    fn manifest_requests(&self, repository: &str) -> usize {
        let prefix = format!("/v2/{repository}/manifests/");
        self.h
            .registry
            .requests()
            .iter()
            .filter(|r| r.path.starts_with(&prefix))
            .count()
    }
}

/// Compares `got` with the golden file `name` (rewritten with `NOE_UPDATE_GOLDEN=1`).
fn golden(name: &str, got: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/noe/report")
        .join(name);
    if std::env::var_os("NOE_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|error| {
        panic!(
            "{}: {error} (NOE_UPDATE_GOLDEN=1 writes it)",
            path.display()
        )
    });
    assert_eq!(
        got,
        want,
        "{} differs (NOE_UPDATE_GOLDEN=1 rewrites it)",
        path.display()
    );
}

/// A YAML stream of `objects` (JSON is YAML).
fn yaml_stream(objects: &[Value]) -> String {
    objects
        .iter()
        .map(|o| format!("---\n{}\n", serde_json::to_string_pretty(o).unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_from_files_golden() {
    let r = Registries::start().await;
    let dir = tempfile::tempdir().unwrap();
    let objects = r.objects();
    // Half as a YAML stream, half as `kubectl get -o json` (a `List`).
    let (first, second) = objects.split_at(4);
    let stream = dir.path().join("workloads.yaml");
    std::fs::write(&stream, yaml_stream(first)).unwrap();
    let list = dir.path().join("list.json");
    let list_json = json!({"apiVersion": "v1", "kind": "List", "items": second});
    std::fs::write(&list, list_json.to_string()).unwrap();
    let files = [
        format!("-f={}", stream.display()),
        format!("--file={}", list.display()),
    ];

    r.h.registry.reset_requests();
    let mut args = vec![
        "report".to_owned(),
        "-o".to_owned(),
        "json".to_owned(),
        "--include-pods".to_owned(),
    ];
    args.extend(files.clone());
    args.extend(r.flags());
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 0, "{stderr}");
    golden("files.json", &r.normalize(&stdout));
    // Each unique image once: oci-index is named by four pod templates.
    assert_eq!(r.manifest_requests("fixtures/oci-index"), 1);
    assert_eq!(r.manifest_requests("fixtures/docker-list"), 1);

    let report: Value = serde_json::from_str(&stdout).unwrap();
    let item = |name: &str| {
        report["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == name)
            .unwrap()
            .clone()
    };
    // Container order does not change the verdict, and an init container blocks.
    for name in ["web", "web-reordered"] {
        assert_eq!(item(name)["verdicts"]["arm64"], "blocked", "{name}");
        assert_eq!(
            item(name)["blocking"]["arm64"],
            json!([r.h.fixtures.windows_index.reference()])
        );
    }
    assert_eq!(item("agent")["verdicts"]["arm64"], "ready");
    assert_eq!(
        item("agent")["totalRequests"],
        json!({"cpu": "200m", "memory": "128Mi"})
    );
    assert_eq!(item("db")["verdicts"]["arm64"], "unknown");
    assert_eq!(item("db")["images"][0]["error"]["kind"], "unauthorized");
    assert_eq!(item("nightly")["images"][0]["error"]["kind"], "not_found");
    assert_eq!(
        item("web")["runningOn"],
        json!({"amd64": 2, "unscheduled": 1})
    );
    assert_eq!(item("solo")["runningOn"], json!({"arm64": 1}));
    assert_eq!(
        report["summary"]["arm64"]["workloads"],
        json!({"ready": 2, "blocked": 2, "unknown": 2})
    );

    for (format, name) in [
        ("table", "files.txt"),
        ("csv", "files.csv"),
        ("markdown", "files.md"),
    ] {
        let mut args = vec![
            "report".to_owned(),
            format!("--output={format}"),
            "--target-arch=arm64,amd64".to_owned(),
        ];
        args.extend(files.clone());
        args.extend(r.flags());
        let (code, stdout, stderr) = noe(&args).await;
        assert_eq!(code, 0, "{stderr}");
        golden(name, &r.normalize(&stdout));
        if format == "csv" {
            let rows: Vec<&str> = stdout.split("\r\n").filter(|l| !l.is_empty()).collect();
            assert_eq!(rows.len(), 7, "a header and six workloads: {stdout}");
        }
    }

    // CI: blocked or unknown workloads fail the run; a namespace without them does not.
    let mut args = vec![
        "report".to_owned(),
        "--fail-on=blocked".to_owned(),
        "-o=json".to_owned(),
    ];
    args.extend(files.clone());
    args.extend(r.flags());
    assert_eq!(noe(&args).await.0, 1);
    let mut args = vec![
        "report".to_owned(),
        "--fail-on=blocked,unknown".to_owned(),
        "-n=kube-system".to_owned(),
    ];
    args.extend(files.clone());
    args.extend(r.flags());
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("agent") && !stdout.contains("web"),
        "{stdout}"
    );
    // An object that cannot be read is in the error summary, the rest is reported: exit 3.
    let bad = dir.path().join("bad.yaml");
    let bad_deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "bad", "namespace": "team-a"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": r.h.fixtures.oci_index.reference(),
            "resources": {"requests": {"cpu": "lots"}}}]}}}});
    std::fs::write(&bad, yaml_stream(&[bad_deployment, r.objects()[5].clone()])).unwrap();
    let mut args = vec![
        "report".to_owned(),
        format!("-f={}", bad.display()),
        "-o=json".to_owned(),
    ];
    args.extend(r.flags());
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 3, "{stderr}");
    let partial: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(partial["items"][0]["name"], "solo");
    assert_eq!(
        partial["errors"]["sources"][0]["source"],
        "Deployment team-a/bad"
    );
    assert!(
        partial["errors"]["sources"][0]["message"]
            .as_str()
            .unwrap()
            .contains("resources.requests.cpu \"lots\""),
        "{partial}"
    );
    // A file that is not YAML: exit 2.
    let broken = dir.path().join("broken.yaml");
    std::fs::write(&broken, "kind: [").unwrap();
    let (code, _, stderr) = noe(&["report".to_owned(), format!("-f={}", broken.display())]).await;
    assert_eq!(code, 2, "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_from_the_scripted_api_uses_pull_secrets() {
    let r = Registries::start().await;
    let api = KubeApi::start().await.unwrap();
    for object in r.objects() {
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let resource = match object["kind"].as_str().unwrap() {
            "Deployment" => Resource::Deployments,
            "StatefulSet" => Resource::StatefulSets,
            "DaemonSet" => Resource::DaemonSets,
            "ReplicaSet" => Resource::ReplicaSets,
            "CronJob" => Resource::CronJobs,
            "Pod" => Resource::Pods,
            "Node" => Resource::Nodes,
            other => panic!("{other}"),
        };
        api.put(resource, &namespace, object);
    }
    let config = DockerConfig::new()
        .auth(&r.private.host(), USER, PASSWORD)
        .to_json();
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "regcred", "namespace": "team-b"},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64::engine::general_purpose::STANDARD.encode(config.to_string())}
    });
    api.put(Resource::Secrets, "team-b", secret);
    // A pod without pull secrets of its own gets its ServiceAccount's.
    api.put(
        Resource::ServiceAccounts,
        "team-b",
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "builder", "namespace": "team-b"},
            "imagePullSecrets": [{"name": "regcred"}]}),
    );
    api.put(
        Resource::Deployments,
        "team-b",
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "worker", "namespace": "team-b"},
            "spec": {"template": {"spec": {"serviceAccountName": "builder",
                "containers": [{"name": "w", "image": r.private_fixtures.oci_index.reference()}]}}}}),
    );
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, api.kubeconfig_yaml()).unwrap();
    let kube = format!("--kubeconfig={}", kubeconfig.display());

    let mut args = vec![
        "report".to_owned(),
        "-A".to_owned(),
        "--include-pods".to_owned(),
        "-o=json".to_owned(),
        kube.clone(),
    ];
    args.extend(r.flags());
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 0, "{stderr}");
    golden("cluster.json", &r.normalize(&stdout));
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let db = report["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "db")
        .unwrap();
    // With its pull secret, the private image resolves.
    assert_eq!(db["verdicts"]["arm64"], "ready", "{db}");
    assert_eq!(db["totalRequests"], json!({"cpu": "4", "memory": "8Gi"}));
    let worker = report["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "worker")
        .unwrap();
    assert_eq!(worker["verdicts"]["arm64"], "ready", "{worker}");
    // One read of the secret, for both.
    let secret_reads = api
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/secrets/regcred"))
        .count();
    assert_eq!(secret_reads, 1);

    // The current namespace (the kubeconfig's `default`) holds nothing: an empty report.
    let mut args = vec!["report".to_owned(), "-o=csv".to_owned(), kube.clone()];
    args.extend(r.flags());
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.lines().count(), 1, "the header alone: {stdout}");

    // A list the API refuses: the rest is reported, the error is summarised, exit 3.
    api.fault(Fault::new("GET", "/apis/batch/v1/cronjobs", 403).message("cronjobs is forbidden"));
    let mut args = vec![
        "report".to_owned(),
        "-A".to_owned(),
        "-o=json".to_owned(),
        kube.clone(),
    ];
    args.extend(r.flags());
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 3, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["items"].as_array().unwrap().len(), 6);
    assert_eq!(report["errors"]["sources"][0]["source"], "list cronjobs");
    // Selected by label: the API filters.
    let mut args = vec![
        "report".to_owned(),
        "-A".to_owned(),
        "-l=tier=front".to_owned(),
        "-o=json".to_owned(),
        kube,
    ];
    args.extend(r.flags());
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let names: Vec<&str> = report["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["web"]);
}

/// The count half of `noe-bench report` (its timing is measured in release only): many
/// workloads over fewer uncached images, each image asked of the registry once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_asks_for_each_unique_image_once() {
    use noe_test_support::{build_index, push_image, Flavor, IndexEntry};
    const IMAGES: usize = 40;
    const WORKLOADS: usize = 400;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let registry = Registry::start().await.unwrap();
    let pusher = registry.pusher().unwrap();
    let mut entries = Vec::new();
    for platform in ["linux/amd64", "linux/arm64"] {
        let image = push_image(&pusher, "bench/app", None, platform, Flavor::Oci)
            .await
            .unwrap();
        entries.push(IndexEntry::new(&image, Some(platform)));
    }
    let (body, descriptor) = build_index(Flavor::Oci, &entries).unwrap();
    for i in 0..IMAGES {
        pusher
            .push_manifest("bench/app", &format!("t{i}"), &descriptor.media_type, &body)
            .await
            .unwrap();
    }
    let objects: Vec<Value> = (0..WORKLOADS)
        .map(|i| {
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": format!("app-{i}"), "namespace": format!("team-{}", i % 7)},
                "spec": {"replicas": 2, "template": {"spec": {"containers": [{
                    "name": "app", "image": format!("{}/bench/app:t{}", registry.host(), i % IMAGES),
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}
                }]}}}
            })
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("workloads.yaml");
    std::fs::write(&file, yaml_stream(&objects)).unwrap();
    registry.reset_requests();
    let absent = dir.path().join("absent");
    let args = [
        "report".to_owned(),
        format!("-f={}", file.display()),
        "-o=json".to_owned(),
        format!("--insecure-registries={}", registry.host()),
        format!(
            "--allow-registry-cidrs={}",
            noe_test_support::LOOPBACK_CIDRS
        ),
        format!("--docker-config-path={}", absent.display()),
        format!("--containerd-config-path={}", absent.display()),
    ];
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["items"].as_array().unwrap().len(), WORKLOADS);
    assert_eq!(report["summary"]["arm64"]["workloads"]["ready"], WORKLOADS);
    assert_eq!(
        report["summary"]["arm64"]["movable"],
        json!({"cpu": "80", "memory": "100Gi"})
    );
    let mut per_image: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for request in registry.requests() {
        if request.path.contains("/manifests/") {
            *per_image.entry(request.path).or_default() += 1;
        }
    }
    assert_eq!(per_image.len(), IMAGES, "{per_image:?}");
    assert!(per_image.values().all(|n| *n == 1), "{per_image:?}");
}
