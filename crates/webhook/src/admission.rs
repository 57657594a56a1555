//! The admission envelope: read an AdmissionReview, and for a pod being created answer from the
//! [`memo`], gate it ([`gate`]) or decide it ([`crate::decider`]); for debug containers added to
//! a pod (`pods/ephemeralcontainers`), check their images against the pod's node;
//! [`report`] turns the decision into metrics and log lines. Anything else is allowed
//! unchanged. Every body, even a broken one, gets a well-formed AdmissionReview.

pub mod gate;
pub mod memo;
mod prune;
pub mod report;
pub mod review;

use std::time::Instant;

use bytes::Bytes;
use serde_json::Value;

use std::sync::Arc;

use crate::decider::{Decider, SelectionStep};
use crate::facts::FactSource;
use crate::metrics::{outcome, Metrics};
use crate::resolve::{PodAccess, Resolve};
use memo::{Checked, Memo};
use noe_core::decide::{Decision, Lookups, Policy};
use report::Scope;
use review::{Answer, Envelope, Rendered};

/// The warning of a pod allowed unchanged because the webhook itself failed.
pub const INTERNAL_ERROR_WARNING: &str = "noe: internal error, pod allowed unchanged";

/// Answers AdmissionReviews. Cheap to share behind an `Arc`.
pub struct Admission {
    /// What turns a pod into a decision.
    decider: Decider,
    /// `None`: every pod is decided inline (`--lookup-mode=inline`).
    gate: Option<gate::Gate>,
    /// Decisions remembered by pod ([`memo`]), asked only in the combinations it serves
    /// ([`Memo::serves`]); `None` when turned off.
    memo: Option<Memo>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("decider", &self.decider)
            .finish_non_exhaustive()
    }
}

impl Admission {
    /// Knowing nothing of the pod's surroundings but its images.
    pub fn new(resolve: Resolve, policy: Policy, metrics: Metrics) -> Self {
        Self::deciding(Decider::new(resolve, policy, metrics))
    }

    /// Deciding with `decider`, inline, the decision memo on.
    pub fn deciding(decider: Decider) -> Self {
        Self {
            memo: Some(Memo::new(decider.metrics())),
            decider,
            gate: None,
        }
    }

    /// Selects images by compatibility artifacts before deciding (`--image-selection`).
    pub fn with_selection(mut self, selection: crate::selection::Selection) -> Self {
        self.decider = self.decider.with_selection(selection);
        self
    }

    /// Gates pods being created instead of waiting for their lookups (`--lookup-mode=gate` or
    /// `hybrid`); `inline` changes nothing.
    pub fn with_gate(mut self, settings: gate::GateSettings) -> Self {
        self.gate = (settings.mode != gate::LookupMode::Inline).then(|| gate::Gate::new(settings));
        self
    }

    /// Decides every pod afresh, even one already decided ([`memo`] off).
    pub fn without_decision_memo(mut self) -> Self {
        self.memo = None;
        self
    }

    /// Asks `facts` about each pod's surroundings (namespace, node), alongside its lookups.
    pub fn with_facts(mut self, facts: Arc<dyn FactSource>) -> Self {
        self.decider = self.decider.with_facts(facts);
        self
    }

    /// What it decides with.
    pub fn decider(&self) -> &Decider {
        &self.decider
    }

    /// The admission's metrics (for the fact sources' error counter).
    pub fn metrics(&self) -> &Metrics {
        self.decider.metrics()
    }

    /// The memo, when it serves this admission's combination of lookup mode and selection.
    fn memo(&self) -> Option<&Memo> {
        self.memo
            .as_ref()
            .filter(|_| Memo::serves(self.gate.is_some(), self.decider.selects()))
    }

    /// Answers one request body: the serialized response AdmissionReview.
    pub async fn review(&self, body: &[u8]) -> Bytes {
        let started = Instant::now();
        let (reply, outcome) = match self.answer_body(body).await {
            Ok(answered) => answered,
            Err(invalid) => {
                tracing::warn!(error = %invalid, "Invalid admission request");
                let (version, uid) = review::salvage(body);
                let answer = Answer::invalid(invalid.to_string());
                (review::respond(version, &uid, answer), outcome::INVALID)
            }
        };
        self.metrics()
            .observe_duration(outcome, started.elapsed().as_secs_f64());
        reply
    }

    /// A pod creation is answered from the [`memo`] when it holds the pod; anything else is
    /// read whole and answered.
    async fn answer_body(&self, body: &[u8]) -> Result<(Bytes, &'static str), review::Invalid> {
        let envelope = review::parse_envelope(body)?;
        let remembered = match (self.memo(), envelope.object, envelope.namespace.as_deref()) {
            (Some(memo), Some(object), Some(namespace))
                if envelope.is_pod_creation() && !namespace.is_empty() =>
            {
                Some((memo, Memo::key(namespace, object)))
            }
            _ => None,
        };
        let Some((memo, key)) = remembered else {
            return Ok(self.answer(envelope.into_request()?).await);
        };
        let mut checked = Checked::Missed;
        let mut known = Lookups::new();
        if let Some(entry) = memo.get(key) {
            match self.answer_remembered(&entry, &envelope).await {
                Ok(answered) => {
                    memo.count(Checked::Same);
                    return Ok(answered);
                }
                Err(lookups) => {
                    checked = Checked::Changed;
                    known = lookups;
                }
            }
        }
        // Counted once the pod is read: a body refused here is no pod decided.
        let request = envelope.into_request()?;
        memo.count(checked);
        // A pod seen for the first time is decided as without the memo, and only noted: most
        // pods seen once are never seen again, and remembering costs more than deciding.
        if checked == Checked::Missed && memo.first_sight(key) {
            return Ok(self.answer(request).await);
        }
        Ok(self.decide_and_remember(&request, memo, key, known).await)
    }

    /// The answer `entry` remembers, when the lookups of its images, the facts and the
    /// corrections are what its decision saw; else (`Err`) the lookups just made, for the
    /// decision made again.
    async fn answer_remembered(
        &self,
        entry: &memo::Entry,
        envelope: &Envelope<'_>,
    ) -> Result<(Bytes, &'static str), Lookups> {
        let namespace = envelope.namespace.as_deref().unwrap_or_default();
        let scope = Scope::new(&envelope.uid, namespace, &entry.pod);
        let inputs = &entry.inputs;
        let access = PodAccess {
            pull_secrets: &inputs.pull_secrets,
            service_account: inputs.service_account.as_deref(),
        };
        let span = || scope.span().clone();
        let generation = self.decider.generation();
        let (resolved, mut facts) = futures::future::join(
            self.decider
                .resolve()
                .platforms_for(namespace, access, &inputs.images, span),
            self.decider.facts_for(inputs.wants_namespace, &scope),
        )
        .await;
        report::resolved(self.metrics(), &scope, &resolved);
        facts.corrections = self
            .decider
            .corrections_of(&resolved.lookups, resolved.scope);
        if resolved.lookups != inputs.lookups
            || facts != inputs.facts
            || generation != inputs.generation
        {
            return Err(resolved.lookups);
        }
        report::remembered(self.metrics(), &scope, &entry.signals, entry.outcome);
        Ok((
            entry.answer.respond(envelope.api_version, &envelope.uid),
            entry.outcome,
        ))
    }

    /// Decides a pod creation (with the lookups already `known`), answers, and remembers the
    /// answer unless a lookup failed (a failure may be gone by the next pod).
    async fn decide_and_remember(
        &self,
        request: &review::Request<'_>,
        memo: &Memo,
        key: u128,
        known: Lookups,
    ) -> (Bytes, &'static str) {
        let Some(pod) = request.pod_creation() else {
            // Not reached: the envelope was a pod creation with an object.
            let reply = review::respond(request.api_version, &request.uid, Answer::allow());
            return (reply, outcome::ALLOWED);
        };
        let scope = Scope::new(&request.uid, &request.namespace, review::pod_name(pod));
        let (decision, inputs) = self.decider.decide_recorded(pod, &scope, known, true).await;
        let signals = decision.signals.clone();
        let (answer, outcome) = report::answer(self.metrics(), &scope, decision);
        let rendered = Rendered::new(&answer);
        let reply = rendered.respond(request.api_version, &request.uid);
        if let Some(inputs) = inputs.filter(|i| i.lookups.values().all(Result::is_ok)) {
            let entry = memo::Entry {
                pod: scope.pod.into(),
                inputs,
                signals,
                outcome,
                answer: rendered,
            };
            memo.remember(key, entry);
        }
        (reply, outcome)
    }

    async fn answer(&self, request: review::Request<'_>) -> (Bytes, &'static str) {
        let decision = if let Some(pod) = request.pod_creation() {
            let scope = Scope::new(&request.uid, &request.namespace, review::pod_name(pod));
            // The paths most admissions do not take are boxed: inline, their state would make
            // every admission's future larger, and that future is moved into a box per request.
            let decision = if self.decider.selects() {
                Box::pin(self.select_then_decide(pod, &scope)).await
            } else {
                self.decide_or_gate(pod, &scope).await
            };
            Some((scope, decision))
        } else if let Some((pod, old)) = request.ephemeral_update() {
            let scope = Scope::new(&request.uid, &request.namespace, review::pod_name(pod));
            let decision = Box::pin(self.decider.debug_containers(pod, old, &scope)).await;
            Some((scope, decision))
        } else {
            None
        };
        let Some((scope, decision)) = decision else {
            tracing::debug!(uid = %request.uid, kind = %request.kind, operation = ?request.operation, "Not a pod creation: allowed");
            let reply = review::respond(request.api_version, &request.uid, Answer::allow());
            return (reply, outcome::ALLOWED);
        };
        let (answer, outcome) = report::answer(self.metrics(), &scope, decision);
        (
            review::respond(request.api_version, &request.uid, answer),
            outcome,
        )
    }

    /// Image selection (docs/architecture.md, "Image selection"), then the decision (or the
    /// gate) on the pod as selection changed it: the answer's patch is selection's operations
    /// followed by the decision's (written against the changed pod). Skipped in audit mode.
    async fn select_then_decide(&self, pod: &Value, scope: &Scope<'_>) -> Decision {
        match self.decider.select(pod, scope).await {
            SelectionStep::Done(decision) => decision,
            step @ SelectionStep::Decide { .. } => {
                let decision = self.decide_or_gate(step.pod().unwrap_or(pod), scope).await;
                step.finish(decision)
            }
        }
    }
}

impl crate::server::Handler for Admission {
    async fn handle(&self, body: Bytes) -> Bytes {
        self.review(&body).await
    }

    /// A bug must not drop the apiserver's connection: answer, allowing the pod unchanged.
    fn recover(&self, body: &[u8]) -> Bytes {
        tracing::error!("Admission failed unexpectedly: allowing the pod unchanged");
        let (version, uid) = review::salvage(body);
        let answer = Answer {
            warnings: vec![INTERNAL_ERROR_WARNING.to_owned()],
            ..Answer::allow()
        };
        review::respond(version, &uid, answer)
    }
}
