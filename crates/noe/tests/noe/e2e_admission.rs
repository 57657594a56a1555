//! End to end: AdmissionReviews over HTTPS to the real `noe` server, images in the real registry,
//! the returned patch applied with `json-patch` and read back as a `k8s_openapi` Pod.

use super::harness;

use std::time::{Duration, Instant};

use harness::{
    apply, patch_of, platforms_annotation, pod, required_arch_terms, selector_arch, Harness,
};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_policy_cases() {
    let h = Harness::start().await;
    let f = &h.fixtures;
    let server = h.server(&[]).await;

    // Multi-arch: the preferred arch (amd64) is common -> nodeSelector, annotation of the common set.
    let multi = pod(&[&f.oci_index.reference(), &f.docker_list.reference()]);
    let response = server.review(&multi).await;
    let (_, typed) = apply(&multi, &response);
    assert_eq!(selector_arch(&typed).as_deref(), Some("amd64"));
    assert_eq!(platforms_annotation(&typed).as_deref(), Some("amd64,arm64"));
    assert!(required_arch_terms(&typed).is_empty());

    // Same pod in v1beta1: answered in v1beta1 with the same patch.
    let beta = server
        .review_as(&multi, "admission.k8s.io/v1beta1", "CREATE")
        .await;
    assert_eq!(patch_of(&beta), patch_of(&response));

    // Single-arch arm64: amd64 not available -> required affinity In [arm64].
    let single = pod(&[&f.oci_single.reference()]);
    let (_, typed) = apply(&single, &server.review(&single).await);
    assert_eq!(selector_arch(&typed), None);
    assert_eq!(
        required_arch_terms(&typed),
        vec![(vec!["arm64".to_owned()], 0)]
    );
    assert_eq!(platforms_annotation(&typed).as_deref(), Some("arm64"));

    // Single Docker manifest (s390x) resolved through its config blob.
    let s390x = pod(&[&f.docker_single.reference()]);
    let (_, typed) = apply(&s390x, &server.review(&s390x).await);
    assert_eq!(
        required_arch_terms(&typed),
        vec![(vec!["s390x".to_owned()], 0)]
    );

    // No common arch -> denied with 403 naming each image and its platforms.
    let none = pod(&[&f.oci_single.reference(), &f.docker_single.reference()]);
    let response = server.review(&none).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.contains(&f.oci_single.reference()) && message.contains("arm64"),
        "{message}"
    );
    assert!(
        message.contains(&f.docker_single.reference()) && message.contains("s390x"),
        "{message}"
    );
    assert!(response.get("patch").is_none());

    // Preferred arch from the pod label.
    let mut labelled = multi.clone();
    labelled["metadata"]["labels"]["arch.noe.adevinta.com/preferred"] = json!("arm64");
    let (_, typed) = apply(&labelled, &server.review(&labelled).await);
    assert_eq!(selector_arch(&typed).as_deref(), Some("arm64"));

    // A label preference that cannot be honoured: a warning, the common set written.
    let mut unfit = single.clone();
    unfit["metadata"]["labels"]["arch.noe.adevinta.com/preferred"] = json!("amd64");
    let response = server.review(&unfit).await;
    let warnings = response["warnings"].to_string();
    assert!(
        warnings.contains("could not select preferred arch: amd64"),
        "{warnings}"
    );
    let (_, typed) = apply(&unfit, &response);
    assert_eq!(
        required_arch_terms(&typed),
        vec![(vec!["arm64".to_owned()], 0)]
    );

    // Existing required terms: the arch expression is ANDed into each, no ORed extra term.
    let mut zoned = single.clone();
    zoned["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
    ]}}});
    let (_, typed) = apply(&zoned, &server.review(&zoned).await);
    assert_eq!(
        required_arch_terms(&typed),
        vec![(vec!["arm64".to_owned()], 1), (vec!["arm64".to_owned()], 1)]
    );

    // The pod already selects an arch: no arch constraint added, no lookup needed.
    let mut pinned = none.clone();
    pinned["spec"]["nodeSelector"] = json!({"kubernetes.io/arch": "arm64"});
    let response = server.review(&pinned).await;
    assert_eq!(response["allowed"], true);
    assert!(patch_of(&response).is_empty(), "{response}");

    // Skip label.
    let mut skipped = none.clone();
    skipped["metadata"]["labels"]["arch.noe.adevinta.com/skip"] = json!("true");
    let response = server.review(&skipped).await;
    assert_eq!(response["allowed"], true);
    assert!(patch_of(&response).is_empty());

    // Init containers count: arm64-only init + multi-arch container -> arm64.
    let mut init = pod(&[&f.oci_index.reference()]);
    init["spec"]["initContainers"] = json!([{"name": "init", "image": f.oci_single.reference()}]);
    let (_, typed) = apply(&init, &server.review(&init).await);
    assert_eq!(
        required_arch_terms(&typed),
        vec![(vec!["arm64".to_owned()], 0)]
    );

    // Nested index and an index entry without platform (resolved through its config).
    let nested = pod(&[&f.nested_index.reference()]);
    let (_, typed) = apply(&nested, &server.review(&nested).await);
    assert_eq!(
        platforms_annotation(&typed).as_deref(),
        Some("amd64,arm64,ppc64le")
    );
    let partial = pod(&[&f.index_without_platform.reference()]);
    let (_, typed) = apply(&partial, &server.review(&partial).await);
    assert_eq!(
        platforms_annotation(&typed).as_deref(),
        Some("amd64,riscv64")
    );

    // Windows: a windows pod with a windows image; the same pod with a linux-only image is denied.
    let mut windows = pod(&[&f.windows_index.reference()]);
    windows["spec"]["os"] = json!({"name": "windows"});
    let (_, typed) = apply(&windows, &server.review(&windows).await);
    assert_eq!(selector_arch(&typed).as_deref(), Some("amd64"));
    let mut windows_on_linux_image = pod(&[&f.oci_index.reference()]);
    windows_on_linux_image["spec"]["os"] = json!({"name": "windows"});
    let response = server.review(&windows_on_linux_image).await;
    assert_eq!(response["allowed"], false, "{response}");

    // Reinvocation: a sidecar injector added an arm64-only container after our first patch.
    let first = pod(&[&f.oci_index.reference()]);
    let (mut patched, typed) = apply(&first, &server.review(&first).await);
    assert_eq!(selector_arch(&typed).as_deref(), Some("amd64"));
    patched["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "sidecar", "image": f.oci_single.reference()}));
    let (_, typed) = apply(&patched, &server.review(&patched).await);
    assert_eq!(
        selector_arch(&typed),
        None,
        "our old amd64 selector was replaced"
    );
    assert_eq!(
        required_arch_terms(&typed),
        vec![(vec!["arm64".to_owned()], 0)]
    );
    assert_eq!(platforms_annotation(&typed).as_deref(), Some("arm64"));

    // Not a pod creation: allowed unchanged.
    let update = server
        .review_as(&multi, "admission.k8s.io/v1", "UPDATE")
        .await;
    assert_eq!(update, json!({"uid": update["uid"], "allowed": true}));

    // Metrics were counted with bounded labels.
    let metrics = server.metrics().await;
    for line in [
        "noe_hook_arch_selector_injected_total{namespace=\"team-a\",selector=\"preferred\"}",
        "noe_hook_preferred_architecture_not_available_total{namespace=\"team-a\"}",
        "noe_webhook_request_duration_seconds_count{outcome=\"denied\"}",
        "noe_webhook_request_duration_seconds_count{outcome=\"patched\"}",
        "noe_hook_update_skip_total{reason=\"skip label found\"}",
        // the resolver's metrics are served on the same endpoint
        "noe_registry_requests_total",
        "noe_registry_cache_requests_total",
        "noe_registry_request_duration_seconds_bucket",
    ] {
        assert!(metrics.contains(line), "{line} missing:\n{metrics}");
    }
    server.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flags_change_the_decision() {
    let h = Harness::start().await;
    let f = &h.fixtures;
    let multi = pod(&[&f.oci_index.reference(), &f.docker_list.reference()]);

    // Preferred arch by flag, Go spelling.
    let server = h.server(&["-preferred-arch", "arm64"]).await;
    let (_, typed) = apply(&multi, &server.review(&multi).await);
    assert_eq!(selector_arch(&typed).as_deref(), Some("arm64"));
    server.running.shutdown().await;

    // `preferred` mode: required In [common] plus a weighted preference.
    let server = h
        .server(&["--preference-mode=preferred", "--preference-weight=70"])
        .await;
    let (_, typed) = apply(&multi, &server.review(&multi).await);
    assert_eq!(selector_arch(&typed), None);
    assert_eq!(
        required_arch_terms(&typed),
        vec![(vec!["amd64".to_owned(), "arm64".to_owned()], 0)]
    );
    let preferred = typed
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.preferred_during_scheduling_ignored_during_execution
                .clone()
        })
        .unwrap();
    assert_eq!(preferred.len(), 1);
    assert_eq!(preferred[0].weight, 70);
    server.running.shutdown().await;

    // Schedulable archs filter: arm is not schedulable, only amd64/arm64 remain.
    let server = h
        .server(&[
            "--cluster-schedulable-archs=amd64,arm64",
            "--preferred-arch=",
        ])
        .await;
    let index = pod(&[&f.oci_index.reference()]);
    let (_, typed) = apply(&index, &server.review(&index).await);
    assert_eq!(platforms_annotation(&typed).as_deref(), Some("amd64,arm64"));
    assert_eq!(
        required_arch_terms(&typed),
        vec![(vec!["amd64".to_owned(), "arm64".to_owned()], 0)]
    );
    server.running.shutdown().await;

    // match-node-labels with `/` and `~` in keys, tolerations per arch, null/absent fields.
    let tolerations = h.cert_dir.path().join("tolerations.yaml");
    std::fs::write(
        &tolerations,
        "arm64:\n- key: arch\n  operator: Equal\n  value: arm64\n  effect: NoSchedule\n",
    )
    .unwrap();
    let server = h
        .server(&[
            "--match-node-labels=example.com/team,odd~key",
            &format!("--arch-tolerations-file={}", tolerations.display()),
        ])
        .await;
    let mut nulls = pod(&[&f.oci_single.reference()]);
    nulls["metadata"]["labels"] =
        json!({"example.com/team": "blue", "odd~key": "x", "app": "demo"});
    nulls["metadata"]["annotations"] = Value::Null;
    nulls["spec"]["nodeSelector"] = Value::Null;
    nulls["spec"]["affinity"] = Value::Null;
    nulls["spec"]["tolerations"] = Value::Null;
    let response = server.review(&nulls).await;
    let (_, typed) = apply(&nulls, &response);
    let spec = typed.spec.as_ref().unwrap();
    let selector = spec.node_selector.clone().unwrap();
    assert_eq!(selector["example.com/team"], "blue");
    assert_eq!(selector["odd~key"], "x");
    assert_eq!(
        required_arch_terms(&typed),
        vec![(vec!["arm64".to_owned()], 0)]
    );
    let tolerations = spec.tolerations.clone().unwrap();
    assert_eq!(tolerations.len(), 1);
    assert_eq!(tolerations[0].value.as_deref(), Some("arm64"));
    assert_eq!(platforms_annotation(&typed).as_deref(), Some("arm64"));

    // The same with every field present: appended / added by key, existing values kept.
    let mut present = nulls.clone();
    present["metadata"]["annotations"] = json!({"keep": "me"});
    present["spec"]["nodeSelector"] = json!({"disk": "ssd"});
    present["spec"]["tolerations"] = json!([{"key": "other", "operator": "Exists"}]);
    let response = server.review(&present).await;
    // keys are added one by one, JSON-Pointer escaped
    let ops = serde_json::to_string(&patch_of(&response)).unwrap();
    assert!(
        ops.contains("/spec/nodeSelector/example.com~1team")
            && ops.contains("/spec/nodeSelector/odd~0key"),
        "{ops}"
    );
    assert!(
        ops.contains("/metadata/annotations/arch.noe.adevinta.com~1platforms"),
        "{ops}"
    );
    let (_, typed) = apply(&present, &response);
    let spec = typed.spec.as_ref().unwrap();
    assert_eq!(spec.node_selector.as_ref().unwrap().len(), 3);
    assert_eq!(spec.tolerations.as_ref().unwrap().len(), 2);
    assert_eq!(typed.metadata.annotations.as_ref().unwrap()["keep"], "me");
    let metrics = server.metrics().await;
    assert!(metrics.contains(
        "noe_hook_node_match_injections_total{label=\"example.com/team\",namespace=\"team-a\"}"
    ));
    server.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookup_failures_follow_the_mode() {
    let h = Harness::start().await;
    let f = &h.fixtures;
    let missing = h.missing_image();
    let mixed = pod(&[&f.oci_index.reference(), &missing]);

    // ignore-image (default): decided over the images that resolved, with a warning-free patch.
    let server = h.server(&[]).await;
    let (_, typed) = apply(&mixed, &server.review(&mixed).await);
    assert_eq!(selector_arch(&typed).as_deref(), Some("amd64"));
    // every lookup failed: fail open with a warning
    let only_missing = pod(&[&missing]);
    let response = server.review(&only_missing).await;
    assert_eq!(response["allowed"], true);
    assert!(patch_of(&response).is_empty());
    assert!(
        response["warnings"].to_string().contains(&missing),
        "{response}"
    );
    let metrics = server.metrics().await;
    assert!(
        metrics.contains(&format!(
            "noe_hook_registry_errors_total{{registry=\"{}\"}}",
            h.registry.host()
        )),
        "{metrics}"
    );
    server.running.shutdown().await;

    // allow-pod: any failure leaves the pod untouched, with a warning.
    let server = h.server(&["--on-lookup-error=allow-pod"]).await;
    let response = server.review(&mixed).await;
    assert_eq!(response["allowed"], true);
    assert!(patch_of(&response).is_empty());
    assert!(
        response["warnings"].to_string().contains(&missing),
        "{response}"
    );
    server.running.shutdown().await;

    // deny: any failure denies, naming the image.
    let server = h.server(&["-on-lookup-error=deny"]).await;
    let response = server.review(&mixed).await;
    assert_eq!(response["allowed"], false);
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .contains(&missing),
        "{response}"
    );
    server.running.shutdown().await;

    // Registry down (frozen: connections hang): fail-open within the admission deadline.
    // A long registry timeout: only the admission deadline can cut the lookup short.
    let server = h
        .server(&["--admission-deadline=1s", "--registry-timeout=30s"])
        .await;
    h.registry.pause().unwrap();
    let frozen = pod(&[&f.docker_list.reference()]);
    let started = Instant::now();
    let response = server.review(&frozen).await;
    let elapsed = started.elapsed();
    h.registry.resume().unwrap();
    // 1 s deadline; the slack absorbs a loaded CI machine, far below the 30 s registry timeout.
    assert!(
        elapsed < Duration::from_millis(2500),
        "answered in {elapsed:?}"
    );
    assert_eq!(response["allowed"], true);
    assert!(patch_of(&response).is_empty());
    assert!(
        response["warnings"]
            .to_string()
            .contains("deadline exceeded"),
        "{response}"
    );
    server.running.shutdown().await;

    // Registry unreachable (closed port): fail-open too.
    let server = h.server(&["--insecure-registries=127.0.0.1:1"]).await;
    let closed = pod(&["127.0.0.1:1/app:1"]);
    let response = server.review(&closed).await;
    assert_eq!(response["allowed"], true);
    assert!(patch_of(&response).is_empty());
    // The warning says `unreachable`, never how (a refused port is no different from a silent
    // one to a pod creator: the difference would be a port probe).
    let warnings = response["warnings"].to_string();
    assert!(
        warnings.contains("cannot reach 127.0.0.1:1: unreachable"),
        "{response}"
    );
    assert!(!warnings.to_lowercase().contains("refused"), "{response}");
    server.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_bodies_get_an_admission_review() {
    let h = Harness::start().await;
    let server = h.server(&[]).await;
    let cases: Vec<(Vec<u8>, &str, &str)> = vec![
        (b"garbage".to_vec(), "admission.k8s.io/v1", ""),
        (b"".to_vec(), "admission.k8s.io/v1", ""),
        (b"[]".to_vec(), "admission.k8s.io/v1", ""),
        (b"{}".to_vec(), "admission.k8s.io/v1", ""),
        (
            br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview"}"#.to_vec(),
            "admission.k8s.io/v1beta1",
            "",
        ),
        (
            br#"{"apiVersion":"admission.k8s.io/v2","request":{"uid":"x1"}}"#.to_vec(),
            "admission.k8s.io/v1",
            "x1",
        ),
        (
            br#"{"apiVersion":"admission.k8s.io/v1","request":{"uid":"x2","kind":{"kind":"Pod"},"operation":"CREATE","object":"nope"}}"#.to_vec(),
            "admission.k8s.io/v1",
            "x2",
        ),
        (
            br#"{"apiVersion":"admission.k8s.io/v1","request":{"uid":"x3","kind":{"kind":"Pod"},"operation":"CREATE","object":{"spec":{"containers":"x"}}}}"#.to_vec(),
            "admission.k8s.io/v1",
            "x3",
        ),
    ];
    for (body, version, uid) in cases {
        let shown = String::from_utf8_lossy(&body).to_string();
        let (status, answer) = server.post(body).await;
        assert_eq!(status, 200, "{shown}");
        assert_eq!(answer["apiVersion"], version, "{shown}: {answer}");
        assert_eq!(answer["kind"], "AdmissionReview", "{shown}");
        assert_eq!(answer["response"]["uid"], uid, "{shown}");
        assert!(
            answer["response"]["allowed"].is_boolean(),
            "{shown}: {answer}"
        );
    }
    // A review the apiserver would never send (fields it always fills are missing, or the
    // object is not an object) is refused with 400, in the version asked, echoing the uid.
    for (body, uid) in [
        (&br#"{"apiVersion":"admission.k8s.io/v1","request":{"uid":"x2","kind":{"kind":"Pod"},"operation":"CREATE","object":{}}}"#[..], "x2"),
        (br#"{"apiVersion":"admission.k8s.io/v1","request":{"uid":"x3","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"operation":"CREATE","userInfo":{},"object":"nope"}}"#, "x3"),
    ] {
        let (_, answer) = server.post(body.to_vec()).await;
        assert_eq!(answer["response"]["uid"], uid, "{answer}");
        assert_eq!(answer["response"]["allowed"], false, "{answer}");
        assert_eq!(answer["response"]["status"]["code"], 400, "{answer}");
    }
    // A complete review of a pod of unexpected shape is answered: allowed, nothing to decide.
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "x4", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "operation": "CREATE", "userInfo": {"username": "u"},
                    "object": {"spec": {"containers": "x"}}}});
    let (_, answer) = server.post(serde_json::to_vec(&review).unwrap()).await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    server.running.shutdown().await;
}

/// Anyone who can reach the webhook port can send reviews with invented namespaces: the
/// `namespace` label keeps the first `--metrics-max-namespaces` values and counts the rest as
/// `_other`, so the series stay bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invented_namespaces_do_not_grow_the_metrics() {
    let h = Harness::start().await;
    let server = h.server(&["--metrics-max-namespaces=3"]).await;
    let multi = pod(&[&h.fixtures.oci_index.reference()]);
    for n in 0..40 {
        let review = noe_test_support::admission_review(
            "admission.k8s.io/v1",
            "CREATE",
            &format!("invented-{n}"),
            &format!("uid-{n}"),
            &multi,
        );
        let (status, answer) = server.post(serde_json::to_vec(&review).unwrap()).await;
        assert_eq!(status, 200);
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
    }
    let metrics = server.metrics().await;
    let namespaces: std::collections::BTreeSet<&str> = metrics
        .lines()
        .filter(|line| line.starts_with("noe_hook_arch_selector_injected_total{"))
        .filter_map(|line| line.split("namespace=\"").nth(1))
        .filter_map(|rest| rest.split('"').next())
        .collect();
    assert_eq!(
        namespaces,
        ["_other", "invented-0", "invented-1", "invented-2"]
            .into_iter()
            .collect(),
        "{metrics}"
    );
    server.running.shutdown().await;
}
