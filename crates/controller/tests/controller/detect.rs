//! Exec-format-error detection and the learned store end to end, against the scripted API server
//! through kube's real `Client`: a crash-looping pod on an arm64 node whose previous log says
//! `exec /app: exec format error` becomes one learned entry (server-side apply by `noe`), one
//! Event and an eviction; a `StartError` status needs no log read; a crash for another reason is
//! read once and learned from never; a log endpoint that hangs or never ends is cut off; two
//! replicas have one writer and the same corrections; hand-edited garbage is skipped, a `409`
//! retried; many pods of one lying image cost a few reads.
//!
//! Waits are bounded polls for a condition (no timed assertions).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use noe_controller::{
    Config, Controllers, Deps, DetectConfig, LearnedConfig, Metrics, Platform, PodPlatforms,
    Remediate, Running, Support, Timings,
};
use noe_core::truth::Corrections as _;
use noe_test_support::{
    crash_loop, lease_json, node_json, Crash, Fault, KubeApi, PodFixture, PodLog, RecordedRequest,
    Resource, APPLY_PATCH,
};
use serde_json::{json, Value};

use super::support::{metric, now_rfc3339, poll, short_lease};

const NOE: &str = "noe";
const STORE: &str = "noe-learned-platforms";
const DIGEST: &str = "sha256:aaaa1111aaaa1111aaaa1111aaaa1111aaaa1111aaaa1111aaaa1111aaaa1111";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/shop/events";
const STORE_PATH: &str = "/api/v1/namespaces/noe/configmaps/noe-learned-platforms";

fn image_id() -> String {
    format!("registry.example/app@{DIGEST}")
}

fn platforms() -> Arc<dyn PodPlatforms> {
    let both = Support::Only(
        [
            Platform::new("linux", "amd64", None),
            Platform::new("linux", "arm64", None),
        ]
        .into(),
    );
    Arc::new(HashMap::from([
        ("app:1".to_owned(), both),
        (
            "arm-sidecar:1".to_owned(),
            Support::Only([Platform::new("linux", "arm64", None)].into()),
        ),
    ]))
}

fn config(mode: Remediate) -> Config {
    let short = Duration::from_millis(100);
    Config {
        remediate: mode,
        remediate_rate_per_minute: 100,
        detect: Some(DetectConfig {
            log_reads_per_second: 50,
            log_deadline: Duration::from_millis(500),
        }),
        learned: Some(LearnedConfig {
            namespace: NOE.into(),
            name: STORE.into(),
            max_entries: 1000,
        }),
        timings: Timings {
            node_wait: short,
            lookup_retry: short,
            blocked_retry: short,
            error_retry: short,
            taint_resync: Duration::from_secs(60),
            recheck: Duration::from_secs(3600),
        },
        ..Config::default()
    }
}

/// The cluster: an amd64 and an arm64 node, the store's ConfigMap as the chart creates it.
async fn cluster() -> KubeApi {
    let api = KubeApi::start().await.unwrap();
    api.put_node(node_json("amd-1", "amd64", "linux"));
    api.put_node(node_json("arm-1", "arm64", "linux"));
    api.put(Resource::ConfigMaps, NOE, store_json(json!({})));
    api
}

fn store_json(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": STORE, "namespace": NOE, "labels": {"app.kubernetes.io/name": "noe"}},
           "data": data})
}

fn start(api: &KubeApi, config: Config) -> (Running, prometheus::Registry) {
    let registry = prometheus::Registry::new();
    let metrics = Metrics::new(&registry, 10).unwrap();
    let deps = Deps {
        platforms: Some(platforms()),
    };
    let running = Controllers::start(api.client().unwrap(), config, deps, metrics).unwrap();
    (running, registry)
}

/// A pod of `app:1` crash-looping on `node` after `restarts` restarts, its previous log `log`.
fn crashing(api: &KubeApi, name: &str, node: &str, restarts: u32, log: Option<PodLog>) -> Value {
    let mut pod = PodFixture::new("shop", name, node, &["app:1"]).json();
    // A status update of a pod that exists keeps its UID.
    if let Some(existing) = api.get(Resource::Pods, "shop", name) {
        pod["metadata"]["uid"] = existing["metadata"]["uid"].clone();
    }
    crash_loop(&mut pod, 0, &Crash::new(&image_id(), restarts));
    if let Some(log) = log {
        api.set_log("shop", name, "c0", true, log);
    }
    api.put_pod(pod.clone());
    api.get(Resource::Pods, "shop", name).unwrap()
}

fn runc_log() -> PodLog {
    PodLog::Text(b"exec /app: exec format error\n".to_vec())
}

async fn eventually(what: &str, condition: impl FnMut() -> bool) {
    poll(what, 1000, condition).await;
}

fn requests(api: &KubeApi, test: impl Fn(&RecordedRequest) -> bool) -> Vec<RecordedRequest> {
    api.requests().into_iter().filter(|r| test(r)).collect()
}

fn log_reads(api: &KubeApi) -> Vec<RecordedRequest> {
    requests(api, |r| r.method == "GET" && r.path.ends_with("/log"))
}

fn applies(api: &KubeApi) -> Vec<RecordedRequest> {
    requests(api, |r| {
        r.method == "PATCH"
            && r.path == STORE_PATH
            && r.content_type.as_deref() == Some(APPLY_PATCH)
    })
}

fn events(api: &KubeApi) -> Vec<RecordedRequest> {
    requests(api, |r| r.method == "POST" && r.path == EVENTS)
}

fn stored_entries(api: &KubeApi) -> serde_json::Map<String, Value> {
    api.get(Resource::ConfigMaps, NOE, STORE).unwrap()["data"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_crash_loop_with_exec_format_error_in_its_log_is_learned_reported_and_evicted() {
    let api = cluster().await;
    let pod = crashing(&api, "web", "arm-1", 1, Some(runc_log()));
    let (running, registry) = start(&api, config(Remediate::Evict));

    eventually("evicted", || {
        api.get(Resource::Pods, "shop", "web").is_none()
    })
    .await;
    // One log read, of the previous run, bounded.
    let reads = log_reads(&api);
    assert_eq!(reads.len(), 1, "{reads:#?}");
    assert_eq!(reads[0].path, "/api/v1/namespaces/shop/pods/web/log");
    assert_eq!(reads[0].query_param("container").as_deref(), Some("c0"));
    assert_eq!(reads[0].query_param("previous").as_deref(), Some("true"));
    assert_eq!(reads[0].query_param("limitBytes").as_deref(), Some("2048"));
    // One entry, applied by noe with server-side apply.
    let written = applies(&api);
    assert_eq!(written.len(), 1);
    assert_eq!(
        written[0].query_param("fieldManager").as_deref(),
        Some("noe")
    );
    assert_eq!(written[0].query_param("force").as_deref(), Some("true"));
    let data = stored_entries(&api);
    assert_eq!(data.len(), 1);
    let entry: Value =
        serde_json::from_str(data.values().next().unwrap().as_str().unwrap()).unwrap();
    assert_eq!(
        entry,
        json!({"image": "app:1", "digest": DIGEST, "platform": "linux/arm64",
               "source": "exec-format-error",
               "evidence": {"namespace": "shop", "pod": "web", "container": "c0", "node": "arm-1",
                            "message": "exec /app: exec format error", "time": "2026-11-01T09:00:00Z"}})
    );
    let stored = api.get(Resource::ConfigMaps, NOE, STORE).unwrap();
    let managers: Vec<&Value> = stored["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["manager"])
        .collect();
    assert_eq!(managers, [&json!("noe")], "{stored}");
    assert_eq!(
        stored["metadata"]["labels"]["app.kubernetes.io/name"], "noe",
        "the chart's labels stay"
    );
    // One Event, naming what was seen, learned and done.
    let written = events(&api);
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].body["reason"], "ExecFormatError");
    assert_eq!(written[0].body["type"], "Warning");
    assert_eq!(written[0].body["action"], "Evict");
    assert_eq!(written[0].body["regarding"]["name"], "web");
    assert_eq!(
        written[0].body["note"],
        format!("container c0 (image app:1) cannot run on node arm-1 (linux/arm64): its previous log says \"exec /app: exec format error\"; learned: {DIGEST} does not run on linux/arm64; evicting")
    );
    let evictions = requests(&api, |r| r.path.ends_with("/eviction"));
    assert_eq!(evictions.len(), 1);
    assert_eq!(
        evictions[0].body["deleteOptions"]["preconditions"]["uid"],
        pod["metadata"]["uid"]
    );
    // Every replica's view has it.
    let view = running.learned_view().unwrap();
    eventually("the view", || !view.for_digest(DIGEST).is_empty()).await;
    assert!(view.for_digest(DIGEST)[0]
        .evidence
        .contains("pod shop/web container c0 on node arm-1"));
    assert_eq!(
        metric(
            &registry,
            "noe_exec_format_errors_total",
            &[("source", "log")]
        ),
        1.0
    );
    assert_eq!(
        metric(
            &registry,
            "noe_exec_format_log_reads_total",
            &[("result", "matched")]
        ),
        1.0
    );
    assert_eq!(metric(&registry, "noe_learned_corrections", &[]), 1.0);
    running.shutdown().await;
}

#[tokio::test]
async fn each_restart_is_read_once_and_a_reported_container_never_again() {
    let api = cluster().await;
    // Report mode: the pod stays and keeps crashing.
    crashing(&api, "web", "arm-1", 1, Some(runc_log()));
    let (running, registry) = start(&api, config(Remediate::Report));
    eventually("the Event", || events(&api).len() == 1).await;
    assert_eq!(events(&api)[0].body["action"], "Report");
    // More status updates and restarts: nothing more to read, learn or tell.
    for restarts in [1, 2, 3] {
        crashing(&api, "web", "arm-1", restarts, Some(runc_log()));
    }
    // A second pod of the same image on arm64 is explained by what was learned: no read.
    crashing(&api, "api", "arm-1", 1, Some(runc_log()));
    eventually("the second pod's Event", || events(&api).len() == 2).await;
    let second = &events(&api)[1];
    assert_eq!(second.body["regarding"]["name"], "api");
    assert_eq!(
        second.body["note"],
        format!("container c0 (image app:1) cannot run on node arm-1 (linux/arm64): it crashed at once (exited with code 1 after 0s); known: {DIGEST} does not run on linux/arm64")
    );
    assert_eq!(log_reads(&api).len(), 1);
    assert_eq!(applies(&api).len(), 1);
    eventually("counted", || {
        metric(
            &registry,
            "noe_exec_format_errors_total",
            &[("source", "learned")],
        ) == 1.0
    })
    .await;
    running.shutdown().await;
}

#[tokio::test]
async fn a_start_error_status_is_learned_without_reading_a_log() {
    let api = cluster().await;
    let mut pod = PodFixture::new("shop", "job", "arm-1", &["app:1"]).json();
    let mut crash = Crash::new(&image_id(), 0);
    crash.reason = "StartError".into();
    crash.exit_code = 128;
    crash.message = "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: \"/app\": exec format error: unknown".into();
    crash_loop(&mut pod, 0, &crash);
    // A spec that overrides the program does not matter: the runtime said it.
    pod["spec"]["containers"][0]["command"] = json!(["/app", "--serve"]);
    api.put_pod(pod);
    let (running, registry) = start(&api, config(Remediate::Report));
    eventually("learned", || stored_entries(&api).len() == 1).await;
    eventually("the Event", || events(&api).len() == 1).await;
    assert!(events(&api)[0].body["note"]
        .as_str()
        .unwrap()
        .contains("its status says \"failed to create containerd task"));
    assert!(log_reads(&api).is_empty(), "no log read");
    eventually("counted", || {
        metric(
            &registry,
            "noe_exec_format_errors_total",
            &[("source", "status")],
        ) == 1.0
    })
    .await;
    running.shutdown().await;
}

#[tokio::test]
async fn a_crash_for_another_reason_is_read_once_and_learned_from_never() {
    let api = cluster().await;
    crashing(
        &api,
        "web",
        "arm-1",
        1,
        Some(PodLog::Text(
            b"panic: open /etc/app/config.yaml: no such file\n".to_vec(),
        )),
    );
    let (running, registry) = start(&api, config(Remediate::Evict));
    eventually("one read", || {
        metric(
            &registry,
            "noe_exec_format_log_reads_total",
            &[("result", "no_match")],
        ) == 1.0
    })
    .await;
    // The same restart, seen again: no second read.
    crashing(&api, "web", "arm-1", 1, None);
    // A container without a previous run: the kubelet's 400, counted as not found.
    crashing(&api, "fresh", "arm-1", 1, None);
    eventually("the second pod's read", || {
        metric(
            &registry,
            "noe_exec_format_log_reads_total",
            &[("result", "not_found")],
        ) == 1.0
    })
    .await;
    assert_eq!(log_reads(&api).len(), 2);
    assert!(applies(&api).is_empty(), "nothing learned");
    assert!(events(&api).is_empty());
    assert!(
        api.get(Resource::Pods, "shop", "web").is_some(),
        "not evicted"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn output_of_an_overridden_program_is_reported_not_learned() {
    let api = cluster().await;
    let mut pod = PodFixture::new("shop", "web", "arm-1", &["app:1"]).json();
    crash_loop(&mut pod, 0, &Crash::new(&image_id(), 1));
    pod["spec"]["containers"][0]["args"] = json!(["sh", "-c", "echo exec format error; exit 1"]);
    api.set_log("shop", "web", "c0", true, runc_log());
    api.put_pod(pod);
    let (running, _) = start(&api, config(Remediate::Evict));
    eventually("the Event", || events(&api).len() == 1).await;
    assert!(events(&api)[0].body["note"].as_str().unwrap().ends_with(
        "; not learned: the container sets command or args, so its output is no evidence"
    ));
    assert!(applies(&api).is_empty());
    assert!(requests(&api, |r| r.path.ends_with("/eviction")).is_empty());
    running.shutdown().await;
}

#[tokio::test]
async fn a_pod_whose_other_images_run_nowhere_else_is_left_in_place() {
    let api = cluster().await;
    let mut pod = PodFixture::new("shop", "web", "arm-1", &["app:1", "arm-sidecar:1"]).json();
    crash_loop(&mut pod, 0, &Crash::new(&image_id(), 1));
    api.set_log("shop", "web", "c0", true, runc_log());
    api.put_pod(pod);
    let (running, _) = start(&api, config(Remediate::Evict));
    eventually("the Event", || events(&api).len() == 1).await;
    let note = events(&api)[0].body["note"].as_str().unwrap().to_owned();
    assert!(
        note.ends_with("; not evicted: no platform of the cluster's nodes (linux/amd64, linux/arm64) runs all its images: app:1 [linux/amd64] arm-sidecar:1 [linux/arm64]"),
        "{note}"
    );
    assert_eq!(stored_entries(&api).len(), 1, "learned all the same");
    assert!(api.get(Resource::Pods, "shop", "web").is_some());
    running.shutdown().await;
}

#[tokio::test]
async fn no_digest_or_no_node_gives_an_event_and_no_learning() {
    let api = cluster().await;
    let mut local = PodFixture::new("shop", "local", "arm-1", &["app:1"]).json();
    // A bare image ID: the image was loaded on the node, not pulled by digest.
    crash_loop(&mut local, 0, &Crash::new(DIGEST, 1));
    api.set_log("shop", "local", "c0", true, runc_log());
    api.put_pod(local);
    let mut lost = PodFixture::new("shop", "lost", "gone-1", &["app:1"]).json();
    crash_loop(&mut lost, 0, &Crash::new(&image_id(), 1));
    api.set_log("shop", "lost", "c0", true, runc_log());
    api.put_pod(lost);
    let (running, _) = start(&api, config(Remediate::Evict));
    eventually("two Events", || events(&api).len() == 2).await;
    let notes: Vec<String> = events(&api)
        .iter()
        .map(|e| e.body["note"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.ends_with("; not learned: its imageID names no registry digest")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.ends_with("; not learned: the node is not known (no kubernetes.io/arch)")),
        "{notes:?}"
    );
    assert!(applies(&api).is_empty());
    assert!(requests(&api, |r| r.path.ends_with("/eviction")).is_empty());
    running.shutdown().await;
}

#[tokio::test]
async fn hanging_and_endless_log_endpoints_are_cut_off() {
    let api = cluster().await;
    crashing(&api, "hangs", "arm-1", 1, Some(PodLog::Hang));
    crashing(&api, "endless", "arm-1", 1, Some(PodLog::Endless));
    let (running, registry) = start(&api, config(Remediate::Report));
    eventually("the hung read timed out", || {
        metric(
            &registry,
            "noe_exec_format_log_reads_total",
            &[("result", "timeout")],
        ) == 1.0
    })
    .await;
    eventually("the endless read stopped", || {
        metric(
            &registry,
            "noe_exec_format_log_reads_total",
            &[("result", "no_match")],
        ) == 1.0
    })
    .await;
    assert!(applies(&api).is_empty());
    running.shutdown().await;
}

#[tokio::test]
async fn two_replicas_have_one_writer_and_the_same_corrections() {
    let api = cluster().await;
    crashing(&api, "web", "arm-1", 1, Some(runc_log()));
    let elected = |identity: &str| Config {
        leader_election: Some(noe_controller::LeaseConfig {
            identity: identity.to_owned(),
            ..short_lease()
        }),
        ..config(Remediate::Report)
    };
    // Replica b holds a fresh Lease: replica a waits.
    api.put(
        Resource::Leases,
        "noe",
        lease_json("noe-controller", "replica-b", &now_rfc3339(), 60),
    );
    let (a, _) = start(&api, elected("replica-a"));
    let (b, _) = start(&api, elected("replica-b"));
    eventually("b learned", || stored_entries(&api).len() == 1).await;
    let (view_a, view_b) = (a.learned_view().unwrap(), b.learned_view().unwrap());
    eventually("both apply it", || {
        !view_a.for_digest(DIGEST).is_empty() && !view_b.for_digest(DIGEST).is_empty()
    })
    .await;
    eventually("the Event", || events(&api).len() == 1).await;
    assert!(b.leadership().is_leader());
    assert!(!a.leadership().is_leader());
    assert_eq!(applies(&api).len(), 1, "one writer");
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn what_was_learned_survives_a_restart_and_garbage_is_skipped() {
    let api = cluster().await;
    crashing(&api, "web", "arm-1", 1, Some(runc_log()));
    let (first, _) = start(&api, config(Remediate::Report));
    eventually("learned", || stored_entries(&api).len() == 1).await;
    first.shutdown().await;
    // A person's edits: garbage beside the entry.
    let mut stored = api.get(Resource::ConfigMaps, NOE, STORE).unwrap();
    stored["data"]["by-hand"] = json!("{\"digest\": 42}");
    stored["data"]["0123456789abcdef0123456789abcdef"] = json!("\u{1b}[31mnot json");
    api.put(Resource::ConfigMaps, NOE, stored);
    let (second, registry) = start(&api, config(Remediate::Report));
    let view = second.learned_view().unwrap();
    eventually("read back", || !view.for_digest(DIGEST).is_empty()).await;
    assert_eq!(view.snapshot().garbage_count, 2);
    assert_eq!(metric(&registry, "noe_learned_invalid_entries", &[]), 2.0);
    assert_eq!(metric(&registry, "noe_learned_corrections", &[]), 1.0);
    second.shutdown().await;
}

#[tokio::test]
async fn a_conflicting_write_is_retried_on_the_fresh_object() {
    let api = cluster().await;
    api.fault(Fault::new("PATCH", STORE_PATH, 409).message("Operation cannot be fulfilled on configmaps \"noe-learned-platforms\": the object has been modified; please apply your changes to the latest version and try again"));
    crashing(&api, "web", "arm-1", 1, Some(runc_log()));
    let (running, registry) = start(&api, config(Remediate::Report));
    eventually("learned", || {
        metric(
            &registry,
            "noe_learned_writes_total",
            &[("result", "applied")],
        ) == 1.0
    })
    .await;
    assert_eq!(stored_entries(&api).len(), 1);
    assert_eq!(
        metric(
            &registry,
            "noe_learned_writes_total",
            &[("result", "conflict")]
        ),
        1.0
    );
    assert!(
        requests(&api, |r| r.method == "GET" && r.path == STORE_PATH).len() == 1,
        "read fresh"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn many_pods_of_one_lying_image_cost_a_few_reads_and_one_entry() {
    let api = cluster().await;
    for n in 0..300 {
        crashing(&api, &format!("web-{n}"), "arm-1", 1, Some(runc_log()));
    }
    let mut config = config(Remediate::Report);
    config.detect = Some(DetectConfig {
        log_reads_per_second: 5,
        log_deadline: Duration::from_secs(2),
    });
    let (running, registry) = start(&api, config);
    eventually("every pod reported", || events(&api).len() == 300).await;
    let reads = log_reads(&api).len();
    assert!(
        reads <= 10,
        "{reads} reads: what was learned explains the others"
    );
    assert_eq!(stored_entries(&api).len(), 1);
    assert_eq!(applies(&api).len(), 1);
    eventually("every detection counted", || {
        metric(&registry, "noe_exec_format_errors_total", &[]) == 300.0
    })
    .await;
    running.shutdown().await;
}

#[tokio::test]
async fn a_verification_mismatch_is_learned_by_the_leader_only() {
    use noe_core::truth::{Correction, Source};
    let api = cluster().await;
    let elected = |identity: &str| Config {
        leader_election: Some(noe_controller::LeaseConfig {
            identity: identity.to_owned(),
            ..short_lease()
        }),
        ..config(Remediate::Off)
    };
    api.put(
        Resource::Leases,
        "noe",
        lease_json("noe-controller", "replica-b", &now_rfc3339(), 60),
    );
    let (mut a, _) = start(&api, elected("replica-a"));
    let (mut b, _) = start(&api, elected("replica-b"));
    eventually("b leads", || b.leadership().is_leader()).await;
    let (feed_a, rx_a) = tokio::sync::broadcast::channel(16);
    let (feed_b, rx_b) = tokio::sync::broadcast::channel(16);
    a.learn_verifications(rx_a);
    b.learn_verifications(rx_b);
    let mismatch = Correction::new(
        DIGEST,
        Platform::new("linux", "arm64", None),
        Source::Verification,
        "/app is an x86-64 ELF (EM_X86_64)",
    );
    let other = Correction::new(
        DIGEST,
        Platform::new("linux", "ppc64le", None),
        Source::Verification,
        "/app is an x86-64 ELF (EM_X86_64)",
    );
    // The follower drops what it finds; the leader learns it.
    feed_a.send(other).unwrap();
    feed_b.send(mismatch).unwrap();
    eventually("learned", || stored_entries(&api).len() == 1).await;
    let (_, value) = stored_entries(&api).into_iter().next().unwrap();
    let entry: Value = serde_json::from_str(value.as_str().unwrap()).unwrap();
    assert_eq!(entry["source"], "verification");
    assert_eq!(entry["platform"], "linux/arm64");
    assert_eq!(
        entry["evidence"]["message"],
        "/app is an x86-64 ELF (EM_X86_64)"
    );
    let view_a = a.learned_view().unwrap();
    eventually("every replica applies it", || {
        view_a.for_digest(DIGEST).len() == 1
    })
    .await;
    assert_eq!(applies(&api).len(), 1, "one writer");
    a.shutdown().await;
    b.shutdown().await;
}

/// A stop while the pod watch's first list is still in flight ends the controllers: the
/// remediation applier (held until its store is ready) and detection alike. Bounded generously:
/// what is asserted is that shutdown completes at all.
#[tokio::test]
async fn a_stop_while_the_first_pod_list_is_held_back_ends_the_pod_watch() {
    for mode in [Remediate::Evict, Remediate::Off] {
        let api = cluster().await;
        crashing(&api, "web", "arm-1", 1, Some(runc_log()));
        let held = api.hold("GET", "/api/v1/pods");
        let (running, _registry) = start(&api, config(mode));
        eventually("the first pod list held back", || held.waiting() > 0).await;
        tokio::time::timeout(Duration::from_secs(30), running.shutdown())
            .await
            .unwrap_or_else(|_| panic!("{mode:?}: shutdown did not end"));
        assert!(
            requests(&api, |r| r.path == "/api/v1/pods").is_empty(),
            "{mode:?}: the held list was never answered"
        );
        held.release();
    }
}
