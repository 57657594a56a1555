//! Exec format errors learned, as a user runs it: `noe --detect-exec-format-errors` against the
//! scripted API server (a crash-looping pod on an arm64 node whose previous log says `exec /app:
//! exec format error` becomes one entry of the learned store and one Event), then `noe learned
//! list` shows it and `noe learned forget` removes it; a hand-edited entry is listed as invalid.
//!
//! Waits are bounded polls for a condition; nothing asserts on time.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use noe_test_support::{crash_loop, node_json, Crash, KubeApi, PodFixture, PodLog, Resource};
use serde_json::{json, Value};

use super::harness::run_noe;

const NAMESPACE: &str = "noe-system";
const STORE: &str = "noe-learned-platforms";
const DIGEST: &str = "sha256:bbbb2222bbbb2222bbbb2222bbbb2222bbbb2222bbbb2222bbbb2222bbbb2222";
const IMAGE: &str = "registry.example/app:1";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn write_kubeconfig(api: &KubeApi, dir: &Path) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(&path, api.kubeconfig_yaml()).unwrap();
    path
}

/// The store's ConfigMap as the chart creates it (no data).
fn store(api: &KubeApi, data: Value) {
    api.put(
        Resource::ConfigMaps,
        NAMESPACE,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": STORE, "namespace": NAMESPACE}, "data": data}),
    );
}

fn data(api: &KubeApi) -> serde_json::Map<String, Value> {
    api.get(Resource::ConfigMaps, NAMESPACE, STORE).unwrap()["data"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// The `noe` server, killed on drop.
struct Noe(Child);

impl Drop for Noe {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..1500 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_learns_an_exec_format_error_lists_it_and_forgets_it() {
    let api = KubeApi::start().await.unwrap();
    api.put_node(node_json("arm-1", "arm64", "linux"));
    api.put_node(node_json("amd-1", "amd64", "linux"));
    store(&api, json!({}));
    let mut pod = PodFixture::new("shop", "web", "arm-1", &[IMAGE]).json();
    crash_loop(
        &mut pod,
        0,
        &Crash::new(&format!("registry.example/app@{DIGEST}"), 2),
    );
    api.set_log(
        "shop",
        "web",
        "c0",
        true,
        PodLog::Text(b"exec /app: exec format error\n".to_vec()),
    );
    api.put_pod(pod);

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(&api, dir.path());
    let noe = Noe(Command::new(env!("CARGO_BIN_EXE_noe"))
        .args([
            "--dev-self-signed-cert".to_owned(),
            format!("--webhook-addr=127.0.0.1:{}", free_port()),
            format!("--metrics-addr=127.0.0.1:{}", free_port()),
            format!("--health-probe-addr=127.0.0.1:{}", free_port()),
            format!("--kubeconfig={}", kubeconfig.display()),
            "--detect-exec-format-errors".to_owned(),
            "--shutdown-delay=0s".to_owned(),
        ])
        .env("POD_NAME", "noe-5d8f-abcde")
        .env("POD_NAMESPACE", NAMESPACE)
        .env("NOE_LOG_LEVEL", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap());
    eventually("the entry learned", || data(&api).len() == 1).await;
    eventually("the Event", || {
        api.writes()
            .iter()
            .any(|w| w.path.ends_with("/namespaces/shop/events"))
    })
    .await;
    drop(noe);
    let (_, value) = data(&api).into_iter().next().unwrap();
    let entry: Value = serde_json::from_str(value.as_str().unwrap()).unwrap();
    assert_eq!(entry["image"], IMAGE);
    assert_eq!(entry["digest"], DIGEST);
    assert_eq!(entry["platform"], "linux/arm64");
    assert_eq!(entry["source"], "exec-format-error");
    assert_eq!(entry["evidence"]["message"], "exec /app: exec format error");

    // A person's edit beside it.
    let mut stored = api.get(Resource::ConfigMaps, NAMESPACE, STORE).unwrap();
    stored["data"]["by-hand"] = json!("not json");
    api.put(Resource::ConfigMaps, NAMESPACE, stored);
    let kube = format!("--kubeconfig={}", kubeconfig.display());
    let learned = |args: &[&str]| {
        let mut all = vec![
            "learned".to_owned(),
            kube.clone(),
            "-n".into(),
            NAMESPACE.into(),
        ];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        all
    };

    let (code, stdout, stderr) = run_noe(&learned(&["list", "-o", "json"])).await;
    assert_eq!(code, 0, "{stderr}");
    let listed: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(listed["store"], format!("{NAMESPACE}/{STORE}"));
    assert_eq!(listed["learned"].as_array().unwrap().len(), 1);
    assert_eq!(listed["learned"][0]["digest"], DIGEST);
    assert_eq!(listed["invalid"][0]["key"], "by-hand");

    let (code, stdout, stderr) = run_noe(&learned(&["list"])).await;
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("IMAGE"), "{stdout}");
    assert!(
        lines[1].starts_with(IMAGE) && lines[1].contains("linux/arm64"),
        "{stdout}"
    );
    assert!(stderr.contains("learned/by-hand ignored"), "{stderr}");

    // An image with nothing learned: exit 1, nothing removed.
    let (code, _, stderr) = run_noe(&learned(&["forget", "registry.example/other:1"])).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("no learned correction"), "{stderr}");
    assert_eq!(data(&api).len(), 2);

    let (code, stdout, stderr) = run_noe(&learned(&["forget", IMAGE])).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("forgotten registry.example/app:1"),
        "{stdout}"
    );
    assert_eq!(data(&api).keys().collect::<Vec<_>>(), ["by-hand"]);

    let (code, _, stderr) = run_noe(&learned(&["forget", "--all"])).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(data(&api).is_empty());

    // A namespace without the store.
    let (code, _, stderr) = run_noe(&[
        "learned".to_owned(),
        kube.clone(),
        "-n".into(),
        "elsewhere".into(),
        "list".into(),
    ])
    .await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");
}
