//! Image selection end to end: the real `noe` server started from a command line with
//! `--image-selection --watch-nodes`, its node reflector fed by the scripted API server, the
//! compatibility artifacts in the real registry (pushed as `oras push`/`oras attach` lay them
//! out), every review through the HTTPS server.
//!
//! - ocifit-k8s's README walk-through: the nodes labelled flavor vanilla, then chocolate, then
//!   strawberry; the same pod gets the debian, then the ubuntu, then the rockylinux variant
//!   (here: fixture images of this registry), then the normal decision on the new image;
//! - what ocifit-k8s denies, we deny with the cause; `.../model` is refused;
//! - an NFD artifact attached to an image constrains the pod to the nodes that fit it;
//! - with `--watch-node-features`, a feature only NFD's `NodeFeature` objects carry (no label)
//!   pins the pod to the nodes that have it by name; when none has it, a warning (or a denial
//!   with the pod's `require`).

use std::time::Duration;

use noe_test_support::{
    attach, compat_artifact, nfd_nested_spec, nfd_regex_spec, node_feature_json, node_json,
    push_artifact, KubeApi, NFD_ARTIFACT_TYPE, NFD_SPEC_TYPE, OCIFIT_SPEC_TYPE,
    ORAS_DEFAULT_ARTIFACT_TYPE,
};
use serde_json::{json, Value};

use super::harness::{self, apply, pod, Harness, Server};

const FLAVOR: &str = "feature.node.ocifit-k8s.flavor";
const MAJOR: &str = "feature.node.kubernetes.io/kernel-version.major";

async fn server(h: &Harness, api: &KubeApi, extra: &[&str]) -> Server {
    let kubeconfig = h.cert_dir.path().join("kubeconfig.yaml");
    std::fs::write(&kubeconfig, api.kubeconfig_yaml()).unwrap();
    let mut argv: Vec<String> = h
        .base_flags()
        .into_iter()
        .filter(|flag| !flag.starts_with("--kubeconfig"))
        .collect();
    argv.push(format!("--kubeconfig={}", kubeconfig.display()));
    argv.extend(["--watch-nodes".to_owned(), "--image-selection".to_owned()]);
    argv.extend(extra.iter().map(|s| (*s).to_owned()));
    let running = harness::start_server(argv).await;
    let view = running.node_view().expect("a node view");
    tokio::time::timeout(Duration::from_secs(30), view.ready())
        .await
        .expect("the nodes listed");
    Server {
        url: format!("https://localhost:{}/mutate", running.webhook_addr.port()),
        running,
        client: h.client.clone(),
    }
}

fn node(name: &str, arch: &str, labels: &[(&str, &str)]) -> Value {
    let mut node = node_json(name, arch, "linux");
    for (k, v) in labels {
        node["metadata"]["labels"][*k] = json!(v);
    }
    node
}

/// Waits (bounded) until the reflector shows `node`'s `key` label as `value`.
async fn labelled(server: &Server, node: &str, key: &str, value: &str) {
    let view = server.running.node_view().expect("a node view");
    for _ in 0..1500 {
        if view
            .node(node)
            .is_some_and(|n| n.labels.get(key).map(String::as_str) == Some(value))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the reflector never saw {node} {key}={value}");
}

fn selecting_pod(image_ref: &str) -> Value {
    let mut p = pod(&["placeholder:latest"]);
    p["metadata"]["labels"]["oci.image.compatibilities.selection/enabled"] = json!("true");
    p["metadata"]["annotations"] =
        json!({"oci.image.compatibilities.selection/image-ref": image_ref});
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ocifit_readme_walkthrough_through_the_https_server() {
    let h = Harness::start().await;
    let f = &h.fixtures;
    let (debian, ubuntu, rocky) = (
        f.oci_index.reference(),
        f.oci_single.reference(),
        f.docker_list.reference(),
    );
    let set = |tag: &str, flavor: &str| {
        json!({"tag": tag, "description": flavor, "rules": [{"matchFeatures": [{"matchExpressions": [
            {"op": "In", "key": FLAVOR, "value": [flavor]}]}]}]})
    };
    let spec = json!({"version": "v1alpha1", "compatibilities": [
        set(&debian, "vanilla"), set(&ubuntu, "chocolate"), set(&rocky, "strawberry")]});
    let artifact = compat_artifact(
        ORAS_DEFAULT_ARTIFACT_TYPE,
        OCIFIT_SPEC_TYPE,
        spec.to_string().as_bytes(),
        None,
        None,
    );
    let pusher = h.registry.pusher().unwrap();
    push_artifact(
        &pusher,
        "ocifit-k8s-compatibility",
        &artifact,
        Some("kind-example"),
    )
    .await
    .unwrap();
    let image_ref = h
        .registry
        .reference("ocifit-k8s-compatibility", "kind-example");

    let api = KubeApi::start().await.unwrap();
    api.put_node(node("w1", "amd64", &[(FLAVOR, "vanilla")]));
    api.put_node(node("w2", "arm64", &[(FLAVOR, "vanilla")]));
    let server = server(&h, &api, &[]).await;
    let p = selecting_pod(&image_ref);

    for (flavor, image, arch) in [
        ("vanilla", &debian, Some("amd64")),
        ("chocolate", &ubuntu, None),
        ("strawberry", &rocky, Some("amd64")),
    ] {
        api.put_node(node("w1", "amd64", &[(FLAVOR, flavor)]));
        api.put_node(node("w2", "arm64", &[(FLAVOR, flavor)]));
        labelled(&server, "w1", FLAVOR, flavor).await;
        labelled(&server, "w2", FLAVOR, flavor).await;
        let response = server.review(&p).await;
        let (patched, typed) = apply(&p, &response);
        assert_eq!(
            patched["spec"]["containers"][0]["image"],
            json!(image),
            "{flavor}"
        );
        let annotations = &patched["metadata"]["annotations"];
        assert_eq!(
            annotations["arch.noe.adevinta.com/compatibility-artifact"],
            json!(artifact.digest)
        );
        assert_eq!(
            annotations["arch.noe.adevinta.com/compatibility-tag"],
            json!(image)
        );
        // Then the normal decision, on the new image: debian (multi-arch) and rocky get the
        // preferred arch, ubuntu (arm64 only) its one arch.
        match arch {
            Some(arch) => assert_eq!(
                harness::selector_arch(&typed).as_deref(),
                Some(arch),
                "{flavor}"
            ),
            None => assert_eq!(
                annotations["arch.noe.adevinta.com/platforms"],
                json!("arm64"),
                "{flavor}"
            ),
        }
        // Reinvocation of the patched pod: nothing more to select.
        let again = server.review(&patched).await;
        assert_eq!(again["allowed"], true);
        let (twice, _) = apply(&patched, &again);
        assert_eq!(twice["spec"]["containers"][0]["image"], json!(image));
    }

    // Mixed flavors: the first set in document order that fits a node wins, and the pod is
    // kept to that node's flavor.
    api.put_node(node("w1", "amd64", &[(FLAVOR, "strawberry")]));
    api.put_node(node("w2", "arm64", &[(FLAVOR, "chocolate")]));
    labelled(&server, "w1", FLAVOR, "strawberry").await;
    labelled(&server, "w2", FLAVOR, "chocolate").await;
    let response = server.review(&p).await;
    let (patched, _) = apply(&p, &response);
    assert_eq!(patched["spec"]["containers"][0]["image"], json!(ubuntu));
    let terms = &patched["spec"]["affinity"]["nodeAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
    assert_eq!(
        terms[0]["matchExpressions"][0],
        json!({"key": FLAVOR, "operator": "In", "values": ["chocolate"]}),
        "{patched}"
    );

    // What ocifit-k8s denies, denied with its cause.
    let mut no_ref = selecting_pod(&image_ref);
    no_ref["metadata"]["annotations"] = json!({});
    let denied = server.review(&no_ref).await;
    assert_eq!(denied["allowed"], false);
    assert!(
        denied["status"]["message"]
            .as_str()
            .unwrap()
            .contains("image-ref"),
        "{denied}"
    );
    let mut model = selecting_pod(&image_ref);
    model["metadata"]["annotations"]["oci.image.compatibilities.selection/model"] = json!("lammps");
    let denied = server.review(&model).await;
    assert!(
        denied["status"]["message"]
            .as_str()
            .unwrap()
            .contains("not supported"),
        "{denied}"
    );
    let missing = selecting_pod(&h.registry.reference("nothing-here", "v1"));
    let denied = server.review(&missing).await;
    assert_eq!(denied["allowed"], false);
    assert!(
        denied["status"]["message"]
            .as_str()
            .unwrap()
            .contains("nothing-here"),
        "{denied}"
    );
    let mut no_target = selecting_pod(&image_ref);
    no_target["spec"]["containers"][0]["image"] = json!(debian);
    let denied = server.review(&no_target).await;
    assert!(
        denied["status"]["message"]
            .as_str()
            .unwrap()
            .contains("placeholder:latest"),
        "{denied}"
    );
    let metrics = server.metrics().await;
    for line in [
        "noe_image_selection_total{mode=\"explicit\",outcome=\"patched\"} 4",
        "noe_image_selection_total{mode=\"explicit\",outcome=\"denied\"} 4",
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_nfd_artifact_constrains_the_pod() {
    let h = Harness::start().await;
    let f = &h.fixtures;
    let spec = b"version: v1alpha1\ncompatibilities:\n- weight: 20\n  rules:\n  - name: new kernel\n    matchFeatures:\n    - feature: kernel.version\n      matchExpressions:\n        major: {op: Gt, value: [\"5\"]}\n";
    let subject = (
        f.oci_index.media_type.as_str(),
        f.oci_index.digest.as_str(),
        0usize,
    );
    let artifact = compat_artifact(NFD_ARTIFACT_TYPE, NFD_SPEC_TYPE, spec, Some(subject), None);
    let pusher = h.registry.pusher().unwrap();
    attach(
        &pusher,
        &f.oci_index.repository,
        &f.oci_index.digest,
        &artifact,
        &[],
    )
    .await
    .unwrap();

    let api = KubeApi::start().await.unwrap();
    api.put_node(node("old", "amd64", &[(MAJOR, "5")]));
    api.put_node(node("new", "arm64", &[(MAJOR, "6")]));
    let server = server(&h, &api, &["--image-compatibility-all-namespaces"]).await;
    labelled(&server, "new", MAJOR, "6").await;
    labelled(&server, "old", MAJOR, "5").await;
    let p = pod(&[&f.oci_index.reference()]);
    let response = server.review(&p).await;
    let (patched, _) = apply(&p, &response);
    let affinity = &patched["spec"]["affinity"]["nodeAffinity"];
    let required = &affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        [0]["matchExpressions"];
    assert!(
        required
            .as_array()
            .unwrap()
            .contains(&json!({"key": MAJOR, "operator": "Gt", "values": ["5"]})),
        "{patched}"
    );
    assert_eq!(
        affinity["preferredDuringSchedulingIgnoredDuringExecution"][0],
        json!({"weight": 20, "preference": {"matchExpressions": [{"key": MAJOR, "operator": "Gt", "values": ["5"]}]}})
    );
    assert_eq!(
        patched["metadata"]["annotations"]["arch.noe.adevinta.com/compatibility-artifact"],
        json!(artifact.digest)
    );
    // An image without an artifact is left to the normal decision, without a warning.
    let plain = pod(&[&f.docker_list.reference()]);
    let response = server.review(&plain).await;
    let (patched, _) = apply(&plain, &response);
    assert!(patched["metadata"]["annotations"]
        .get("arch.noe.adevinta.com/compatibility-artifact")
        .is_none());
    assert!(response.get("warnings").is_none(), "{response}");
}

/// Attaches an NFD artifact needing the loaded kernel module `module` (a feature nfd-worker
/// never labels) to `image` (repository, media type, digest); returns the artifact's digest.
async fn attach_module_artifact(
    h: &Harness,
    (repository, media_type, digest): (&str, &str, &str),
    module: &str,
) -> String {
    let spec = format!(
        "version: v1alpha1\ncompatibilities:\n- rules:\n  - name: {module}\n    matchFeatures:\n    - feature: kernel.loadedmodule\n      matchExpressions:\n        {module}: {{op: Exists}}\n"
    );
    let artifact = compat_artifact(
        NFD_ARTIFACT_TYPE,
        NFD_SPEC_TYPE,
        spec.as_bytes(),
        Some((media_type, digest, 0usize)),
        None,
    );
    let pusher = h.registry.pusher().unwrap();
    attach(&pusher, repository, digest, &artifact, &[])
        .await
        .unwrap();
    artifact.digest
}

fn loaded_modules(modules: &[&str]) -> Value {
    let elements: serde_json::Map<String, Value> = modules
        .iter()
        .map(|m| ((*m).to_owned(), json!({})))
        .collect();
    json!({"flags": {"kernel.loadedmodule": {"elements": elements}},
        "attributes": {"kernel.version": {"elements": {"major": "6", "minor": "1"}}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_features_that_are_no_labels_pin_the_pod_by_name() {
    let h = Harness::start().await;
    let f = &h.fixtures;
    let kvm_artifact = attach_module_artifact(
        &h,
        (
            &f.oci_index.repository,
            &f.oci_index.media_type,
            &f.oci_index.digest,
        ),
        "kvm",
    )
    .await;
    attach_module_artifact(
        &h,
        (
            &f.oci_single.repository,
            &f.oci_single.media_type,
            &f.oci_single.digest,
        ),
        "nvidia",
    )
    .await;

    let api = KubeApi::start().await.unwrap();
    api.put_node(node("kvm1", "amd64", &[]));
    api.put_node(node("plain", "arm64", &[]));
    api.put_node(node("unreported", "arm64", &[]));
    api.put_node_feature(node_feature_json(
        "kvm1",
        loaded_modules(&["kvm", "kvm_intel"]),
    ));
    api.put_node_feature(node_feature_json("plain", loaded_modules(&["overlay"])));
    let server = server(
        &h,
        &api,
        &[
            "--image-compatibility-all-namespaces",
            "--watch-node-features",
        ],
    )
    .await;
    let features = server.running.node_feature_view().expect("a feature view");
    for _ in 0..1500 {
        if features.is_ready() && features.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        features.len(),
        2,
        "the NodeFeature objects were never listed"
    );

    // Only kvm1 reports the module; "unreported" has no NodeFeature (unknown: not a fit).
    let p = pod(&[&f.oci_index.reference()]);
    let response = server.review(&p).await;
    assert_eq!(response["allowed"], true, "{response}");
    let (patched, _) = apply(&p, &response);
    let terms = &patched["spec"]["affinity"]["nodeAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
    assert!(
        terms.as_array().unwrap().iter().all(|t| t["matchFields"]
            == json!([{"key": "metadata.name", "operator": "In", "values": ["kvm1"]}])),
        "{patched}"
    );
    let annotations = &patched["metadata"]["annotations"];
    assert_eq!(
        annotations["arch.noe.adevinta.com/compatibility-artifact"],
        json!(kvm_artifact)
    );
    assert!(
        annotations["arch.noe.adevinta.com/compatibility-pinned"]
            .as_str()
            .unwrap()
            .starts_with("1 nodes by name"),
        "{patched}"
    );

    // The module appears on "plain": the next pod may run on both.
    api.put_node_feature(node_feature_json("plain", loaded_modules(&["kvm"])));
    for _ in 0..3000 {
        if features.features("plain").is_some_and(|f| {
            f.get("kernel.loadedmodule")
                .is_some_and(|m| m.has_flag("kvm"))
        }) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let response = server.review(&p).await;
    let (patched, _) = apply(&p, &response);
    let both = &patched["spec"]["affinity"]["nodeAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchFields"]
        [0]["values"];
    assert_eq!(both, &json!(["kvm1", "plain"]), "{response}");

    // No node has the module the other image needs: a warning, the pod not constrained by it;
    // with the pod's `require`, a denial.
    let p = pod(&[&f.oci_single.reference()]);
    let response = server.review(&p).await;
    assert_eq!(response["allowed"], true, "{response}");
    let warnings = response["warnings"].to_string();
    assert!(
        warnings.contains("no compatibility set fits any of the 3 candidate nodes"),
        "{response}"
    );
    let (patched, _) = apply(&p, &response);
    assert!(patched["metadata"]["annotations"]
        .get("arch.noe.adevinta.com/compatibility-artifact")
        .is_none());
    let mut required = p.clone();
    required["metadata"]["annotations"] =
        json!({"arch.noe.adevinta.com/image-compatibility": "require"});
    let denied = server.review(&required).await;
    assert_eq!(denied["allowed"], false, "{denied}");
    assert!(
        denied["status"]["message"]
            .as_str()
            .unwrap()
            .contains("no compatibility set fits"),
        "{denied}"
    );
}

/// `noe explain --nodes`: the choice offline, from a `kubectl get nodes -o yaml` dump.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_shows_the_choice_offline() {
    let h = Harness::start().await;
    let f = &h.fixtures;
    let spec = json!({"compatibilities": [
        {"tag": f.oci_single.reference(), "rules": [{"matchFeatures": [{"matchExpressions": [
            {"op": "In", "key": FLAVOR, "value": ["chocolate"]}]}]}]}]});
    let artifact = compat_artifact(
        ORAS_DEFAULT_ARTIFACT_TYPE,
        OCIFIT_SPEC_TYPE,
        spec.to_string().as_bytes(),
        None,
        None,
    );
    let pusher = h.registry.pusher().unwrap();
    push_artifact(&pusher, "compat", &artifact, Some("v1"))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pod_file = dir.path().join("pod.json");
    let mut p = selecting_pod(&h.registry.reference("compat", "v1"));
    p["metadata"]["name"] = json!("demo");
    std::fs::write(&pod_file, p.to_string()).unwrap();
    let nodes_file = dir.path().join("nodes.json");
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        node("w1", "amd64", &[(FLAVOR, "vanilla")]), node("w2", "arm64", &[(FLAVOR, "chocolate")])]});
    std::fs::write(&nodes_file, list.to_string()).unwrap();
    let absent = h.cert_dir.path().join("absent");
    let args = vec![
        "explain".to_owned(),
        "-f".to_owned(),
        pod_file.display().to_string(),
        format!("--nodes={}", nodes_file.display()),
        "--output=json".to_owned(),
        format!("--insecure-registries={}", h.registry.host()),
        format!(
            "--allow-registry-cidrs={}",
            noe_test_support::LOOPBACK_CIDRS
        ),
        format!("--docker-config-path={}", absent.display()),
        format!("--containerd-config-path={}", absent.display()),
    ];
    let (code, stdout, stderr) = harness::run_noe(&args).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let explained: Value = serde_json::from_str(stdout.trim()).unwrap();
    let patch = explained["patch"].as_array().unwrap();
    assert!(
        patch.contains(&json!({"op": "replace", "path": "/spec/containers/0/image", "value": f.oci_single.reference()})),
        "{explained}"
    );
}

/// Hostile NFD artifacts in the real registry, inside every byte bound (256 KiB): a spec nested
/// 100,000 levels deep, the same nesting inside an expression's `value`, 32,768 copies of the
/// Unicode `\w`, and distinct patterns past the spec's budget of compiled regular expressions.
/// Four pods at once: each is answered within the admission deadline (the nesting fails at its
/// bound while it is read, the regular expressions at their budget, `\w` is compiled once), and
/// the health endpoint answers meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_nfd_specs_are_answered_within_the_deadline() {
    let h = Harness::start().await;
    let f = &h.fixtures;
    let nested = nfd_nested_spec(100_000, false);
    let in_value = nfd_nested_spec(100_000, true);
    let word = nfd_regex_spec(|_| "\\w".to_owned()).into_bytes();
    let distinct =
        nfd_regex_spec(|i| format!("\\w{}", char::from(b'a' + (i % 26) as u8))).into_bytes();
    let images = [&f.oci_index, &f.docker_list, &f.nested_index, &f.oci_single];
    let specs = [nested.as_bytes(), in_value.as_bytes(), &word, &distinct];
    let pusher = h.registry.pusher().unwrap();
    for (image, spec) in images.iter().zip(specs) {
        assert!(spec.len() < 256 * 1024, "{} bytes", spec.len());
        let subject = (image.media_type.as_str(), image.digest.as_str(), 0usize);
        let artifact = compat_artifact(NFD_ARTIFACT_TYPE, NFD_SPEC_TYPE, spec, Some(subject), None);
        attach(&pusher, &image.repository, &image.digest, &artifact, &[])
            .await
            .unwrap();
    }
    let api = KubeApi::start().await.unwrap();
    api.put_node(node("n1", "amd64", &[(MAJOR, "6")]));
    api.put_node(node("n2", "arm64", &[(MAJOR, "6")]));
    let server = server(
        &h,
        &api,
        &[
            "--image-compatibility-all-namespaces",
            "--admission-deadline=8s",
        ],
    )
    .await;
    let readyz = format!("http://{}/readyz", server.running.health_addr);
    let bound = Duration::from_secs(8);
    let reviews = images.iter().map(|image| {
        let p = pod(&[&image.reference()]);
        let server = &server;
        async move { tokio::time::timeout(bound, server.review(&p)).await }
    });
    let health = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        tokio::time::timeout(bound, reqwest::get(&readyz)).await
    };
    let (answers, health) = tokio::join!(futures::future::join_all(reviews), health);
    assert!(
        health.expect("/readyz within the deadline").is_ok(),
        "/readyz"
    );
    let warning = |i: usize| -> String {
        let answer = answers[i].as_ref().expect("answered within the deadline");
        assert_eq!(answer["allowed"], true, "{answer}");
        answer["warnings"].to_string()
    };
    assert!(
        warning(0).contains("levels of nesting (at most 64)"),
        "{}",
        warning(0)
    );
    assert!(
        warning(1).contains("levels of nesting (at most 64)"),
        "{}",
        warning(1)
    );
    // One `\w`, compiled once: the spec is read; no node has the features it asks for.
    assert!(
        warning(2).contains("no compatibility set fits"),
        "{}",
        warning(2)
    );
    assert!(
        warning(3).contains("bytes of compiled regular expressions"),
        "{}",
        warning(3)
    );
    assert!(
        noe_core::selection::rule::process_regex_bytes()
            <= noe_core::selection::limits::PROCESS_REGEX_BYTES
    );
}
