//! Exec format errors learned, as a user runs it: `noe --detect-exec-format-errors` against the
//! scripted API server (a crash-looping pod on an arm64 node whose previous log says `exec /app:
//! exec format error` becomes one entry of the learned store and one Event), then `noe learned
//! list` shows it and `noe learned forget` removes it; a hand-edited entry is listed as invalid.
//! With the real registry behind it, the entry steers the server's next admission of the image
//! and the policy endpoint's answer, until the image is rebuilt (a new digest) or the entry is
//! forgotten.
//!
//! Waits are bounded polls for a condition; nothing asserts on time.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use noe_test_support::{
    crash_loop, node_json, push_versions, Crash, KubeApi, PodFixture, PodLog, Resource, TestCa,
};
use serde_json::{json, Value};

use super::e2e_policy_endpoint::client as tls13_client;
use super::harness::{self, free_port, pod, review_at, run_noe, write_kubeconfig, Harness};

const NAMESPACE: &str = "noe-system";
const STORE: &str = "noe-learned-platforms";
const DIGEST: &str = "sha256:bbbb2222bbbb2222bbbb2222bbbb2222bbbb2222bbbb2222bbbb2222bbbb2222";
const IMAGE: &str = "registry.example/app:1";

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

/// Pod shop/web of `image` crash-loops on node arm-1 (the kubelet pulled `image_id`); its
/// previous run's log says `exec /app: exec format error`.
fn crash_on_arm(api: &KubeApi, image: &str, image_id: &str) {
    let mut pod = PodFixture::new("shop", "web", "arm-1", &[image]).json();
    crash_loop(&mut pod, 0, &Crash::new(image_id, 2));
    api.set_log(
        "shop",
        "web",
        "c0",
        true,
        PodLog::Text(b"exec /app: exec format error\n".to_vec()),
    );
    api.put_pod(pod);
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
    crash_on_arm(&api, IMAGE, &format!("registry.example/app@{DIGEST}"));

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

/// The architectures a reviewed pod's images all run on (the `arch.noe.adevinta.com/platforms`
/// annotation the patch writes) and its warnings.
fn placed(pod: &Value, response: &Value) -> (String, String) {
    let (_, typed) = harness::apply(pod, response);
    let archs = harness::platforms_annotation(&typed).unwrap_or_default();
    (archs, response["warnings"].to_string())
}

/// The `arch.noe.adevinta.com/corrections` annotation the patch writes, parsed.
fn corrections_annotation(pod: &Value, response: &Value) -> Value {
    let (patched, _) = harness::apply(pod, response);
    patched["metadata"]["annotations"][noe_core::decide::CORRECTIONS_ANNOTATION]
        .as_str()
        .map_or(Value::Null, |text| serde_json::from_str(text).unwrap())
}

/// A crash-looping pod on an arm64 node teaches the server, through the learned store, that the
/// image's digest does not run on arm64: its next admission is amd64 only, with the evidence in
/// the warning and the annotation, and so is the policy endpoint's answer; a reference by that
/// digest stays corrected, the image rebuilt (a new digest) is trusted again, and so is the
/// image itself once `noe learned forget` removed the entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learned_exec_format_error_steers_the_next_admission_until_the_image_is_rebuilt() {
    let h = Harness::start().await;
    let api = KubeApi::start().await.unwrap();
    api.put_node(node_json("arm-1", "arm64", "linux"));
    api.put_node(node_json("amd-1", "amd64", "linux"));
    store(&api, json!({}));
    // linux/amd64 and linux/arm64, by a Docker manifest list.
    let list = &h.fixtures.docker_list;
    let image = list.reference();

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(&api, dir.path());
    let gatekeeper_ca = TestCa::with_name("gatekeeper-ca").unwrap();
    let gatekeeper_ca_file = dir.path().join("gatekeeper-ca.crt");
    std::fs::write(&gatekeeper_ca_file, gatekeeper_ca.cert_pem()).unwrap();
    let log = dir.path().join("noe.log");
    let (webhook, lookup, health) = (free_port(), free_port(), free_port());
    let mut argv = h.base_flags();
    argv.remove(0);
    argv.retain(|flag| !flag.starts_with("--kubeconfig") && !flag.ends_with(":0"));
    argv.extend([
        format!("--webhook-addr=127.0.0.1:{webhook}"),
        format!("--metrics-addr=127.0.0.1:{}", free_port()),
        format!("--health-probe-addr=127.0.0.1:{health}"),
        format!("--lookup-addr=127.0.0.1:{lookup}"),
        format!("--lookup-client-ca={}", gatekeeper_ca_file.display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--detect-exec-format-errors".to_owned(),
        "--shutdown-delay=0s".to_owned(),
        "--log-format=text".to_owned(),
    ]);
    let _noe = Noe(Command::new(env!("CARGO_BIN_EXE_noe"))
        .args(&argv)
        .env("POD_NAME", "noe-5d8f-abcde")
        .env("POD_NAMESPACE", NAMESPACE)
        .env("NOE_LOG_LEVEL", "info")
        .env_remove("RUST_LOG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap());
    let noe_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let readyz = format!("http://127.0.0.1:{health}/readyz");
    let mut ready = false;
    for _ in 0..1500 {
        if let Ok(response) = reqwest::get(&readyz).await {
            if response.status().is_success() {
                ready = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ready, "the server never became ready\n{}", noe_log());
    let url = format!("https://localhost:{webhook}/mutate");
    let review = |pod: Value| {
        let (client, url) = (h.client.clone(), url.clone());
        async move {
            let response = review_at(&client, &url, &pod, "admission.k8s.io/v1", "CREATE").await;
            (pod, response)
        }
    };
    let serving_ca_pem = std::fs::read_to_string(h.cert_dir.path().join("tls.crt")).unwrap();
    let gatekeeper = tls13_client(&serving_ca_pem, Some(&gatekeeper_ca));
    let platforms = |key: String| {
        let gatekeeper = gatekeeper.clone();
        async move {
            let request = json!({
                "apiVersion": "externaldata.gatekeeper.sh/v1beta1",
                "kind": "ProviderRequest",
                "request": {"keys": [key]},
            });
            let url = format!("https://localhost:{lookup}/gatekeeper/v1/platforms");
            let (status, answer) = harness::post_at(&gatekeeper, &url, request.to_string()).await;
            assert_eq!(status, 200, "{answer}");
            answer["response"]["items"][0]["value"]["platforms"].clone()
        }
    };

    // Nothing learned yet: the claim is trusted.
    let (sent, response) = review(pod(&[&image])).await;
    let (archs, warnings) = placed(&sent, &response);
    assert_eq!(archs, "amd64,arm64", "{response}");
    assert!(!warnings.contains("is not used"), "{warnings}");
    assert_eq!(
        platforms(image.clone()).await,
        json!(["linux/amd64", "linux/arm64"])
    );

    // The pod the kubelet ran on arm-1 crash-loops; its previous run says why.
    crash_on_arm(&api, &image, &list.digest_reference());
    eventually("the entry learned", || data(&api).len() == 1).await;

    // Every replica's view follows the store by its watch: the next admission is amd64 only.
    let mut steered = None;
    for _ in 0..500 {
        let (sent, response) = review(pod(&[&image])).await;
        if placed(&sent, &response).0 == "amd64" {
            steered = Some((sent, response));
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (sent, response) = steered.unwrap_or_else(|| panic!("never steered\n{}", noe_log()));
    let (_, warnings) = placed(&sent, &response);
    let evidence = format!(
        "image {image}: linux/arm64 is not used: exec-format-error: pod shop/web container c0 on node arm-1 at "
    );
    assert!(warnings.contains(&evidence), "{warnings}");
    assert!(
        warnings.contains(": exec /app: exec format error"),
        "{warnings}"
    );
    let annotation = corrections_annotation(&sent, &response);
    assert_eq!(annotation[0]["image"], image.as_str(), "{annotation}");
    assert_eq!(annotation[0]["platform"], "linux/arm64");
    assert_eq!(annotation[0]["source"], "exec-format-error");
    assert!(
        annotation[0]["evidence"]
            .as_str()
            .is_some_and(|e| e.starts_with("pod shop/web container c0 on node arm-1 at ")),
        "{annotation}"
    );
    // The policy engines are told the same.
    assert_eq!(platforms(image.clone()).await, json!(["linux/amd64"]));

    // A reference by the learned digest stays corrected.
    let (sent, response) = review(pod(&[&list.digest_reference()])).await;
    assert_eq!(placed(&sent, &response).0, "amd64", "{response}");

    // Rebuilt: the same repository's next tag is another index (a new digest), trusted again.
    push_versions(
        &h.registry.pusher().unwrap(),
        &list.repository,
        &[("v2", true)],
    )
    .await
    .unwrap();
    let rebuilt = h.registry.reference(&list.repository, "v2");
    let (sent, response) = review(pod(&[&rebuilt])).await;
    let (archs, warnings) = placed(&sent, &response);
    assert_eq!(archs, "amd64,arm64", "{response}");
    assert!(!warnings.contains("is not used"), "{warnings}");
    assert_eq!(
        platforms(rebuilt).await,
        json!(["linux/amd64", "linux/arm64"])
    );

    // `noe learned forget`: the next admissions trust the claim again.
    let (code, _, stderr) = run_noe(&[
        "learned".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
        "-n".to_owned(),
        NAMESPACE.to_owned(),
        "forget".to_owned(),
        image.clone(),
    ])
    .await;
    assert_eq!(code, 0, "{stderr}");
    let mut trusted = false;
    for _ in 0..500 {
        let (sent, response) = review(pod(&[&image])).await;
        if placed(&sent, &response).0 == "amd64,arm64" {
            trusted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(trusted, "still corrected after forget\n{}", noe_log());
}

/// `noe explain` and `noe report` with the learned store read (`--learned-namespace`, and by
/// default for `report` from a cluster): the learned platform is left out as in the server and
/// shown under "learned" with its evidence, in JSON and in words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_and_report_leave_out_and_show_what_was_learned() {
    let h = Harness::start().await;
    let list = &h.fixtures.docker_list;
    let image = list.reference();
    let api = KubeApi::start().await.unwrap();
    let learned = noe_controller::learned::Entry::new(
        &image,
        &list.digest,
        &noe_core::Platform::new("linux", "arm64", None),
        noe_core::truth::Source::ExecFormatError,
        noe_controller::learned::Evidence {
            namespace: "shop".into(),
            pod: "web-1".into(),
            container: "app".into(),
            node: "arm-1".into(),
            message: "exec /app: exec format error".into(),
            time: "2026-11-28T09:00:00Z".into(),
        },
    );
    let data = json!({learned.key(): serde_json::to_string(&learned).unwrap()});
    store(&api, data.clone());
    // The kubeconfig context's namespace holds one too (`noe report` reads it by default).
    api.put(
        Resource::ConfigMaps,
        "default",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": STORE, "namespace": "default"}, "data": data}),
    );
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"replicas": 2, "template": {"spec": {
            "containers": [{"name": "app", "image": image}]}}}});
    api.put(Resource::Deployments, "shop", deployment.clone());
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(&api, dir.path());
    let file = dir.path().join("web.json");
    std::fs::write(&file, deployment.to_string()).unwrap();
    let cli = |args: &[&str], learned: bool| {
        let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        all.extend(h.registry_flags());
        all.push(format!("--kubeconfig={}", kubeconfig.display()));
        if learned {
            all.push(format!("--learned-namespace={NAMESPACE}"));
        }
        all
    };
    let evidence = "pod shop/web-1 container app on node arm-1 at 2026-11-28T09:00:00Z: exec /app: exec format error";
    let file_arg = format!("-f={}", file.display());

    // explain: only with --learned-namespace.
    let (code, stdout, stderr) = run_noe(&cli(&["explain", &file_arg, "-o", "json"], true)).await;
    assert_eq!(code, 0, "{stderr}");
    let explained: Value = serde_json::from_str(stdout.trim()).unwrap();
    let shown = &explained["learned"][0];
    assert_eq!(shown["image"], image.as_str(), "{explained}");
    assert_eq!(shown["digest"], list.digest.as_str());
    assert_eq!(shown["platform"], "linux/arm64");
    assert_eq!(shown["source"], "exec-format-error");
    assert_eq!(shown["evidence"], evidence);
    assert!(
        explained["patch"]
            .to_string()
            .contains(r#""arch.noe.adevinta.com/platforms":"amd64""#),
        "{explained}"
    );
    let (code, stdout, stderr) = run_noe(&cli(&["explain", &file_arg], true)).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(&format!(
            "  learned: {image} does not run on linux/arm64 (exec-format-error: {evidence})"
        )),
        "{stdout}"
    );
    let (code, stdout, stderr) = run_noe(&cli(&["explain", &file_arg, "-o", "json"], false)).await;
    assert_eq!(code, 0, "{stderr}");
    let explained: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(explained.get("learned").is_none(), "{explained}");
    assert!(
        explained["patch"]
            .to_string()
            .contains(r#""arch.noe.adevinta.com/platforms":"amd64,arm64""#),
        "{explained}"
    );
    // A store named but absent: the run cannot be trusted, exit 2.
    let mut absent = cli(&["explain", &file_arg], false);
    absent.push("--learned-namespace=elsewhere".into());
    let (code, _, stderr) = run_noe(&absent).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("elsewhere/noe-learned-platforms does not exist"),
        "{stderr}"
    );

    // report from a file with --learned-namespace, and from the cluster by default.
    for args in [
        &[
            "report",
            &file_arg,
            "-o",
            "json",
            "--upgrades=false",
            &format!("--learned-namespace={NAMESPACE}"),
        ][..],
        &["report", "-n", "shop", "-o", "json", "--upgrades=false"][..],
    ] {
        let (code, stdout, stderr) = run_noe(&cli(args, false)).await;
        assert_eq!(code, 0, "{args:?}: {stderr}");
        let report: Value = serde_json::from_str(&stdout).unwrap();
        let item = &report["items"][0];
        assert_eq!(item["verdicts"]["arm64"], "blocked", "{args:?}: {item}");
        let entry = &item["images"][0];
        assert_eq!(entry["platforms"], json!(["linux/amd64"]), "{entry}");
        assert_eq!(
            entry["learned"],
            json!([{"evidence": evidence, "platform": "linux/arm64", "source": "exec-format-error"}]),
            "{entry}"
        );
    }
    let (code, stdout, stderr) =
        run_noe(&cli(&["report", "-n", "shop", "--upgrades=false"], false)).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(&format!(
            "1 platforms left out as learned on the cluster's nodes (the learned store):\n  image {image}: linux/arm64 is not used: exec-format-error: {evidence} (1 workloads)"
        )),
        "{stdout}"
    );
    // CSV and Markdown: a `learned` column; HTML: a section with the evidence and the workload,
    // as a browser shows it.
    let words = format!("{image}: linux/arm64 (exec-format-error: {evidence})");
    let (code, csv, stderr) = run_noe(&cli(
        &["report", "-n", "shop", "-o", "csv", "--upgrades=false"],
        false,
    ))
    .await;
    assert_eq!(code, 0, "{stderr}");
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().ends_with(",unknown,learned"), "{csv}");
    assert!(
        lines.next().unwrap().ends_with(&format!(",{words}")),
        "{csv}"
    );
    let (code, markdown, stderr) = run_noe(&cli(
        &["report", "-n", "shop", "-o", "markdown", "--upgrades=false"],
        false,
    ))
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(markdown.contains("| LEARNED |"), "{markdown}");
    let escaped = noe_core::report::render::escape::markdown(&words);
    assert!(markdown.contains(&format!("| {escaped} |")), "{markdown}");
    let (code, html, stderr) = run_noe(&cli(
        &["report", "-n", "shop", "-o", "html", "--upgrades=false"],
        false,
    ))
    .await;
    assert_eq!(code, 0, "{stderr}");
    if let Some(mut browser) = super::report_html::browser() {
        let page = dir.path().join("report.html");
        std::fs::write(&page, &html).unwrap();
        browser.open(&format!("file://{}", page.display())).unwrap();
        let rows = browser
            .eval("[...document.querySelectorAll('#learned tbody tr')].map(tr => [...tr.cells].map(c => c.innerText))")
            .unwrap();
        assert_eq!(
            rows,
            json!([[
                image,
                "linux/arm64",
                "exec-format-error",
                evidence,
                "shop/web Deployment"
            ]]),
            "{html}"
        );
    }

    // From a file without the flag, nothing is read from the cluster.
    let (code, stdout, stderr) = run_noe(&cli(
        &["report", &file_arg, "-o", "json", "--upgrades=false"],
        false,
    ))
    .await;
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert!(
        report["items"][0]["images"][0].get("learned").is_none(),
        "{report}"
    );
    assert_eq!(report["items"][0]["verdicts"]["arm64"], "ready");
}
