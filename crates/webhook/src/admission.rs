//! The admission flow: read an AdmissionReview, look the pod's images up under one deadline,
//! decide (the pure [`crate::decide`]), answer, and count.

pub mod review;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::Value;
use tracing::Instrument;

use crate::decide::{self, Decision, Lookups, Policy, Signal, Verdict};
use crate::lookup::{CredentialSource, PlatformLookup};
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
        }
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
        let span = tracing::info_span!(
            "admission",
            uid = %request.uid,
            namespace = %request.namespace,
            pod = %name,
        );
        let (answer, outcome) = self
            .decide_pod(pod, &request.namespace)
            .instrument(span)
            .await;
        (
            Reply::new(request.api_version, request.uid, answer),
            outcome,
        )
    }

    /// Looks up what the decision needs, decides, counts, and builds the answer.
    pub async fn decide_pod(&self, pod: &Value, namespace: &str) -> (Answer, &'static str) {
        let decision = self.decision(pod, namespace).await;
        self.record(namespace, &decision);
        let Decision {
            verdict, warnings, ..
        } = decision;
        match verdict {
            Verdict::Unchanged { reason } => {
                tracing::debug!(reason = reason.as_str(), "Allowed unchanged");
                let mut answer = Answer::allow();
                answer.warnings = warnings;
                (answer, outcome::ALLOWED)
            }
            Verdict::Patch { common, ops } => {
                tracing::debug!(platforms = %common.join(","), operations = ops.len(), "Patched");
                let answer = Answer {
                    allowed: true,
                    patch: Some(ops),
                    warnings,
                    status: None,
                };
                (answer, outcome::PATCHED)
            }
            Verdict::Deny { code, message } => {
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
        let lookups = if decide::needs_lookups(pod) {
            self.lookups(pod, namespace).await
        } else {
            Lookups::new()
        };
        decide::decide(pod, &lookups, &self.policy)
    }

    async fn lookups(&self, pod: &Value, namespace: &str) -> Lookups {
        let deadline = tokio::time::Instant::now() + self.lookup_budget();
        let images = decide::pod_images(pod);
        let secrets = pod
            .get("spec")
            .map(crate::pull_secrets::image_pull_secret_names)
            .unwrap_or_default();
        let credentials = tokio::time::timeout_at(
            deadline,
            self.credentials.for_pod(namespace, &secrets, &images),
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
        futures::future::join_all(lookups)
            .await
            .into_iter()
            .collect()
    }

    /// The deadline minus a margin to decide and answer.
    fn lookup_budget(&self) -> Duration {
        let margin = (self.deadline / 10).min(Duration::from_millis(100));
        self.deadline.saturating_sub(margin)
    }

    fn record(&self, namespace: &str, decision: &Decision) {
        let metrics = &self.metrics;
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
                    tracing::warn!(%image, %error, "Image lookup failed");
                    metrics
                        .registry_errors
                        .with_label_values(&[&registry_label(image, &self.configured_registries)])
                        .inc();
                }
                Signal::FailedOpen => tracing::warn!("Allowed unchanged: image lookups failed"),
                Signal::Recomputed { previous } => {
                    tracing::info!(previous = %previous.join(","), "Recomputed our earlier constraint")
                }
            }
        }
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
