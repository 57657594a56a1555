//! Platform corrections through the one decider, against a real registry and the real resolver:
//! a scripted source proves linux/arm64 false for one image digest. Inline admission (and its
//! memo), the decision the gate release asks for, and `noe explain`'s decision all leave arm64
//! out, warn, and annotate the pod; an image whose only platform is proven false denies the pod
//! for no common architecture, naming the evidence; a memo entry is not answered under another
//! generation of corrections.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use noe_core::decide::{DenyReason, Policy, Verdict, CORRECTIONS_ANNOTATION};
use noe_core::truth::Corrections;
use noe_credentials::Sources;
use noe_registry::{Config, Resolver};
use noe_test_support::{pod_review, push_standard_fixtures, FakeCorrections, Registry};
use noe_webhook::admission::Admission;
use noe_webhook::decider::Decider;
use noe_webhook::metrics::Metrics;
use noe_webhook::resolve::{Credentials, RegistryLookup, Resolve};
use serde_json::{json, Value};

fn decider(registry: &Registry, corrections: Option<Arc<dyn Corrections>>) -> Decider {
    let metrics = prometheus::Registry::new();
    let resolver = Resolver::new(
        Config {
            insecure_registries: vec![registry.host()],
            allow_cidrs: noe_test_support::loopback_cidrs(),
            request_timeout: Duration::from_secs(30),
            ..Config::default()
        },
        &metrics,
    )
    .unwrap();
    let credentials = Credentials {
        sources: Arc::new(Sources::none()),
        pull_secrets: None,
    };
    let resolve = Resolve::new(
        Arc::new(RegistryLookup::new(resolver)),
        Arc::new(credentials),
        Duration::from_secs(20),
    );
    let decider = Decider::new(
        resolve,
        Policy::default(),
        Metrics::register(&metrics).unwrap(),
    );
    match corrections {
        Some(corrections) => decider.with_corrections(corrections),
        None => decider,
    }
}

fn pod(images: &[String]) -> Value {
    pod_review("u", images)["request"]["object"].clone()
}

/// The answer's patch, decoded, and its warnings.
fn answered(reply: &[u8]) -> (Value, Vec<String>, Value) {
    let review: Value = serde_json::from_slice(reply).unwrap();
    let response = review["response"].clone();
    let patch = response["patch"]
        .as_str()
        .map(|p| {
            let bytes = base64::engine::general_purpose::STANDARD.decode(p).unwrap();
            serde_json::from_slice(&bytes).unwrap()
        })
        .unwrap_or(Value::Null);
    let warnings = response["warnings"]
        .as_array()
        .map(|w| w.iter().map(|w| w.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default();
    (patch, warnings, response)
}

fn annotation_of(patch: &Value) -> Option<Value> {
    patch.as_array()?.iter().find_map(|op| {
        let path = op["path"].as_str()?;
        if path == "/metadata/annotations/arch.noe.adevinta.com~1corrections" {
            return serde_json::from_str(op["value"].as_str()?).ok();
        }
        if path == "/metadata/annotations" {
            return serde_json::from_str(op["value"][CORRECTIONS_ANNOTATION].as_str()?).ok();
        }
        None
    })
}

/// The `arch.noe.adevinta.com/platforms` annotation the patch writes: the common set.
fn archs_of(patch: &Value) -> String {
    let key = noe_core::decide::PLATFORMS_ANNOTATION;
    patch
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|op| match op["path"].as_str()? {
            "/metadata/annotations" => op["value"][key].as_str().map(str::to_owned),
            path if path.ends_with("platforms") => op["value"].as_str().map(str::to_owned),
            _ => None,
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn inline_admission_and_its_memo_leave_a_corrected_platform_out() {
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let list = &fixtures.docker_list;
    let fake = FakeCorrections::arm64_false(&list.digest);
    let admission = Admission::deciding(decider(&registry, Some(fake.clone())));
    let body = serde_json::to_vec(&pod_review("u1", &[list.reference()])).unwrap();

    for round in 0..3 {
        // Seen once, then remembered, then answered from the memo: the same answer.
        let (patch, warnings, _) = answered(&admission.review(&body).await);
        assert_eq!(archs_of(&patch), "amd64", "round {round}: {patch}");
        assert_eq!(
            warnings,
            [format!(
                "image {}: linux/arm64 is not used: verification: /app is an x86-64 ELF (EM_X86_64)",
                list.reference()
            )],
            "round {round}"
        );
        let annotation = annotation_of(&patch).expect("the corrections annotation");
        assert_eq!(
            annotation,
            json!([{"image": list.reference(), "platform": "linux/arm64",
                    "source": "verification", "evidence": "/app is an x86-64 ELF (EM_X86_64)"}])
        );
    }

    let memo = |result: &str| {
        admission
            .metrics()
            .decision_memo
            .with_label_values(&[result])
            .get()
    };
    assert_eq!(memo("hit"), 1, "the third answer is the memo's");

    // A new generation (the correction withdrawn): the memo does not answer with the old one.
    fake.clear();
    let (patch, warnings, _) = answered(&admission.review(&body).await);
    assert_eq!(archs_of(&patch), "amd64,arm64", "{patch}");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(annotation_of(&patch).is_none());
    assert_eq!((memo("hit"), memo("changed")), (1, 1));

    // Without corrections, the same admission is what it always was.
    let plain = Admission::deciding(decider(&registry, None));
    let (patch, warnings, _) = answered(&plain.review(&body).await);
    assert_eq!(archs_of(&patch), "amd64,arm64");
    assert!(warnings.is_empty());
}

#[tokio::test]
async fn an_image_left_with_no_platform_supports_no_architecture() {
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let single = &fixtures.oci_single; // linux/arm64 only
    let list = &fixtures.docker_list;
    let fake = FakeCorrections::arm64_false(&single.digest);
    // Never dropped as a failed lookup would be.
    let policy = Policy {
        on_lookup_error: noe_core::decide::OnLookupError::IgnoreImage,
        ..Policy::default()
    };
    let decider = decider(&registry, Some(fake)).with_policy(policy);
    let images = [single.reference(), list.reference()];

    let decision = decider.decision(&pod(&images), "ns").await;
    let Verdict::Deny {
        reason, message, ..
    } = &decision.verdict
    else {
        panic!("not denied: {:?}", decision.verdict);
    };
    assert_eq!(*reason, DenyReason::NoCommonArch);
    assert!(
        message
            .contains("linux/arm64 proven false (verification: /app is an x86-64 ELF (EM_X86_64))"),
        "{message}"
    );
    // What `noe explain` shows: the image's corrections in its summary.
    let entry = decision
        .summary
        .images
        .iter()
        .find(|i| i.image == single.reference())
        .unwrap();
    assert_eq!(entry.corrections.len(), 1);
    assert_eq!(entry.corrections[0].digest, single.digest);
    // `noe explain`'s words and JSON name it.
    let object = pod(&images);
    let pod_of = noe_core::workload::pod_of(&object).unwrap();
    let explained = noe_core::explain::Explanation::decided(&pod_of, decision.clone());
    let json = explained.json();
    assert_eq!(json["corrections"][0]["image"], single.reference());
    assert_eq!(json["corrections"][0]["platform"], "linux/arm64");
    assert_eq!(json["corrections"][0]["source"], "verification");
    assert!(
        explained
            .text()
            .contains("linux/arm64 is not used: verification"),
        "{}",
        explained.text()
    );

    // Alone, it is not arch-neutral either.
    let decision = decider.decision(&pod(&[single.reference()]), "ns").await;
    assert!(
        matches!(
            decision.verdict,
            Verdict::Deny {
                reason: DenyReason::NoCommonArch,
                ..
            }
        ),
        "{:?}",
        decision.verdict
    );
}

#[tokio::test]
async fn the_gate_release_decides_with_the_corrections_in_its_form() {
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let list = &fixtures.docker_list;
    let fake = FakeCorrections::arm64_false(&list.digest);
    let decider = decider(&registry, Some(fake));
    // A gated pod as the gate controller reads it.
    let mut gated = pod(&[list.reference()]);
    gated["metadata"]["namespace"] = json!("ns");
    gated["metadata"]["name"] = json!("web-1");
    gated["metadata"]["resourceVersion"] = json!("7");
    gated["metadata"]["labels"][noe_core::patch::release::GATE_LABEL] = json!("gated");
    gated["spec"]["schedulingGates"] = json!([{"name": noe_core::patch::release::SCHEDULING_GATE}]);

    let decision = decider.decision(&gated, "ns").await;
    assert_eq!(
        decision.warnings,
        [format!(
            "image {}: linux/arm64 is not used: verification: /app is an x86-64 ELF (EM_X86_64)",
            list.reference()
        )]
    );
    let Verdict::Patch { common, ops } = decision.verdict else {
        panic!("not a patch");
    };
    assert_eq!(common, ["amd64"]);
    let release = noe_core::patch::release::release(
        &gated,
        &ops,
        &noe_core::patch::release::Extra::default(),
    )
    .unwrap();
    let annotation: Value = serde_json::from_str(
        release["metadata"]["annotations"][CORRECTIONS_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(annotation[0]["platform"], "linux/arm64");
    assert_eq!(annotation[0]["source"], "verification");
    assert!(!release.to_string().contains("\"arm64\""), "{release}");
}

#[tokio::test]
async fn hybrid_admission_decides_cached_images_with_the_corrections() {
    use noe_webhook::admission::gate::{ExemptNamespaces, GateSettings, LookupMode};
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let list = &fixtures.docker_list;
    let fake = FakeCorrections::arm64_false(&list.digest);
    let decider = decider(&registry, Some(fake));
    // Cached first: hybrid then decides inline at once.
    decider.decision(&pod(&[list.reference()]), "bench").await;
    let admission = Admission::deciding(decider).with_gate(GateSettings {
        mode: LookupMode::Hybrid,
        hybrid_budget: Duration::from_millis(1),
        own_namespace: None,
        exempt: ExemptNamespaces::default(),
        object_selector: Default::default(),
        namespaces: None,
    });
    let body = serde_json::to_vec(&pod_review("u2", &[list.reference()])).unwrap();
    let (patch, warnings, _) = answered(&admission.review(&body).await);
    assert_eq!(archs_of(&patch), "amd64", "{patch}");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(annotation_of(&patch).is_some(), "{patch}");
}
