//! AdmissionReviews that real kube-apiservers sent (other projects' captures, kept outside the
//! repository): each is replayed through the server with its images rewritten to fixtures of the
//! real registry on loopback, and every answer must be a well-formed AdmissionReview for it whose
//! patch applies and yields a valid Pod; from each pod creation, a debug-container update
//! (`pods/ephemeralcontainers`) is derived and checked against a node of the scripted API
//! server. The data is located by `NOE_CONFORMANCE_DIR`, else
//! `../shared/conformance` beside the repository; without it the test says so and passes.

use std::path::PathBuf;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Value};

use super::harness::Harness;

/// The captured requests; the tests that read them are ignored when they are absent at build
/// time (`build.rs` sets `noe_no_conformance`), and fail (never pass for testing nothing) when
/// they went missing since.
fn conformance_dir() -> PathBuf {
    let dir = std::env::var_os("NOE_CONFORMANCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance")
        })
        .join("admission");
    assert!(
        dir.is_dir(),
        "{} went missing since the build",
        dir.display()
    );
    dir
}

/// Captures whose object is not a valid Kubernetes object, which the webhook refuses with 400
/// (docs/compatibility.md, "Admission requests").
const NOT_A_VALID_OBJECT: &[&str] = &["kubewarden-policy-server__pod_sleep_100ms.json"];

/// A bare AdmissionRequest wrapped into an `admission.k8s.io/v1` AdmissionReview.
fn as_review(capture: Value) -> Value {
    if capture.get("request").is_some() {
        capture
    } else {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": capture})
    }
}

/// Every image of the object replaced by one of `images`, in turn.
fn rewrite_images(object: &mut Value, images: &[String]) {
    let mut next = 0usize;
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        let Some(containers) = object
            .pointer_mut(&format!("/spec/{list}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for container in containers {
            if container.get("image").is_some() {
                container["image"] = json!(images[next % images.len()]);
                next += 1;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    noe_no_conformance,
    ignore = "needs ../shared/conformance/admission (or NOE_CONFORMANCE_DIR)"
)]
async fn captured_reviews_get_answers_that_apply_and_validate() {
    let dir = conformance_dir();
    let h = Harness::start().await;
    let f = &h.fixtures;
    let server = h.server(&[]).await;
    let images = [
        f.oci_index.reference(),
        f.docker_list.reference(),
        f.nested_index.reference(),
    ];
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} holds no capture", dir.display());
    let mut patched = 0;
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let mut review = as_review(serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap());
        if let Some(object) = review.pointer_mut("/request/object") {
            rewrite_images(object, &images);
        }
        let version = review["apiVersion"].as_str().unwrap().to_owned();
        let uid = review["request"]["uid"].clone();
        let (status, answer) = server.post(serde_json::to_vec(&review).unwrap()).await;
        assert_eq!(status, 200, "{name}");
        // The same pod twice again (other requests), as the apiserver sends other pods of its
        // template (another generated name, uid, creation and field-manager time): answered as
        // the first time, the last one from the decision memo when the second was remembered.
        let mut again = review.clone();
        for (n, time) in ["again", "once more"].into_iter().enumerate() {
            again["request"]["uid"] = json!(time);
            if let Some(object) = again.pointer_mut("/request/object") {
                another_replica(object, n);
            }
            let (_, mut later) = server.post(serde_json::to_vec(&again).unwrap()).await;
            if let Some(response) = later.get_mut("response").filter(|r| r.get("uid").is_some()) {
                response["uid"] = uid.clone();
            }
            assert_eq!(later, answer, "{name}: asked {time}");
        }
        assert_eq!(answer["apiVersion"], version.as_str(), "{name}: {answer}");
        assert_eq!(answer["kind"], "AdmissionReview", "{name}");
        let response = &answer["response"];
        assert_eq!(response["uid"], uid, "{name}");
        if NOT_A_VALID_OBJECT.contains(&name.as_str()) {
            assert_eq!(response["allowed"], false, "{name}: {answer}");
            assert_eq!(response["status"]["code"], 400, "{name}: {answer}");
            continue;
        }
        assert_eq!(response["allowed"], true, "{name}: {answer}");
        let Some(patch) = response["patch"].as_str() else {
            continue;
        };
        assert_eq!(response["patchType"], "JSONPatch", "{name}");
        let ops: json_patch::Patch = serde_json::from_slice(
            &base64::engine::general_purpose::STANDARD
                .decode(patch)
                .unwrap(),
        )
        .unwrap();
        let mut object = review["request"]["object"].clone();
        json_patch::patch(&mut object, &ops)
            .unwrap_or_else(|error| panic!("{name}: the patch does not apply: {error}"));
        serde_json::from_value::<Pod>(object)
            .unwrap_or_else(|error| panic!("{name}: the patched pod is not a Pod: {error}"));
        patched += 1;
    }
    eprintln!("{} captures replayed, {patched} patched", files.len());
    assert!(
        patched > 0,
        "no capture was patched: the replay decided nothing"
    );
    server.running.shutdown().await;
}

/// Derived from every captured pod creation: the same pod, bound to an arm64 node, gets a debug
/// container (`pods/ephemeralcontainers` UPDATE, object and oldObject as the apiserver sends
/// them). A debug image that cannot run on the node is warned about, one that can is allowed
/// silently, and the answer is a well-formed AdmissionReview in the version asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    noe_no_conformance,
    ignore = "needs ../shared/conformance/admission (or NOE_CONFORMANCE_DIR)"
)]
async fn derived_debug_container_updates() {
    let dir = conformance_dir();
    let h = Harness::start().await;
    let f = &h.fixtures;
    let api = noe_test_support::KubeApi::start().await.unwrap();
    api.put_node(noe_test_support::node_json("arm-1", "arm64", "linux"));
    let kubeconfig = h.cert_dir.path().join("kubeconfig.yaml");
    std::fs::write(&kubeconfig, api.kubeconfig_yaml()).unwrap();
    let mut argv: Vec<String> = h
        .base_flags()
        .into_iter()
        .filter(|flag| !flag.starts_with("--kubeconfig"))
        .collect();
    argv.push(format!("--kubeconfig={}", kubeconfig.display()));
    argv.push("--check-ephemeral-containers".into());
    let running = super::harness::start_server(argv).await;
    let server = super::harness::Server {
        url: format!("https://localhost:{}/mutate", running.webhook_addr.port()),
        running,
        client: h.client.clone(),
    };
    let images = [f.oci_index.reference(), f.docker_list.reference()];
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut derived = 0;
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let review = as_review(serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap());
        let request = &review["request"];
        if NOT_A_VALID_OBJECT.contains(&name.as_str())
            || request["operation"] != "CREATE"
            || !request["object"].is_object()
        {
            continue;
        }
        let mut bound = request["object"].clone();
        rewrite_images(&mut bound, &images);
        bound["spec"]["nodeName"] = json!("arm-1");
        if bound["metadata"]["name"].as_str().is_none_or(str::is_empty) {
            bound["metadata"]["name"] = json!("derived");
        }
        let version = review["apiVersion"].as_str().unwrap().to_owned();
        let namespace = request["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_owned();
        for (debug_image, warned) in [
            (f.docker_single.reference(), true),
            (f.oci_index.reference(), false),
        ] {
            let mut object = bound.clone();
            let mut debug = object["spec"]["ephemeralContainers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            debug.push(json!({"name": "noe-debugger", "image": debug_image,
                              "stdin": true, "tty": true, "terminationMessagePolicy": "File"}));
            object["spec"]["ephemeralContainers"] = json!(debug);
            let uid = format!("{name}-{warned}");
            let update =
                noe_test_support::ephemeral_review(&version, &namespace, &uid, &object, &bound);
            let (status, answer) = server.post(serde_json::to_vec(&update).unwrap()).await;
            assert_eq!(status, 200, "{name}");
            assert_eq!(answer["apiVersion"], version.as_str(), "{name}: {answer}");
            let response = &answer["response"];
            assert_eq!(response["uid"], uid.as_str(), "{name}");
            assert_eq!(response["allowed"], true, "{name}: {answer}");
            assert!(response.get("patch").is_none(), "{name}: {answer}");
            let warnings = response["warnings"].to_string();
            assert_eq!(
                warnings.contains("cannot run on the pod's node (linux/arm64)"),
                warned,
                "{name}: {answer}"
            );
        }
        derived += 1;
    }
    eprintln!("{derived} debug container updates derived");
    assert!(derived > 0, "no capture could be derived");
    server.running.shutdown().await;
}

/// `object` as the apiserver would send another pod of its template (`n` picks which): a new
/// name when it was generated from `generateName`, uid, creation time and field-manager times.
fn another_replica(object: &mut Value, n: usize) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let suffix = ["q8w2e", "r4t6y"][n % 2];
    let generate_name = metadata
        .get("generateName")
        .and_then(Value::as_str)
        .map(str::to_owned);
    if let (Some(prefix), Some(Value::String(name))) = (generate_name, metadata.get_mut("name")) {
        if name.len() == prefix.len() + 5 && name.starts_with(&prefix) {
            *name = format!("{prefix}{suffix}");
        }
    }
    let time = format!("2026-11-28T09:00:0{n}Z");
    if metadata.get("uid").is_some_and(Value::is_string) {
        metadata.insert(
            "uid".to_owned(),
            json!(format!("0000000{n}-1111-4222-8333-444444444444")),
        );
    }
    if metadata
        .get("creationTimestamp")
        .is_some_and(Value::is_string)
    {
        metadata.insert("creationTimestamp".to_owned(), json!(time));
    }
    if let Some(Value::Array(entries)) = metadata.get_mut("managedFields") {
        for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
            if entry.get("time").is_some_and(Value::is_string) {
                entry.insert("time".to_owned(), json!(time));
            }
        }
    }
}
