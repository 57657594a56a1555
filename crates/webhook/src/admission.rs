//! The admission flow: read an AdmissionReview, look the pod's images up under one deadline,
//! decide (the pure [`crate::decide`]), answer, and count.

pub mod review;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::Value;
use tracing::{Instrument, Level};

use crate::decide::{self, Decision, Lookups, Policy, Signal, Verdict};
use crate::lookup::{CredentialSource, PlatformLookup};
use crate::memo::{Context, Memo};
use crate::metrics::{outcome, registry_label, Metrics};
use review::Answer;

/// The reason given for a lookup that did not finish within `--admission-deadline`.
pub const DEADLINE_EXCEEDED: &str = "deadline exceeded";

/// The warning of a pod allowed unchanged because the webhook itself failed.
pub const INTERNAL_ERROR_WARNING: &str = "noe: internal error, pod allowed unchanged";

/// Answers AdmissionReviews. Cheap to share behind an `Arc`.
pub struct Admission {
    lookup: Arc<dyn PlatformLookup>,
    credentials: Arc<dyn CredentialSource>,
    policy: Policy,
    deadline: Duration,
    metrics: Metrics,
    configured_registries: Vec<String>,
    memo: Option<Memo>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("policy", &self.policy)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl Admission {
    /// `configured_registries` are the hosts allowed as `registry` metric labels besides the big
    /// public registries (proxies, insecure and private registries).
    pub fn new(
        lookup: Arc<dyn PlatformLookup>,
        credentials: Arc<dyn CredentialSource>,
        policy: Policy,
        deadline: Duration,
        metrics: Metrics,
        configured_registries: Vec<String>,
    ) -> Self {
        Self {
            lookup,
            credentials,
            policy,
            deadline,
            metrics,
            configured_registries,
            memo: None,
        }
    }

    /// Reuses each image's platforms for up to `ttl` (at most [`crate::memo::MEMO_TTL`]) in the
    /// same namespace with the same pull secret names, skipping credential matching and
    /// reference normalization on the warm path. Zero turns it off (the default).
    pub fn with_memo(mut self, ttl: Duration) -> Self {
        self.memo = Memo::new(ttl);
        self
    }

    /// Answers one request body; always a JSON AdmissionReview.
    pub async fn review(&self, body: &[u8]) -> Value {
        let reply = self.reply(body).await;
        review::respond(reply.api_version, &reply.uid, reply.answer)
    }

    /// [`Admission::review`], serialized (what the server sends).
    pub async fn review_bytes(&self, body: &[u8]) -> Vec<u8> {
        let reply = self.reply(body).await;
        review::respond_bytes(reply.api_version, &reply.uid, reply.answer)
    }

    async fn reply(&self, body: &[u8]) -> Reply {
        let started = Instant::now();
        let (reply, outcome) = match serde_json::from_slice::<Value>(body) {
            Err(error) => {
                let invalid = review::Invalid::NotJson(error.to_string());
                tracing::warn!(error = %invalid, "Invalid admission request");
                let answer = Answer::invalid(invalid.to_string());
                (
                    Reply::new(review::V1, String::new(), answer),
                    outcome::INVALID,
                )
            }
            Ok(value) => self.review_value(&value).await,
        };
        self.metrics
            .observe_duration(outcome, started.elapsed().as_secs_f64());
        reply
    }

    async fn review_value(&self, value: &Value) -> (Reply, &'static str) {
        let request = match review::parse(value) {
            Ok(request) => request,
            Err(invalid) => {
                tracing::warn!(error = %invalid, "Invalid admission request");
                let version = review::version_of(value);
                let uid = review::uid_of(value);
                let answer = Answer::invalid(invalid.to_string());
                return (Reply::new(version, uid, answer), outcome::INVALID);
            }
        };
        let pod = match request.object {
            Some(pod)
                if request.kind == "Pod"
                    && request.group.is_empty()
                    && request.operation == "CREATE"
                    && request.sub_resource.is_empty() =>
            {
                pod
            }
            _ => {
                tracing::debug!(uid = %request.uid, kind = request.kind, operation = request.operation, "Not a pod creation: allowed");
                let answer = Answer::allow();
                return (
                    Reply::new(request.api_version, request.uid, answer),
                    outcome::ALLOWED,
                );
            }
        };
        let metadata = pod.get("metadata");
        let name = metadata
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .or_else(|| {
                metadata
                    .and_then(|m| m.get("generateName"))
                    .and_then(Value::as_str)
            })
            .unwrap_or_default();
        let scope = Scope::new(&request.uid, &request.namespace, name);
        let (answer, outcome) = self.decide_in(pod, &scope).await;
        (
            Reply::new(request.api_version, request.uid, answer),
            outcome,
        )
    }

    /// Looks up what the decision needs, decides, counts, and builds the answer.
    pub async fn decide_pod(&self, pod: &Value, namespace: &str) -> (Answer, &'static str) {
        self.decide_in(pod, &Scope::detached(namespace)).await
    }

    async fn decide_in(&self, pod: &Value, scope: &Scope<'_>) -> (Answer, &'static str) {
        let decision = self.decision_in(pod, scope).await;
        self.record(scope, &decision);
        let Decision {
            verdict, warnings, ..
        } = decision;
        match verdict {
            Verdict::Unchanged { reason } => {
                let _span = scope.enter(Level::DEBUG);
                tracing::debug!(reason = reason.as_str(), "Allowed unchanged");
                let mut answer = Answer::allow();
                answer.warnings = warnings;
                (answer, outcome::ALLOWED)
            }
            Verdict::Patch { common, ops } => {
                let _span = scope.enter(Level::DEBUG);
                tracing::debug!(platforms = %common.join(","), operations = ops.len(), "Patched");
                let answer = Answer {
                    allowed: true,
                    patch: Some(ops),
                    warnings,
                    status: None,
                };
                (answer, outcome::PATCHED)
            }
            Verdict::Deny { code, message, .. } => {
                let _span = scope.enter(Level::INFO);
                tracing::info!(%message, "Denied");
                let answer = Answer {
                    allowed: false,
                    patch: None,
                    warnings,
                    status: Some((code, message)),
                };
                (answer, outcome::DENIED)
            }
        }
    }

    /// The decision for `pod`, with every lookup done under one deadline.
    pub async fn decision(&self, pod: &Value, namespace: &str) -> Decision {
        self.decision_in(pod, &Scope::detached(namespace)).await
    }

    async fn decision_in(&self, pod: &Value, scope: &Scope<'_>) -> Decision {
        let plan = decide::plan(pod, &self.policy);
        let images: Vec<String> = plan.images().map(str::to_owned).collect();
        let lookups = match images.is_empty() {
            false => self.lookups(pod, images, scope).await,
            true => Lookups::new(),
        };
        decide::decide(&plan, &lookups, &decide::Facts::default(), &self.policy)
    }

    /// The platforms of the pod's images: from the memo when every image is in it, else looked
    /// up (inside the admission's span, so registry logs name the pod).
    async fn lookups(&self, pod: &Value, images: Vec<String>, scope: &Scope<'_>) -> Lookups {
        let namespace = scope.namespace;
        let deadline = tokio::time::Instant::now() + self.lookup_budget();
        let secrets = pod
            .get("spec")
            .map(crate::pull_secrets::image_pull_secret_names)
            .unwrap_or_default();
        let context = Context {
            namespace,
            pull_secrets: &secrets,
        };
        if let Some(memo) = &self.memo {
            let reused: Option<Lookups> = images
                .iter()
                .map(|image| Some((image.clone(), Ok(memo.get(context, image)?))))
                .collect();
            if let Some(lookups) = reused {
                self.lookup.count_reused(lookups.len());
                return lookups;
            }
        }
        self.look_up(images, context, deadline)
            .instrument(scope.span().clone())
            .await
    }

    async fn look_up(
        &self,
        images: Vec<String>,
        context: Context<'_>,
        deadline: tokio::time::Instant,
    ) -> Lookups {
        let (namespace, secrets) = (context.namespace, context.pull_secrets);
        let credentials = tokio::time::timeout_at(
            deadline,
            self.credentials.for_pod(namespace, secrets, &images),
        )
        .await;
        let credentials = match credentials {
            Ok(credentials) => credentials,
            Err(_) => {
                return images
                    .into_iter()
                    .map(|image| (image, Err(DEADLINE_EXCEEDED.to_owned())))
                    .collect();
            }
        };
        let failed = credentials.failed_pull_secrets;
        if failed > 0 {
            self.metrics
                .image_pull_secret_failed
                .with_label_values(&[namespace])
                .inc_by(failed as u64);
        }
        let credentials = &credentials;
        let lookups = images.iter().map(|image| async move {
            let result = tokio::time::timeout_at(
                deadline,
                self.lookup.lookup(image, credentials.for_image(image)),
            )
            .await
            .unwrap_or_else(|_| Err(DEADLINE_EXCEEDED.to_owned()));
            (image.clone(), result)
        });
        let lookups: Lookups = futures::future::join_all(lookups)
            .await
            .into_iter()
            .collect();
        if let Some(memo) = self.memo.as_ref().filter(|_| failed == 0) {
            for (image, result) in &lookups {
                if let Ok(platforms) = result {
                    memo.insert(context, image, platforms.clone());
                }
            }
        }
        lookups
    }

    /// The deadline minus a margin to decide and answer.
    fn lookup_budget(&self) -> Duration {
        let margin = (self.deadline / 10).min(Duration::from_millis(100));
        self.deadline.saturating_sub(margin)
    }

    fn record(&self, scope: &Scope<'_>, decision: &Decision) {
        let (metrics, namespace) = (&self.metrics, scope.namespace);
        for signal in &decision.signals {
            match signal {
                Signal::Skipped { reason } => metrics
                    .update_skip
                    .with_label_values(&[reason.as_str()])
                    .inc(),
                Signal::ArchSelectorInjected { selector } => metrics
                    .arch_selector_injected
                    .with_label_values(&[namespace, selector])
                    .inc(),
                Signal::PreferredArchNotAvailable { arch } => {
                    let _span = scope.enter(Level::DEBUG);
                    tracing::debug!(%arch, "Preferred architecture not available");
                    metrics
                        .preferred_architecture_not_available
                        .with_label_values(&[namespace])
                        .inc();
                }
                Signal::NodeMatchInjection { label } => metrics
                    .node_match_injections
                    .with_label_values(&[namespace, label])
                    .inc(),
                Signal::LookupFailed { image, error } => {
                    let _span = scope.enter(Level::WARN);
                    tracing::warn!(%image, %error, "Image lookup failed");
                    metrics
                        .registry_errors
                        .with_label_values(&[&registry_label(image, &self.configured_registries)])
                        .inc();
                }
                Signal::FailedOpen => {
                    let _span = scope.enter(Level::WARN);
                    tracing::warn!("Allowed unchanged: image lookups failed")
                }
                Signal::Contradiction => {
                    let _span = scope.enter(Level::INFO);
                    tracing::info!("The pod's images cannot run where it selects")
                }
                Signal::Recomputed { previous } => {
                    let _span = scope.enter(Level::INFO);
                    tracing::info!(previous = %previous.join(","), "Recomputed our earlier constraint")
                }
            }
        }
    }
}

/// The admission a log line belongs to. Its span (`uid`, `namespace`, `pod`) is built on first
/// use only: on the warm path nothing is logged at the default level, and building a span with
/// three formatted fields for every admission cost a tenth of the throughput
/// (docs/benchmarks.md).
struct Scope<'a> {
    uid: &'a str,
    namespace: &'a str,
    pod: &'a str,
    span: std::sync::OnceLock<tracing::Span>,
}

impl<'a> Scope<'a> {
    fn new(uid: &'a str, namespace: &'a str, pod: &'a str) -> Self {
        Self {
            uid,
            namespace,
            pod,
            span: std::sync::OnceLock::new(),
        }
    }

    /// Outside a review (`noe explain`, library callers): no span at all.
    fn detached(namespace: &'a str) -> Self {
        Self {
            span: std::sync::OnceLock::from(tracing::Span::none()),
            ..Self::new("", namespace, "")
        }
    }

    fn span(&self) -> &tracing::Span {
        self.span.get_or_init(|| {
            tracing::info_span!(
                "admission",
                uid = %self.uid,
                namespace = %self.namespace,
                pod = %self.pod,
            )
        })
    }

    /// Enters the span when events at `level` may be logged.
    fn enter(&self, level: Level) -> Option<tracing::span::Entered<'_>> {
        (level <= tracing::level_filters::LevelFilter::current()).then(|| self.span().enter())
    }
}

/// What to answer, in which AdmissionReview version, for which request.
struct Reply {
    api_version: &'static str,
    uid: String,
    answer: Answer,
}

impl Reply {
    fn new(api_version: &'static str, uid: String, answer: Answer) -> Self {
        Self {
            api_version,
            uid,
            answer,
        }
    }
}

impl crate::server::Handler for Admission {
    async fn handle(&self, body: Bytes) -> Bytes {
        use futures::FutureExt;
        // A bug must not drop the apiserver's connection: answer, allowing the pod unchanged.
        let answer = match std::panic::AssertUnwindSafe(self.review_bytes(&body))
            .catch_unwind()
            .await
        {
            Ok(answer) => answer,
            Err(_) => {
                tracing::error!("Admission failed unexpectedly: allowing the pod unchanged");
                let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let mut answer = Answer::allow();
                answer.warnings = vec![INTERNAL_ERROR_WARNING.to_owned()];
                review::respond_bytes(review::version_of(&value), &review::uid_of(&value), answer)
            }
        };
        Bytes::from(answer)
    }
}
