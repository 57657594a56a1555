//! Property tests of AdmissionReview → response through the real `Admission` (lookups faked):
//! any body gets a well-formed AdmissionReview (never a panic), in the version asked, echoing
//! the uid; a patch always applies to the pod it was computed for; and admitting the patched
//! pod again (reinvocation) changes nothing more.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use futures::future::BoxFuture;
use noe_core::decide::Policy;
use noe_core::Platform;
use noe_webhook::admission::Admission;
use noe_webhook::metrics::Metrics;
use noe_webhook::resolve::{Anonymous, LookupError, PlatformLookup, PodCredentials, Resolve};
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use serde_json::{json, Value};

/// Platforms from the image name: `arm` → arm64 only, `amd` → amd64 only, `s390` → s390x only,
/// `fail` → a failed lookup, anything else → amd64 and arm64.
struct NameLookup;

impl PlatformLookup for NameLookup {
    fn lookup<'a>(
        &'a self,
        image: &'a str,
        _scope: Option<noe_registry::cache::Scope>,
        _credentials: &'a PodCredentials<'a>,
    ) -> BoxFuture<'a, Result<Arc<[Platform]>, LookupError>> {
        Box::pin(async move {
            let linux = |arch: &str| Platform::new("linux", arch, None);
            let platforms: Vec<Platform> = if image.contains("fail") {
                return Err(LookupError::Registry {
                    kind: noe_core::decide::LookupKind::Registry,
                    message: format!("{image}: registry said no"),
                    registry: "other".into(),
                });
            } else if image.contains("arm") {
                vec![linux("arm64")]
            } else if image.contains("amd") {
                vec![linux("amd64")]
            } else if image.contains("s390") {
                vec![linux("s390x")]
            } else {
                vec![linux("amd64"), linux("arm64")]
            };
            Ok(platforms.into())
        })
    }
}

fn admission(policy: Policy) -> Admission {
    Admission::new(
        Resolve::new(
            Arc::new(NameLookup),
            Arc::new(Anonymous),
            Duration::from_secs(2),
        ),
        policy,
        Metrics::register(&prometheus::Registry::new()).unwrap(),
    )
}

fn config() -> ProptestConfig {
    ProptestConfig {
        // PROPTEST_CASES raises it for longer runs (docs/benchmarks.md).
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(128),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The invariants of every answer.
fn well_formed(
    answer: &Value,
    expected_version: &str,
    expected_uid: &str,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        answer["kind"].as_str(),
        Some("AdmissionReview"),
        "{}",
        answer
    );
    prop_assert_eq!(
        answer["apiVersion"].as_str(),
        Some(expected_version),
        "{}",
        answer
    );
    let response = &answer["response"];
    prop_assert_eq!(response["uid"].as_str(), Some(expected_uid), "{}", answer);
    prop_assert!(response["allowed"].is_boolean(), "{}", answer);
    if response["allowed"] == false {
        prop_assert!(
            response["status"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{}",
            answer
        );
    }
    if let Some(patch) = response.get("patch") {
        prop_assert_eq!(response["patchType"].as_str(), Some("JSONPatch"));
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(patch.as_str().unwrap_or_default())
            .map_err(|e| TestCaseError::fail(format!("patch is not base64: {e}")))?;
        let ops: Value = serde_json::from_slice(&bytes)
            .map_err(|e| TestCaseError::fail(format!("patch is not JSON: {e}")))?;
        prop_assert!(ops.as_array().is_some_and(|a| !a.is_empty()), "{}", ops);
    }
    Ok(())
}

fn patch_of(answer: &Value) -> Option<json_patch::Patch> {
    let patch = answer["response"].get("patch")?.as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

// ---------- generated inputs ----------

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-zA-Z0-9 ./:-]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map(
                prop_oneof![
                    Just("apiVersion".to_owned()),
                    Just("kind".to_owned()),
                    Just("request".to_owned()),
                    Just("uid".to_owned()),
                    Just("object".to_owned()),
                    Just("operation".to_owned()),
                    Just("spec".to_owned()),
                    Just("containers".to_owned()),
                    Just("image".to_owned()),
                    "[a-z]{1,8}",
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn image() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("nginx:1.27".to_owned()),
        Just("ghcr.io/acme/arm-only:1".to_owned()),
        Just("quay.io/acme/amd-only:2".to_owned()),
        Just("registry.corp:5000/s390-thing".to_owned()),
        Just("example.com/fail/me:3".to_owned()),
        Just("".to_owned()),
        Just("Not A Reference!".to_owned()),
    ]
}

fn node_selector() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        Just(Some(Value::Null)),
        Just(Some(json!({}))),
        Just(Some(json!({"disk": "ssd"}))),
        Just(Some(json!({"kubernetes.io/arch": "arm64"}))),
        Just(Some(json!({"kubernetes.io/os": "linux"}))),
    ]
}

fn affinity() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        Just(Some(Value::Null)),
        Just(Some(json!({}))),
        Just(Some(json!({"nodeAffinity": null}))),
        Just(Some(
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                                  {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}]}}})
        )),
        Just(Some(
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{}]}}})
        )),
        Just(Some(
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": null}]}}})
        )),
        Just(Some(
            json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}}]}})
        )),
        Just(Some(json!({"podAntiAffinity": {}}))),
    ]
}

fn pod() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(image(), 0..4),
        prop::collection::vec(image(), 0..2),
        node_selector(),
        affinity(),
        prop::option::of(prop_oneof![
            Just(json!({"app": "x"})),
            Just(json!({"arch.noe.adevinta.com/preferred": "arm64"})),
            Just(json!({"arch.noe.adevinta.com/preferred": "s390x"})),
            Just(json!({"arch.noe.adevinta.com/skip": "true"})),
        ]),
        prop::option::of(prop_oneof![
            Just(Value::Null),
            Just(json!({})),
            Just(json!({"a/b~c": "1"}))
        ]),
        prop::option::of(prop_oneof![
            Just(Value::Null),
            Just(json!([])),
            Just(json!([{"key": "k", "operator": "Exists"}]))
        ]),
        any::<bool>(),
    )
        .prop_map(
            |(
                containers,
                inits,
                selector,
                affinity,
                labels,
                annotations,
                tolerations,
                node_name,
            )| {
                let list = |images: &[String], prefix: &str| -> Value {
                    images
                        .iter()
                        .enumerate()
                        .map(|(i, image)| json!({"name": format!("{prefix}{i}"), "image": image}))
                        .collect()
                };
                let mut spec = json!({"containers": list(&containers, "c")});
                if !inits.is_empty() {
                    spec["initContainers"] = list(&inits, "i");
                }
                if let Some(selector) = selector {
                    spec["nodeSelector"] = selector;
                }
                if let Some(affinity) = affinity {
                    spec["affinity"] = affinity;
                }
                if let Some(tolerations) = tolerations {
                    spec["tolerations"] = tolerations;
                }
                if node_name {
                    spec["nodeName"] = json!("node-1");
                }
                let mut metadata = json!({"generateName": "web-", "namespace": "ns"});
                if let Some(labels) = labels {
                    metadata["labels"] = labels;
                }
                if let Some(annotations) = annotations {
                    metadata["annotations"] = annotations;
                }
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
            },
        )
}

/// The answer's JSON; an answer that is not JSON fails the property.
fn reply(bytes: bytes::Bytes) -> Value {
    serde_json::from_slice(&bytes).expect("the answer is JSON")
}

fn review(version: &str, uid: &str, object: &Value) -> Value {
    noe_test_support::admission_review(version, "CREATE", "ns", uid, object)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_bytes_get_a_well_formed_review(body in prop::collection::vec(any::<u8>(), 0..200)) {
        let admission = admission(Policy::default());
        let answer = reply(runtime().block_on(admission.review(&body)));
        let uid = answer["response"]["uid"].as_str().unwrap_or("<none>").to_owned();
        well_formed(&answer, "admission.k8s.io/v1", &uid)?;
    }

    #[test]
    fn any_json_gets_a_well_formed_review(value in arbitrary_json()) {
        let admission = admission(Policy::default());
        let body = serde_json::to_vec(&value).unwrap();
        let answer = reply(runtime().block_on(admission.review(&body)));
        let version = if value["apiVersion"] == "admission.k8s.io/v1beta1" {
            "admission.k8s.io/v1beta1"
        } else {
            "admission.k8s.io/v1"
        };
        let uid = value["request"]["uid"].as_str().unwrap_or_default().to_owned();
        let answered_uid = answer["response"]["uid"].as_str().unwrap_or_default().to_owned();
        // Reviews that do not parse still echo a string uid when there is one.
        if !uid.is_empty() {
            prop_assert_eq!(&answered_uid, &uid);
        }
        well_formed(&answer, version, &answered_uid)?;
    }

    #[test]
    fn pod_reviews_patch_consistently(
        pod in pod(),
        v1beta1 in any::<bool>(),
        preferred_mode in any::<bool>(),
        uid in "[a-f0-9-]{1,36}",
    ) {
        let policy = Policy {
            preference_mode: if preferred_mode {
                noe_core::decide::PreferenceMode::Preferred
            } else {
                noe_core::decide::PreferenceMode::Required
            },
            ..Policy::default()
        };
        let admission = admission(policy);
        let version = if v1beta1 { "admission.k8s.io/v1beta1" } else { "admission.k8s.io/v1" };
        let rt = runtime();
        let body = serde_json::to_vec(&review(version, &uid, &pod)).unwrap();
        let answer = reply(rt.block_on(admission.review(&body)));
        well_formed(&answer, version, &uid)?;
        let Some(patch) = patch_of(&answer) else {
            return Ok(());
        };
        prop_assert!(answer["response"]["allowed"] == true, "{}", answer);
        let mut patched = pod.clone();
        json_patch::patch(&mut patched, &patch)
            .map_err(|e| TestCaseError::fail(format!("patch does not apply: {e}\npod: {pod}\npatch: {answer}")))?;
        prop_assert!(patched["metadata"]["annotations"]["arch.noe.adevinta.com/platforms"].is_string(), "{}", patched);
        // Reinvocation: the patched pod is already what we want.
        let again = reply(rt.block_on(admission.review(&serde_json::to_vec(&review(version, &uid, &patched)).unwrap())));
        well_formed(&again, version, &uid)?;
        if let Some(second) = patch_of(&again) {
            let mut twice = patched.clone();
            json_patch::patch(&mut twice, &second)
                .map_err(|e| TestCaseError::fail(format!("second patch does not apply: {e}")))?;
            prop_assert_eq!(&twice, &patched, "reinvocation changed the pod again\npod: {}\nfirst: {}\nsecond: {}", pod, answer, again);
        }
    }
}

proptest! {
    #![proptest_config(config())]

    /// A pod already decided is answered from the decision memo (the same object bytes in the
    /// same namespace): byte for byte what a fresh decision answers, for the new request's uid
    /// and version.
    #[test]
    fn a_remembered_pod_is_answered_as_a_fresh_decision_would(
        pod in pod(),
        first_v1beta1 in any::<bool>(),
        second_v1beta1 in any::<bool>(),
        uid in "[a-f0-9-]{1,36}",
    ) {
        let rt = runtime();
        let version = |v1beta1: bool| if v1beta1 { "admission.k8s.io/v1beta1" } else { "admission.k8s.io/v1" };
        let registry = prometheus::Registry::new();
        let remembering = Admission::new(
            Resolve::new(Arc::new(NameLookup), Arc::new(Anonymous), Duration::from_secs(2)),
            Policy::default(),
            Metrics::register(&registry).unwrap(),
        );
        let fresh = admission(Policy::default()).without_decision_memo();
        let first = serde_json::to_vec(&review(version(first_v1beta1), "first", &pod)).unwrap();
        // Seen twice: remembered.
        rt.block_on(remembering.review(&first));
        rt.block_on(remembering.review(&first));
        let second = serde_json::to_vec(&review(version(second_v1beta1), &uid, &pod)).unwrap();
        let remembered = rt.block_on(remembering.review(&second));
        let decided = rt.block_on(fresh.review(&second));
        prop_assert_eq!(&remembered, &decided, "{}", pod);
        let hits = registry
            .gather()
            .iter()
            .filter(|family| family.name() == "noe_admission_decision_memo_total")
            .flat_map(|family| family.get_metric().iter())
            .filter(|metric| metric.get_label().iter().any(|l| l.value() == "hit"))
            .map(|metric| metric.get_counter().get_value())
            .sum::<f64>();
        // Remembered unless a lookup failed (the failing and unparsable images).
        let images_fail = pod["spec"]["containers"]
            .as_array()
            .into_iter()
            .chain(pod["spec"]["initContainers"].as_array())
            .flatten()
            .any(|c| {
                let image = c["image"].as_str().unwrap_or_default();
                image.contains("fail") || image.is_empty() || image.contains(' ')
            });
        if !images_fail {
            prop_assert_eq!(hits, 1.0, "{}", pod);
        }
    }
}

/// The generators reach the patching path (the properties above are not vacuous).
#[test]
fn a_plain_generated_pod_is_patched() {
    let pod = json!({"metadata": {"generateName": "web-"}, "spec": {"containers": [{"name": "c0", "image": "nginx:1.27"}]}});
    let answer = reply(
        runtime().block_on(
            admission(Policy::default())
                .review(&serde_json::to_vec(&review("admission.k8s.io/v1", "u", &pod)).unwrap()),
        ),
    );
    let patch = patch_of(&answer).expect("a patch");
    let mut patched = pod.clone();
    json_patch::patch(&mut patched, &patch).unwrap();
    assert_eq!(
        patched["spec"]["nodeSelector"]["kubernetes.io/arch"],
        "amd64"
    );
}
