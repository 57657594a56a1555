//! The admission flow over scripted lookups and credentials (the trait seams): concurrency, the
//! deadline, credentials reaching the lookups, and the pull-secret metric.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use noe_registry::{Credential, CredentialCandidate, Platform};
use noe_webhook::admission::Admission;
use noe_webhook::decide::{Policy, Signal, Verdict};
use noe_webhook::metrics::Metrics;
use noe_webhook::resolve::{
    CredentialSource, LookupError, PlatformLookup, PodCredentials, Resolve,
};
use serde_json::json;
use tokio::time::Instant;

type Answer = Result<Arc<[Platform]>, LookupError>;

fn refused(message: &str) -> LookupError {
    LookupError::Registry {
        message: message.to_owned(),
        registry: "other".to_owned(),
    }
}

/// Answers each image after its scripted delay; records the credential sources it was given.
#[derive(Default)]
struct Scripted {
    answers: HashMap<String, (Duration, Answer)>,
    seen: Mutex<Vec<(String, Vec<String>)>>,
}

impl PlatformLookup for Scripted {
    fn lookup<'a>(
        &'a self,
        image: &'a str,
        credentials: &'a [CredentialCandidate],
    ) -> BoxFuture<'a, Answer> {
        Box::pin(async move {
            self.seen.lock().unwrap().push((
                image.to_owned(),
                credentials.iter().map(|c| c.source.clone()).collect(),
            ));
            let (delay, answer) = self
                .answers
                .get(image)
                .cloned()
                .unwrap_or((Duration::ZERO, Err(refused("unknown"))));
            tokio::time::sleep(delay).await;
            answer
        })
    }
}

struct OneSecret;

impl CredentialSource for OneSecret {
    fn for_pod<'a>(
        &'a self,
        namespace: &'a str,
        pull_secrets: &'a [String],
        images: &'a [String],
    ) -> BoxFuture<'a, PodCredentials> {
        Box::pin(async move {
            let candidates = images
                .iter()
                .map(|image| {
                    let sources = pull_secrets.iter().map(|name| {
                        CredentialCandidate::new(
                            format!("pull-secret:{namespace}/{name}"),
                            Credential::RegistryToken("t".into()),
                        )
                    });
                    (image.clone(), sources.collect())
                })
                .collect();
            PodCredentials {
                candidates,
                failed_pull_secrets: 1,
            }
        })
    }
}

fn linux(archs: &[&str]) -> Arc<[Platform]> {
    archs
        .iter()
        .map(|a| Platform::new("linux", *a, None))
        .collect()
}

fn admission(lookup: Arc<Scripted>, deadline: Duration) -> (Admission, prometheus::Registry) {
    let registry = prometheus::Registry::new();
    let metrics = Metrics::register(&registry).unwrap();
    let admission = Admission::new(
        Resolve::new(lookup, Arc::new(OneSecret), deadline),
        Policy::default(),
        metrics,
    );
    (admission, registry)
}

fn pod(images: &[&str]) -> serde_json::Value {
    let containers: Vec<_> = images
        .iter()
        .enumerate()
        .map(|(i, image)| json!({"name": format!("c{i}"), "image": image}))
        .collect();
    json!({"metadata": {"name": "p"}, "spec": {"containers": containers, "imagePullSecrets": [{"name": "regcred"}]}})
}

/// Time is paused: a lookup's scripted delay advances the clock, so concurrency is measured in
/// virtual seconds, exactly.
#[tokio::test(start_paused = true)]
async fn lookups_run_concurrently_with_the_pods_credentials() {
    let mut scripted = Scripted::default();
    for image in ["a:1", "b:1", "c:1"] {
        scripted.answers.insert(
            image.into(),
            (Duration::from_secs(1), Ok(linux(&["amd64", "arm64"]))),
        );
    }
    let scripted = Arc::new(scripted);
    let (admission, registry) = admission(scripted.clone(), Duration::from_secs(5));
    let started = Instant::now();
    let decision = admission.decision(&pod(&["a:1", "b:1", "c:1"]), "ns").await;
    // Three lookups of one second each, all at once; sequential lookups would take 3 s.
    assert_eq!(started.elapsed(), Duration::from_secs(1));
    assert!(
        matches!(decision.verdict, Verdict::Patch { .. }),
        "{decision:?}"
    );
    let seen = scripted.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    for (_, sources) in seen {
        assert_eq!(sources, ["pull-secret:ns/regcred"]);
    }
    let text = prometheus::TextEncoder::new()
        .encode_to_string(&registry.gather())
        .unwrap();
    assert!(
        text.contains("noe_hook_image_pull_secret_failed_total{namespace=\"ns\"} 1"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lookup_past_the_deadline_fails_as_deadline_exceeded() {
    let mut scripted = Scripted::default();
    scripted
        .answers
        .insert("fast:1".into(), (Duration::ZERO, Ok(linux(&["arm64"]))));
    scripted.answers.insert(
        "slow:1".into(),
        (Duration::from_secs(30), Ok(linux(&["amd64"]))),
    );
    let (admission, _) = admission(Arc::new(scripted), Duration::from_millis(300));
    let started = Instant::now();
    let decision = admission.decision(&pod(&["fast:1", "slow:1"]), "ns").await;
    // The lookups end at the deadline minus the margin to answer (30 ms of 300 ms), not when the
    // slow lookup would (30 s).
    assert_eq!(started.elapsed(), Duration::from_millis(270));
    // ignore-image: decided on the fast image alone, the slow one reported.
    assert!(
        matches!(&decision.verdict, Verdict::Patch { common, .. } if common == &["arm64"]),
        "{decision:?}"
    );
    let deadline = LookupError::Deadline {
        registry: "other".into(),
    }
    .to_string();
    assert!(
        decision.signals.contains(&Signal::LookupFailed {
            image: "slow:1".into(),
            error: deadline.clone(),
        }),
        "{:?}",
        decision.signals
    );

    // The full review path answers within the deadline too, with the request's uid.
    let body = noe_test_support::admission_review(
        "admission.k8s.io/v1",
        "CREATE",
        "ns",
        "u-1",
        &pod(&["slow:1"]),
    );
    let started = Instant::now();
    let answer = admission.review(&serde_json::to_vec(&body).unwrap()).await;
    assert_eq!(started.elapsed(), Duration::from_millis(270));
    let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(answer["response"]["uid"], "u-1");
    assert_eq!(answer["response"]["allowed"], true);
    let warnings = answer["response"]["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains(&deadline)),
        "{warnings:?}"
    );
}

struct Panics;

impl PlatformLookup for Panics {
    fn lookup<'a>(
        &'a self,
        _image: &'a str,
        _credentials: &'a [CredentialCandidate],
    ) -> BoxFuture<'a, Answer> {
        Box::pin(async { panic!("scripted bug") })
    }
}

#[tokio::test]
async fn a_bug_still_gets_an_admission_review() {
    use noe_webhook::server::Handler;
    let registry = prometheus::Registry::new();
    let admission = Admission::new(
        Resolve::new(
            Arc::new(Panics),
            Arc::new(OneSecret),
            Duration::from_secs(1),
        ),
        Policy::default(),
        Metrics::register(&registry).unwrap(),
    );
    let body = noe_test_support::admission_review(
        "admission.k8s.io/v1beta1",
        "CREATE",
        "ns",
        "u-2",
        &pod(&["x:1"]),
    );
    // The transport catches the panic and asks the handler for its fallback answer.
    let body = serde_json::to_vec(&body).unwrap();
    let panicked = {
        use futures::FutureExt as _;
        std::panic::AssertUnwindSafe(admission.handle(bytes::Bytes::from(body.clone())))
            .catch_unwind()
            .await
    };
    assert!(panicked.is_err(), "the scripted lookup panics");
    let answer: serde_json::Value = serde_json::from_slice(&admission.recover(&body)).unwrap();
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(answer["response"]["uid"], "u-2");
    assert_eq!(answer["response"]["allowed"], true);
    assert_eq!(
        answer["response"]["warnings"][0],
        noe_webhook::admission::INTERNAL_ERROR_WARNING
    );
}

/// Pull secrets that were all readable: one candidate per secret name.
struct Readable;

impl CredentialSource for Readable {
    fn for_pod<'a>(
        &'a self,
        namespace: &'a str,
        pull_secrets: &'a [String],
        images: &'a [String],
    ) -> BoxFuture<'a, PodCredentials> {
        Box::pin(async move {
            let mut credentials = OneSecret.for_pod(namespace, pull_secrets, images).await;
            credentials.failed_pull_secrets = 0;
            credentials
        })
    }
}

#[tokio::test]
async fn the_memo_answers_warm_admissions_per_namespace_and_pull_secrets() {
    let mut scripted = Scripted::default();
    scripted
        .answers
        .insert("a:1".into(), (Duration::ZERO, Ok(linux(&["arm64"]))));
    scripted.answers.insert(
        "b:1".into(),
        (Duration::ZERO, Err(refused("registry said no"))),
    );
    let scripted = Arc::new(scripted);
    let registry = prometheus::Registry::new();
    let admission = Admission::new(
        Resolve::new(scripted.clone(), Arc::new(Readable), Duration::from_secs(5))
            .with_memo(Duration::from_secs(60)),
        Policy::default(),
        Metrics::register(&registry).unwrap(),
    );
    let lookups = || scripted.seen.lock().unwrap().len();
    let patched = |decision: &noe_webhook::decide::Decision| {
        assert!(
            matches!(decision.verdict, Verdict::Patch { .. }),
            "{decision:?}"
        );
    };

    patched(&admission.decision(&pod(&["a:1"]), "ns").await);
    patched(&admission.decision(&pod(&["a:1"]), "ns").await);
    assert_eq!(lookups(), 1, "the second admission is answered by the memo");

    // Another namespace, or other pull secret names, is another credentials context.
    patched(&admission.decision(&pod(&["a:1"]), "other").await);
    assert_eq!(lookups(), 2);
    let without_secret = json!({"spec": {"containers": [{"name": "c", "image": "a:1"}]}});
    patched(&admission.decision(&without_secret, "ns").await);
    assert_eq!(lookups(), 3);

    // Failures are not remembered: each admission asks again (the registry caches them).
    for _ in 0..2 {
        admission.decision(&pod(&["b:1"]), "ns").await;
    }
    assert_eq!(lookups(), 5);
    // A pod with one remembered image and one new one looks both up.
    admission.decision(&pod(&["a:1", "b:1"]), "ns").await;
    assert_eq!(lookups(), 7);

    // Nor are the answers of a pod whose pull secrets could not be read (counted every time).
    let (unreadable, registry) = admission_with_memo(scripted.clone());
    for _ in 0..2 {
        patched(&unreadable.decision(&pod(&["a:1"]), "ns").await);
    }
    assert_eq!(lookups(), 9);
    let text = prometheus::TextEncoder::new()
        .encode_to_string(&registry.gather())
        .unwrap();
    assert!(
        text.contains("noe_hook_image_pull_secret_failed_total{namespace=\"ns\"} 2"),
        "{text}"
    );
}

fn admission_with_memo(lookup: Arc<Scripted>) -> (Admission, prometheus::Registry) {
    let registry = prometheus::Registry::new();
    let resolve = Resolve::new(lookup, Arc::new(OneSecret), Duration::from_secs(5))
        .with_memo(Duration::from_secs(60));
    let metrics = Metrics::register(&registry).unwrap();
    (
        Admission::new(resolve, Policy::default(), metrics),
        registry,
    )
}
