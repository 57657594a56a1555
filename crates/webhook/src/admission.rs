//! The admission envelope: read an AdmissionReview ([`review`]), answer it (`admission/flow.rs`: for a pod
//! being created from the [`memo`], gated ([`gate`]) or decided ([`crate::decider`]); for debug
//! containers added to a pod, their images checked against the pod's node; anything else allowed
//! unchanged), report the decision ([`report`]) and write the response ([`response`]). Every
//! body, even a broken one, gets a well-formed AdmissionReview.

mod flow;
pub mod gate;
pub mod memo;
mod prune;
pub mod report;
pub mod response;
pub mod review;

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::decider::Decider;
use crate::facts::FactSource;
use crate::metrics::{outcome, Metrics};
use crate::resolve::Resolve;
use memo::Memo;
use noe_core::decide::Policy;
use response::Answer;

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

    /// Answers one request body: the serialized response AdmissionReview. A body that is no
    /// AdmissionReview we can read is refused with one all the same.
    pub async fn review(&self, body: &[u8]) -> Bytes {
        let started = Instant::now();
        let (reply, outcome) = match self.answer(body).await {
            Ok(answered) => answered,
            Err(invalid) => {
                tracing::warn!(error = %invalid, "Invalid admission request");
                let answer = Answer::invalid(invalid.to_string());
                (response::salvaged(body, answer), outcome::INVALID)
            }
        };
        self.metrics()
            .observe_duration(outcome, started.elapsed().as_secs_f64());
        reply
    }

    /// The answer to a body that is an AdmissionReview ([`flow`]), and its `outcome` label.
    async fn answer(&self, body: &[u8]) -> Result<(Bytes, &'static str), review::Invalid> {
        let envelope = review::parse_envelope(body)?;
        flow::answer(self, envelope).await
    }
}

impl crate::server::Handler for Admission {
    async fn handle(&self, body: Bytes) -> Bytes {
        self.review(&body).await
    }

    /// A bug must not drop the apiserver's connection: answer, allowing the pod unchanged.
    fn recover(&self, body: &[u8]) -> Bytes {
        tracing::error!("Admission failed unexpectedly: allowing the pod unchanged");
        let answer = Answer {
            warnings: vec![INTERNAL_ERROR_WARNING.to_owned()],
            ..Answer::allow()
        };
        response::salvaged(body, answer)
    }
}
