//! The admission envelope: read an AdmissionReview, and for a pod being created look its images
//! up ([`crate::resolve`]), decide ([`noe_core::decide`], pure) and answer; for debug containers
//! added to a pod (`pods/ephemeralcontainers`), check their images against the pod's node;
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

use crate::facts::{FactRequest, FactSource};
use crate::metrics::{outcome, Metrics};
use crate::resolve::pull_secrets::image_pull_secret_names;
use crate::resolve::{PodAccess, Resolve};
use memo::{Checked, Inputs, Memo};
use noe_core::decide::{self, Decision, Lookups, Policy};
use report::Scope;
use review::{Answer, Envelope, Rendered};

/// The warning of a pod allowed unchanged because the webhook itself failed.
pub const INTERNAL_ERROR_WARNING: &str = "noe: internal error, pod allowed unchanged";

/// Answers AdmissionReviews. Cheap to share behind an `Arc`.
pub struct Admission {
    resolve: Arc<Resolve>,
    /// `None`: nothing to ask (no timer, no allocation on the warm path).
    facts: Option<Arc<dyn FactSource>>,
    policy: Policy,
    metrics: Metrics,
    /// `None`: every pod is decided inline (`--lookup-mode=inline`).
    gate: Option<gate::Gate>,
    /// `None`: no image selection (`--image-selection` off).
    selection: Option<Arc<crate::selection::Selection>>,
    /// Decisions remembered by pod ([`memo`]); `None` when pods are gated or images selected
    /// (those paths decide otherwise), or when turned off.
    memo: Option<Memo>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("resolve", &self.resolve)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Admission {
    /// Knowing nothing of the pod's surroundings but its images.
    pub fn new(resolve: Resolve, policy: Policy, metrics: Metrics) -> Self {
        Self {
            resolve: Arc::new(resolve),
            facts: None,
            memo: Some(Memo::new(&metrics)),
            policy,
            metrics,
            gate: None,
            selection: None,
        }
    }

    /// Selects images by compatibility artifacts before deciding (`--image-selection`).
    pub fn with_selection(mut self, selection: crate::selection::Selection) -> Self {
        self.selection = Some(Arc::new(selection));
        self.memo = None;
        self
    }

    /// Gates pods being created instead of waiting for their lookups (`--lookup-mode=gate` or
    /// `hybrid`); `inline` changes nothing.
    pub fn with_gate(mut self, settings: gate::GateSettings) -> Self {
        self.gate = (settings.mode != gate::LookupMode::Inline).then(|| gate::Gate::new(settings));
        if self.gate.is_some() {
            self.memo = None;
        }
        self
    }

    /// Decides every pod afresh, even one already decided ([`memo`] off).
    pub fn without_decision_memo(mut self) -> Self {
        self.memo = None;
        self
    }

    /// Asks `facts` about each pod's surroundings (namespace, node), alongside its lookups.
    pub fn with_facts(mut self, facts: Arc<dyn FactSource>) -> Self {
        self.facts = Some(facts);
        self
    }

    /// The admission's metrics (for the fact sources' error counter).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
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
        self.metrics
            .observe_duration(outcome, started.elapsed().as_secs_f64());
        reply
    }

    /// A pod creation is answered from the [`memo`] when it holds the pod; anything else is
    /// read whole and answered.
    async fn answer_body(&self, body: &[u8]) -> Result<(Bytes, &'static str), review::Invalid> {
        let envelope = review::parse_envelope(body)?;
        let remembered = match (&self.memo, envelope.object, envelope.namespace.as_deref()) {
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

    /// The answer `entry` remembers, when the lookups of its images and the facts are what its
    /// decision saw; else (`Err`) the lookups just made, for the decision made again.
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
        let (resolved, facts) = futures::future::join(
            self.resolve
                .platforms_for(namespace, access, &inputs.images, span),
            self.facts_for(inputs.wants_namespace, &scope),
        )
        .await;
        report::resolved(&self.metrics, &scope, &resolved);
        if resolved.lookups != inputs.lookups || facts != inputs.facts {
            return Err(resolved.lookups);
        }
        report::remembered(&self.metrics, &scope, &entry.signals, entry.outcome);
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
        let (decision, inputs) = self.decide_recorded(pod, &scope, known, true).await;
        let signals = decision.signals.clone();
        let (answer, outcome) = report::answer(&self.metrics, &scope, decision);
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
            let decision = match &self.selection {
                Some(selection) => Box::pin(self.select_then_decide(selection, pod, &scope)).await,
                None => self.decide_or_gate(pod, &scope).await,
            };
            Some((scope, decision))
        } else if let Some((pod, old)) = request.ephemeral_update() {
            let scope = Scope::new(&request.uid, &request.namespace, review::pod_name(pod));
            let decision = Box::pin(self.debug_containers(pod, old, &scope)).await;
            Some((scope, decision))
        } else {
            None
        };
        let Some((scope, decision)) = decision else {
            tracing::debug!(uid = %request.uid, kind = %request.kind, operation = ?request.operation, "Not a pod creation: allowed");
            let reply = review::respond(request.api_version, &request.uid, Answer::allow());
            return (reply, outcome::ALLOWED);
        };
        let (answer, outcome) = report::answer(&self.metrics, &scope, decision);
        (
            review::respond(request.api_version, &request.uid, answer),
            outcome,
        )
    }

    /// The decision for `pod` in `namespace`, with every lookup done under one deadline, outside
    /// any review (`noe explain`); with image selection first, when it is configured.
    pub async fn decision(&self, pod: &Value, namespace: &str) -> Decision {
        let scope = Scope::detached(namespace);
        match &self.selection {
            Some(selection) => self.select_then_decide(selection, pod, &scope).await,
            None => self.decide(pod, &scope).await,
        }
    }

    /// Image selection (docs/architecture.md, "Image selection"), then the decision on the
    /// pod as selection changed it: the answer's patch is selection's operations followed by
    /// the decision's (written against the changed pod). Skipped in audit mode.
    async fn select_then_decide(
        &self,
        selection: &crate::selection::Selection,
        pod: &Value,
        scope: &Scope<'_>,
    ) -> Decision {
        match self.selection_step(selection, pod, scope).await {
            Step::Done(decision) => decision,
            Step::Decide {
                pod: selected,
                ops,
                warning,
            } => {
                let decision = self
                    .decide_or_gate(selected.as_ref().unwrap_or(pod), scope)
                    .await;
                with_selection(decision, ops, warning)
            }
        }
    }

    /// What selection makes of `pod`: a decision already (a denial), or the pod to decide on.
    async fn selection_step(
        &self,
        selection: &crate::selection::Selection,
        pod: &Value,
        scope: &Scope<'_>,
    ) -> Step {
        use crate::selection::Selected;
        use tracing::Instrument as _;
        let unchanged = Step::Decide {
            pod: None,
            ops: Vec::new(),
            warning: None,
        };
        if self.policy.mode == decide::Mode::Audit {
            return unchanged;
        }
        let selected = self
            .resolve
            .bounded(selection.select(pod, scope.namespace))
            .instrument(scope.span().clone())
            .await;
        let explicit = pod
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(|l| l.get(noe_core::selection::ENABLED_LABEL))
            .and_then(Value::as_str)
            == Some("true");
        let mode = if explicit { "explicit" } else { "discovered" };
        let outcome = match &selected {
            None if explicit => Some("denied"),
            None | Some(Selected::Skip) => None,
            Some(Selected::Deny(_)) => Some("denied"),
            Some(Selected::Warn(_)) => Some("warned"),
            Some(Selected::Patch { .. }) => Some("patched"),
        };
        if let Some(outcome) = outcome {
            self.metrics
                .image_selection
                .with_label_values(&[mode, outcome])
                .inc();
        }
        match selected {
            None if explicit => Step::Done(compat_denial(
                "image selection by compatibility artifact: not done within the admission deadline"
                    .to_owned(),
            )),
            None | Some(Selected::Skip) => unchanged,
            Some(Selected::Deny(message)) => Step::Done(compat_denial(message)),
            Some(Selected::Warn(warning)) => Step::Decide {
                pod: None,
                ops: Vec::new(),
                warning: Some(warning),
            },
            Some(Selected::Patch { ops }) => {
                let mut selected = pod.clone();
                match json_patch::patch(&mut selected, &ops) {
                    Ok(()) => Step::Decide {
                        pod: Some(selected),
                        ops,
                        warning: None,
                    },
                    Err(error) => Step::Done(compat_denial(format!(
                        "image selection: the patch does not apply ({error})"
                    ))),
                }
            }
        }
    }

    /// [`Admission::decision`], with the lookups of some images already known (`noe explain`:
    /// the images of a registry host that timed out earlier in the run are not tried again).
    pub async fn decision_with(&self, pod: &Value, namespace: &str, known: Lookups) -> Decision {
        let scope = Scope::detached(namespace);
        let Some(selection) = &self.selection else {
            return self.decide_known(pod, &scope, known).await;
        };
        match self.selection_step(selection, pod, &scope).await {
            Step::Done(decision) => decision,
            Step::Decide {
                pod: selected,
                ops,
                warning,
            } => {
                let decision = self
                    .decide_known(selected.as_ref().unwrap_or(pod), &scope, known)
                    .await;
                with_selection(decision, ops, warning)
            }
        }
    }

    /// What the debug containers `pod` has and `old` had not would meet on the pod's node,
    /// outside any review (`noe explain`).
    pub async fn debug_decision(
        &self,
        pod: &Value,
        old: Option<&Value>,
        namespace: &str,
    ) -> Decision {
        self.debug_containers(pod, old, &Scope::detached(namespace))
            .await
    }

    /// The pod is read once ([`decide::plan`]); its images are looked up inside the admission's
    /// span, so registry logs name the pod. The namespace is asked about alongside, only when
    /// its preference may decide.
    async fn decide(&self, pod: &Value, scope: &Scope<'_>) -> Decision {
        self.decide_known(pod, scope, Lookups::new()).await
    }

    /// [`Admission::decide`] with the images of `known` not looked up (their results taken).
    async fn decide_known(&self, pod: &Value, scope: &Scope<'_>, known: Lookups) -> Decision {
        self.decide_recorded(pod, scope, known, false).await.0
    }

    /// [`Admission::decide_known`], and with `record` what the decision read besides the pod
    /// (for the [`memo`]).
    async fn decide_recorded(
        &self,
        pod: &Value,
        scope: &Scope<'_>,
        known: Lookups,
        record: bool,
    ) -> (Decision, Option<Inputs>) {
        let plan = decide::plan(pod, &self.policy);
        let images: Vec<&str> = plan
            .images()
            .filter(|image| !known.contains_key(*image))
            .collect();
        let secrets = pod
            .get("spec")
            .map(image_pull_secret_names)
            .unwrap_or_default();
        let wants_namespace = plan.wants_namespace_preference(&self.policy);
        let span = || scope.span().clone();
        let access = PodAccess {
            pull_secrets: &secrets,
            // `get` twice, not `pointer`: `Value::pointer` allocates a string per segment.
            service_account: pod
                .get("spec")
                .and_then(|spec| spec.get("serviceAccountName"))
                .and_then(Value::as_str)
                .filter(|name| !name.is_empty()),
        };
        let (resolved, facts) = futures::future::join(
            self.resolve
                .platforms_for(scope.namespace, access, &images, span),
            self.facts_for(wants_namespace, scope),
        )
        .await;
        report::resolved(&self.metrics, scope, &resolved);
        let mut lookups = resolved.lookups;
        lookups.extend(known);
        // A review answers from the verdict; only an explanation reads the summary.
        let decision = if scope.explains {
            decide::decide(&plan, &lookups, &facts, &self.policy)
        } else {
            decide::decide_verdict(&plan, &lookups, &facts, &self.policy)
        };
        let service_account = access.service_account.filter(|_| record).map(str::to_owned);
        let inputs = record.then(|| Inputs {
            images: plan.images().map(str::to_owned).collect(),
            service_account,
            pull_secrets: secrets,
            wants_namespace,
            lookups,
            facts,
        });
        (decision, inputs)
    }

    /// The facts of a pod's surroundings, asked only when they can change the decision: the
    /// cluster's nodes, or the namespace's preference for a pod whose arch the decision writes
    /// without a preference of its own (`wants_namespace`). Unknown facts are left out.
    async fn facts_for(&self, wants_namespace: bool, scope: &Scope<'_>) -> decide::Facts {
        use tracing::Instrument as _;
        let Some(source) = &self.facts else {
            return decide::Facts::default();
        };
        let namespace = wants_namespace && source.knows_namespaces();
        if !source.knows_cluster() && !namespace {
            return decide::Facts::default();
        }
        let request = FactRequest {
            namespace: Some(scope.namespace).filter(|_| namespace),
            node_name: None,
        };
        self.resolve
            .bounded(source.facts(request))
            .instrument(scope.span().clone())
            .await
            .unwrap_or_default()
    }

    /// Debug containers added to a running pod (step 3): their images are looked up alongside
    /// the pod's node, and checked against it. Without a source that knows nodes, or without
    /// new debug images, the update is allowed unchanged and nothing is looked up.
    async fn debug_containers(
        &self,
        pod: &Value,
        old: Option<&Value>,
        scope: &Scope<'_>,
    ) -> Decision {
        use tracing::Instrument as _;
        let images = decide::ephemeral_images(pod, old);
        let node_name = pod
            .get("spec")
            .and_then(|spec| spec.get("nodeName"))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty());
        let source = self.facts.as_ref().filter(|source| source.knows_nodes());
        let (Some(source), Some(node_name), false) = (source, node_name, images.is_empty()) else {
            return decide::check_ephemeral(
                &images,
                &Default::default(),
                &Default::default(),
                &self.policy,
            );
        };
        let owned: Vec<String> = images.iter().map(|i| (*i).to_owned()).collect();
        let secrets = pod
            .get("spec")
            .map(image_pull_secret_names)
            .unwrap_or_default();
        let request = FactRequest {
            namespace: None,
            node_name: Some(node_name),
        };
        let (resolved, facts) = futures::future::join(
            self.resolve.platforms(scope.namespace, &secrets, &owned),
            self.resolve.bounded(source.facts(request)),
        )
        .instrument(scope.span().clone())
        .await;
        report::resolved(&self.metrics, scope, &resolved);
        let facts = facts.unwrap_or_default();
        decide::check_ephemeral(&images, &resolved.lookups, &facts, &self.policy)
    }
}

/// What image selection leaves to do.
enum Step {
    /// Decided (a denial).
    Done(Decision),
    /// Decide on `pod` (the selected pod; `None`: the pod as it is), then add `ops` before the
    /// decision's and `warning` to its warnings.
    Decide {
        pod: Option<Value>,
        ops: Vec<noe_core::patch::Op>,
        warning: Option<String>,
    },
}

/// A denial by image selection.
fn compat_denial(message: String) -> Decision {
    use noe_core::decide::{DenyReason, Verdict, DENY_CODE};
    Decision::new(Verdict::Deny {
        code: DENY_CODE,
        reason: DenyReason::Compatibility,
        message: bounded(message, noe_core::decide::MAX_MESSAGE_CHARS),
    })
}

/// `decision` on the selected pod, with selection's `ops` first and its `warning`.
fn with_selection(
    mut decision: Decision,
    ops: Vec<noe_core::patch::Op>,
    warning: Option<String>,
) -> Decision {
    use noe_core::decide::Verdict;
    if let Some(warning) = warning {
        decision
            .warnings
            .push(bounded(warning, noe_core::decide::MAX_WARNING_CHARS));
    }
    if ops.is_empty() {
        return decision;
    }
    decision.verdict = match decision.verdict {
        Verdict::Unchanged { .. } => Verdict::Patch {
            common: Vec::new(),
            ops,
        },
        Verdict::Patch { common, ops: more } => Verdict::Patch {
            common,
            ops: ops.into_iter().chain(more).collect(),
        },
        deny @ Verdict::Deny { .. } => deny,
    };
    decision
}

/// `text` cut to at most `max` characters.
fn bounded(text: String, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => text[..end].to_owned(),
        None => text,
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
