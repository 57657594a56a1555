//! The admission flow over scripted lookups and credentials (the trait seams): concurrency, the
//! deadline, credentials reaching the lookups, the cache asked first (credentials matched only
//! for misses, in the pod's scope), and the pull-secret metric.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use noe_core::decide::{Policy, Signal, Verdict};
use noe_core::Platform;
use noe_credentials::{Credential, CredentialCandidate};
use noe_registry::cache::Scope;
use noe_registry::Routed;
use noe_webhook::admission::Admission;
use noe_webhook::metrics::Metrics;
use noe_webhook::resolve::{
    CredentialSource, LookupError, PlatformLookup, PodCredentials, PodSecrets, Resolve,
};
use serde_json::json;
use tokio::time::Instant;

type Platforms = Arc<[Platform]>;
type Answer = Result<Platforms, LookupError>;

fn refused(message: &str) -> LookupError {
    LookupError::Registry {
        kind: noe_core::decide::LookupKind::Registry,
        message: message.to_owned(),
        registry: "other".to_owned(),
    }
}

/// Answers each image after its scripted delay; records the credential sources it was given.
/// With `caches`, a success is then answered from `cached` for the scope it was found in (the
/// registry crate's contract, in miniature).
struct Scripted {
    answers: HashMap<String, (Duration, Answer)>,
    seen: Mutex<Vec<(String, Vec<String>)>>,
    caches: bool,
    cache: Mutex<HashMap<(String, Option<Scope>), Platforms>>,
    /// Routes each image before its credentials are asked for, as the registry lookup does.
    router: noe_registry::Resolver,
}

impl Default for Scripted {
    fn default() -> Self {
        let config = noe_registry::Config {
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..noe_registry::Config::default()
        };
        Self {
            answers: HashMap::new(),
            seen: Mutex::default(),
            caches: false,
            cache: Mutex::default(),
            router: noe_registry::Resolver::new(config, &prometheus::Registry::new()).unwrap(),
        }
    }
}

impl PlatformLookup for Scripted {
    fn cached(&self, image: &str, scope: Option<Scope>) -> Option<Platforms> {
        self.cache
            .lock()
            .unwrap()
            .get(&(image.to_owned(), scope))
            .cloned()
    }

    fn lookup<'a>(
        &'a self,
        image: &'a str,
        scope: Option<Scope>,
        credentials: &'a PodCredentials<'a>,
    ) -> BoxFuture<'a, Answer> {
        Box::pin(async move {
            let routed = self.router.routed(image).await.unwrap();
            let credentials = credentials.candidates(&routed, "other".into()).await;
            self.seen.lock().unwrap().push((
                image.to_owned(),
                credentials.iter().map(|c| c.source.clone()).collect(),
            ));
            if let (true, Some((_, Ok(platforms)))) = (self.caches, self.answers.get(image)) {
                self.cache
                    .lock()
                    .unwrap()
                    .insert((image.to_owned(), scope), platforms.clone());
            }
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

/// Every pull secret named is usable but `failed` of them; one token candidate per name.
struct Secrets {
    failed: usize,
    matched: Mutex<usize>,
}

/// One of the pod's pull secrets cannot be used.
fn one_secret_failing() -> Secrets {
    Secrets {
        failed: 1,
        matched: Mutex::new(0),
    }
}

impl CredentialSource for Secrets {
    fn pod<'a>(
        &'a self,
        namespace: &'a str,
        pull_secrets: &'a [String],
    ) -> BoxFuture<'a, PodSecrets> {
        Box::pin(async move {
            PodSecrets {
                scope: Some(Scope::of(&(namespace, pull_secrets))),
                failed_pull_secrets: self.failed,
                ..PodSecrets::default()
            }
        })
    }

    fn candidates<'a>(
        &'a self,
        namespace: &'a str,
        pull_secrets: &'a [String],
        _pod: &'a PodSecrets,
        _routed: &'a Routed,
    ) -> BoxFuture<'a, Vec<CredentialCandidate>> {
        Box::pin(async move {
            *self.matched.lock().unwrap() += 1;
            pull_secrets
                .iter()
                .map(|name| {
                    CredentialCandidate::new(
                        format!("pull-secret:{namespace}/{name}"),
                        Credential::RegistryToken("t".into()),
                    )
                    .in_scope()
                })
                .collect()
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
        Resolve::new(lookup, Arc::new(one_secret_failing()), deadline),
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
    let decision = admission
        .decider()
        .decision(&pod(&["a:1", "b:1", "c:1"]), "ns")
        .await;
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

/// Repeated images are looked up once, in a small pod (compared with the images before them)
/// as in a large one (a set).
#[tokio::test(start_paused = true)]
async fn repeated_images_are_looked_up_once_in_small_and_large_pods() {
    let mut scripted = Scripted::default();
    let distinct: Vec<String> = (0..30).map(|i| format!("app{i}:1")).collect();
    for image in &distinct {
        scripted
            .answers
            .insert(image.clone(), (Duration::ZERO, Ok(linux(&["amd64"]))));
    }
    let scripted = Arc::new(scripted);
    let resolve = Resolve::new(
        scripted.clone(),
        Arc::new(one_secret_failing()),
        Duration::from_secs(5),
    );
    let small = ["app0:1", "app1:1", "app0:1", "app1:1"];
    let resolved = resolve.platforms("ns", &[], &small).await;
    assert_eq!(resolved.lookups.len(), 2);
    assert_eq!(scripted.seen.lock().unwrap().len(), 2);

    scripted.seen.lock().unwrap().clear();
    let mut large: Vec<&str> = distinct.iter().map(String::as_str).collect();
    large.extend(["app2:1", "app20:1", "app29:1"]);
    let resolved = resolve.platforms("ns", &[], &large).await;
    assert_eq!(resolved.lookups.len(), 30);
    let mut seen: Vec<String> = scripted
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|(image, _)| image.clone())
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen.len(),
        scripted.seen.lock().unwrap().len(),
        "looked up twice"
    );
    assert_eq!(seen.len(), 30);
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
    let decision = admission
        .decider()
        .decision(&pod(&["fast:1", "slow:1"]), "ns")
        .await;
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
        _scope: Option<Scope>,
        _credentials: &'a PodCredentials<'a>,
    ) -> BoxFuture<'a, Answer> {
        Box::pin(async { panic!("scripted bug") })
    }
}

#[tokio::test]
async fn a_bug_still_gets_an_admission_review() {
    use http_body_util::BodyExt as _;
    use noe_webhook::server::BodyLimits;
    use tower::ServiceExt as _;
    let registry = prometheus::Registry::new();
    let admission = Admission::new(
        Resolve::new(
            Arc::new(Panics),
            Arc::new(one_secret_failing()),
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
    // Through the real route, in-process: the transport catches the panic and answers with the
    // handler's fallback, an AdmissionReview.
    let request = http::Request::post(noe_webhook::server::MUTATE_PATH)
        .body(http_body_util::Full::new(bytes::Bytes::from(
            serde_json::to_vec(&body).unwrap(),
        )))
        .unwrap();
    let routes = noe_webhook::server::admission_routes(Arc::new(admission), BodyLimits::default());
    let answered = routes.oneshot(request).await.unwrap();
    assert_eq!(answered.status(), 200);
    let bytes = answered.into_body().collect().await.unwrap().to_bytes();
    let answer: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(answer["response"]["uid"], "u-2");
    assert_eq!(answer["response"]["allowed"], true);
    assert_eq!(
        answer["response"]["warnings"][0],
        noe_webhook::admission::INTERNAL_ERROR_WARNING
    );
}

#[tokio::test]
async fn the_cache_is_asked_first_and_credentials_are_matched_only_for_misses() {
    let mut scripted = Scripted {
        caches: true,
        ..Scripted::default()
    };
    scripted
        .answers
        .insert("a:1".into(), (Duration::ZERO, Ok(linux(&["arm64"]))));
    scripted.answers.insert(
        "b:1".into(),
        (Duration::ZERO, Err(refused("registry said no"))),
    );
    let scripted = Arc::new(scripted);
    let secrets = Arc::new(Secrets {
        failed: 0,
        matched: Mutex::new(0),
    });
    let registry = prometheus::Registry::new();
    let admission = Admission::new(
        Resolve::new(scripted.clone(), secrets.clone(), Duration::from_secs(5)),
        Policy::default(),
        Metrics::register(&registry).unwrap(),
    );
    let lookups = || scripted.seen.lock().unwrap().len();
    let matched = || *secrets.matched.lock().unwrap();
    let patched = |decision: &noe_core::decide::Decision| {
        assert!(
            matches!(decision.verdict, Verdict::Patch { .. }),
            "{decision:?}"
        );
    };

    patched(&admission.decider().decision(&pod(&["a:1"]), "ns").await);
    patched(&admission.decider().decision(&pod(&["a:1"]), "ns").await);
    assert_eq!(
        lookups(),
        1,
        "the second admission is answered by the cache"
    );
    assert_eq!(matched(), 1, "no credential matching for a cached image");

    // Another namespace is another scope: looked up again, with its own credentials.
    patched(&admission.decider().decision(&pod(&["a:1"]), "other").await);
    assert_eq!(lookups(), 2);
    let seen = scripted.seen.lock().unwrap().clone();
    assert_eq!(seen[1].1, ["pull-secret:other/regcred"]);
    // A pod without pull secrets has no scope: the scoped answers are not its own.
    let without_secret = json!({"spec": {"containers": [{"name": "c", "image": "a:1"}]}});
    patched(&admission.decider().decision(&without_secret, "ns").await);
    assert_eq!(lookups(), 3);
    assert_eq!(seen.len(), 2);

    // Failures are asked again (the registry crate caches them briefly).
    for _ in 0..2 {
        admission.decider().decision(&pod(&["b:1"]), "ns").await;
    }
    assert_eq!(lookups(), 5);
    // A pod with one cached image and one new one looks up only the new one.
    admission
        .decider()
        .decision(&pod(&["a:1", "b:1"]), "ns")
        .await;
    assert_eq!(lookups(), 6);
}

#[tokio::test]
async fn unusable_pull_secrets_are_counted_on_every_admission_even_when_cached() {
    let mut scripted = Scripted {
        caches: true,
        ..Scripted::default()
    };
    scripted
        .answers
        .insert("a:1".into(), (Duration::ZERO, Ok(linux(&["arm64"]))));
    let scripted = Arc::new(scripted);
    let (admission, registry) = admission(scripted.clone(), Duration::from_secs(5));
    for _ in 0..2 {
        let decision = admission.decider().decision(&pod(&["a:1"]), "ns").await;
        assert!(matches!(decision.verdict, Verdict::Patch { .. }));
    }
    assert_eq!(scripted.seen.lock().unwrap().len(), 1);
    let text = prometheus::TextEncoder::new()
        .encode_to_string(&registry.gather())
        .unwrap();
    assert!(
        text.contains("noe_hook_image_pull_secret_failed_total{namespace=\"ns\"} 2"),
        "{text}"
    );
}
