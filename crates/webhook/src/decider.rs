//! The one decider: from a pod to its decision. It looks the pod's images up with its
//! credentials ([`crate::resolve`]), reads the facts of its surroundings ([`crate::facts`]),
//! applies image selection ([`crate::selection`]) and every source of platform truth (the
//! platform overrides inside the resolver, and the corrections of [`noe_core::truth`] by each
//! image's resolved digest), and calls [`noe_core::decide`]. Admission (inline, gated, hybrid,
//! the decision memo), the gate release, `noe explain`, `noe report`, the policy engines'
//! endpoint and remediation all decide through it.

use std::collections::BTreeMap;
use std::sync::Arc;

use noe_core::decide::{self, Decision, Lookups, Policy};
use noe_core::truth::{Correction, Corrections};
use serde_json::Value;

use crate::facts::{FactRequest, FactSource};
use crate::metrics::Metrics;
use crate::resolve::pull_secrets::image_pull_secret_names;
use crate::resolve::{PodAccess, Resolve, Resolved};
use crate::selection::Selection;

/// Turns pods into decisions. Cheap to clone (its parts are shared).
#[derive(Clone)]
pub struct Decider {
    resolve: Arc<Resolve>,
    /// `None`: nothing to ask (no timer, no allocation on the warm path).
    facts: Option<Arc<dyn FactSource>>,
    policy: Policy,
    metrics: Metrics,
    /// `None`: no image selection (`--image-selection` off).
    selection: Option<Arc<Selection>>,
    /// `None`: no source of corrections (nothing is asked per image).
    corrections: Option<Arc<dyn Corrections>>,
}

impl std::fmt::Debug for Decider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decider")
            .field("resolve", &self.resolve)
            .field("policy", &self.policy)
            .field("corrections", &self.corrections)
            .finish_non_exhaustive()
    }
}

/// What image selection leaves to do before the decision.
pub enum SelectionStep {
    /// Decided (a denial).
    Done(Decision),
    /// Decide on `pod` (the selected pod; `None`: the pod as it is), then [`SelectionStep::finish`]
    /// adds `ops` before the decision's and `warning` to its warnings.
    Decide {
        pod: Option<Value>,
        ops: Vec<noe_core::patch::Op>,
        warning: Option<String>,
    },
}

/// The admission a log line belongs to. Its span (`uid`, `namespace`, `pod`) is built on first
/// use only: on the warm path nothing is logged at the default level, and building a span with
/// three formatted fields for every admission costs a measurable share of the throughput
/// (docs/benchmarks.md).
pub struct Scope<'a> {
    pub uid: &'a str,
    pub namespace: &'a str,
    pub pod: &'a str,
    span: std::sync::OnceLock<tracing::Span>,
    /// Outside a review (`noe explain`): the decision's summary is wanted.
    pub explains: bool,
}

impl<'a> Scope<'a> {
    pub fn new(uid: &'a str, namespace: &'a str, pod: &'a str) -> Self {
        Self {
            uid,
            namespace,
            pod,
            span: std::sync::OnceLock::new(),
            explains: false,
        }
    }

    /// Outside a review (`noe explain`): no span at all, and the decision explained.
    pub fn detached(namespace: &'a str) -> Self {
        Self {
            span: std::sync::OnceLock::from(tracing::Span::none()),
            explains: true,
            ..Self::new("", namespace, "")
        }
    }

    pub fn span(&self) -> &tracing::Span {
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
    pub(crate) fn enter(&self, level: tracing::Level) -> Option<tracing::span::Entered<'_>> {
        (level <= tracing::level_filters::LevelFilter::current()).then(|| self.span().enter())
    }
}

/// What a decision read besides the pod and the policy: what the decision memo
/// ([`crate::admission::memo`]) checks again on a hit (`Decider::recheck`).
#[derive(Debug, Clone, PartialEq)]
pub struct Inputs {
    /// The pod's images, as [`noe_core::decide::Plan::images`] lists them.
    pub images: Vec<String>,
    /// `spec.imagePullSecrets[].name`.
    pub pull_secrets: Vec<String>,
    /// `spec.serviceAccountName`, when not empty.
    pub service_account: Option<String>,
    /// The namespace's preferred arch may decide for this pod.
    pub wants_namespace: bool,
    /// What the lookups found.
    pub lookups: Lookups,
    /// The facts the decision was given (default when none were asked), corrections included.
    pub facts: decide::Facts,
    /// The generation of the corrections it was decided under
    /// ([`noe_core::truth::Corrections::generation`]): never answered under another.
    pub generation: u64,
}

impl Decider {
    /// Knowing nothing of the pod's surroundings but its images, with no correction.
    pub fn new(resolve: Resolve, policy: Policy, metrics: Metrics) -> Self {
        Self {
            resolve: Arc::new(resolve),
            facts: None,
            policy,
            metrics,
            selection: None,
            corrections: None,
        }
    }

    /// Asks `facts` about each pod's surroundings (namespace, node), alongside its lookups.
    #[must_use]
    pub fn with_facts(mut self, facts: Arc<dyn FactSource>) -> Self {
        self.facts = Some(facts);
        self
    }

    /// Selects images by compatibility artifacts before deciding (`--image-selection`).
    #[must_use]
    pub fn with_selection(mut self, selection: Selection) -> Self {
        self.selection = Some(Arc::new(selection));
        self
    }

    /// Leaves out of each image's platforms those `corrections` prove false for the digest it
    /// resolved to (a `Chain` of the verification cache and the learned store).
    #[must_use]
    pub fn with_corrections(mut self, corrections: Arc<dyn Corrections>) -> Self {
        self.corrections = Some(corrections);
        self
    }

    /// The same decider (resolver, caches, facts, selection, corrections) under `policy`: the
    /// gate release's attempts before the last decide with `--on-lookup-error=deny`.
    #[must_use]
    pub fn with_policy(&self, policy: Policy) -> Self {
        Self {
            policy,
            ..self.clone()
        }
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The metrics it counts lookups and image selection in.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub(crate) fn resolve(&self) -> &Arc<Resolve> {
        &self.resolve
    }

    /// Whether it selects images before deciding.
    pub fn selects(&self) -> bool {
        self.selection.is_some()
    }

    /// The generation of what it knows of platform truth: a decision remembered under one is
    /// not answered again under another.
    pub fn generation(&self) -> u64 {
        self.corrections.as_ref().map_or(0, |c| c.generation())
    }

    /// The decision for `pod` in `namespace`, with every lookup done under one deadline, outside
    /// any review (`noe explain`, the gate release); with image selection first, when it is
    /// configured.
    pub async fn decision(&self, pod: &Value, namespace: &str) -> Decision {
        self.decision_with(pod, namespace, Lookups::new()).await
    }

    /// [`Decider::decision`], with the lookups of some images already known (`noe explain`:
    /// the images of a registry host that timed out earlier in the run are not tried again).
    pub async fn decision_with(&self, pod: &Value, namespace: &str, known: Lookups) -> Decision {
        let scope = Scope::detached(namespace);
        if !self.selects() {
            return self.decide_known(pod, &scope, known).await;
        }
        match self.select(pod, &scope).await {
            SelectionStep::Done(decision) => decision,
            selected @ SelectionStep::Decide { .. } => {
                let decision = self
                    .decide_known(selected.pod().unwrap_or(pod), &scope, known)
                    .await;
                selected.finish(decision)
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

    /// The platforms of a running pod's `images` (in `namespace`, with its pull secrets and
    /// service account), each less those the corrections prove false for its digest, and the
    /// corrections applied by image: what remediation judges a pod's node by. An image left with
    /// no platform has an empty list and its corrections beside it (it runs nowhere; never read
    /// it as arch-neutral).
    pub async fn platforms(
        &self,
        namespace: &str,
        access: PodAccess<'_>,
        images: &[String],
    ) -> (Lookups, BTreeMap<String, Vec<Correction>>) {
        let resolved = self
            .resolve
            .platforms_for(namespace, access, images, tracing::Span::none)
            .await;
        let mut lookups = resolved.lookups;
        let known = self.corrections_of(&lookups, resolved.scope);
        let mut applied = BTreeMap::new();
        for (image, corrections) in known {
            let Some(Ok(platforms)) = lookups.get_mut(&image) else {
                continue;
            };
            let corrected = noe_core::truth::correct(platforms, &corrections);
            if corrected.changed() {
                let used: Vec<Correction> = corrected.applied.into_iter().cloned().collect();
                *platforms = Arc::from(corrected.kept);
                applied.insert(image, used);
            }
        }
        (lookups, applied)
    }

    /// Image selection (docs/architecture.md, "Image selection"): a decision already (a
    /// denial), or the pod to decide on. Unchanged in audit mode or without selection.
    pub(crate) async fn select(&self, pod: &Value, scope: &Scope<'_>) -> SelectionStep {
        use crate::selection::Selected as Chosen;
        use tracing::Instrument as _;
        let unchanged = SelectionStep::Decide {
            pod: None,
            ops: Vec::new(),
            warning: None,
        };
        let Some(selection) = self.selection.as_ref() else {
            return unchanged;
        };
        if self.policy.mode == decide::Mode::Audit {
            return unchanged;
        }
        let chosen = self
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
        let outcome = match &chosen {
            None if explicit => Some("denied"),
            None | Some(Chosen::Skip) => None,
            Some(Chosen::Deny(_)) => Some("denied"),
            Some(Chosen::Warn(_)) => Some("warned"),
            Some(Chosen::Patch { .. }) => Some("patched"),
        };
        if let Some(outcome) = outcome {
            self.metrics
                .image_selection
                .with_label_values(&[mode, outcome])
                .inc();
        }
        match chosen {
            None if explicit => SelectionStep::Done(selection_denial(
                "image selection by compatibility artifact: not done within the admission deadline"
                    .to_owned(),
            )),
            None | Some(Chosen::Skip) => unchanged,
            Some(Chosen::Deny(message)) => SelectionStep::Done(selection_denial(message)),
            Some(Chosen::Warn(warning)) => SelectionStep::Decide {
                pod: None,
                ops: Vec::new(),
                warning: Some(warning),
            },
            Some(Chosen::Patch { ops }) => {
                let mut selected = pod.clone();
                match json_patch::patch(&mut selected, &ops) {
                    Ok(()) => SelectionStep::Decide {
                        pod: Some(selected),
                        ops,
                        warning: None,
                    },
                    Err(error) => SelectionStep::Done(selection_denial(format!(
                        "image selection: the patch does not apply ({error})"
                    ))),
                }
            }
        }
    }

    /// The decision of `pod` with every lookup made here.
    pub(crate) async fn decide(&self, pod: &Value, scope: &Scope<'_>) -> Decision {
        self.decide_known(pod, scope, Lookups::new()).await
    }

    /// [`Decider::decide`] with the images of `known` not looked up (their results taken).
    async fn decide_known(&self, pod: &Value, scope: &Scope<'_>, known: Lookups) -> Decision {
        self.decide_recorded(pod, scope, known, false).await.0
    }

    /// The pod is read once ([`decide::plan`]); its images are looked up inside the
    /// admission's span, so registry logs name the pod. The namespace is asked about alongside,
    /// only when its preference may decide. The images of `known` are not looked up (their
    /// results taken). With `record`, what the decision read besides the pod (for the decision
    /// memo).
    pub(crate) async fn decide_recorded(
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
        let access = PodAccess {
            pull_secrets: &secrets,
            // `get` twice, not `pointer`: `Value::pointer` allocates a string per segment.
            service_account: pod
                .get("spec")
                .and_then(|spec| spec.get("serviceAccountName"))
                .and_then(Value::as_str)
                .filter(|name| !name.is_empty()),
        };
        let (lookups, facts) = self
            .look_up(scope, access, &images, wants_namespace, known)
            .await;
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
            generation: self.generation(),
        });
        (decision, inputs)
    }

    /// Whether what `inputs` were decided from is still what a decision would read: the images
    /// looked up again (from the caches, with the pod's pull secrets), the facts asked again,
    /// the corrections and their generation; else (`Err`) the lookups just made, for the
    /// decision made again ([`crate::admission::memo`]).
    pub(crate) async fn recheck(&self, inputs: &Inputs, scope: &Scope<'_>) -> Result<(), Lookups> {
        let access = PodAccess {
            pull_secrets: &inputs.pull_secrets,
            service_account: inputs.service_account.as_deref(),
        };
        let generation = self.generation();
        let (lookups, facts) = self
            .look_up(
                scope,
                access,
                &inputs.images,
                inputs.wants_namespace,
                Lookups::new(),
            )
            .await;
        if lookups != inputs.lookups || facts != inputs.facts || generation != inputs.generation {
            return Err(lookups);
        }
        Ok(())
    }

    /// The platforms of `images` (those of `known` taken as they are) looked up inside the
    /// admission's span, so registry logs name the pod, alongside the facts of its surroundings
    /// ([`Decider::facts_for`]); then the corrections for the digests they resolved to.
    async fn look_up<S: AsRef<str> + Sync>(
        &self,
        scope: &Scope<'_>,
        access: PodAccess<'_>,
        images: &[S],
        wants_namespace: bool,
        known: Lookups,
    ) -> (Lookups, decide::Facts) {
        let span = || scope.span().clone();
        let (resolved, mut facts) = futures::future::join(
            self.resolve
                .platforms_for(scope.namespace, access, images, span),
            self.facts_for(wants_namespace, scope),
        )
        .await;
        count_failures(&self.metrics, scope, &resolved);
        let digest_scope = resolved.scope;
        let mut lookups = resolved.lookups;
        lookups.extend(known);
        facts.corrections = self.corrections_of(&lookups, digest_scope);
        (lookups, facts)
    }

    /// The corrections known for the digest each found image resolved to (read from the
    /// resolver's cache, where its answer is: no registry request), by image.
    fn corrections_of(
        &self,
        lookups: &Lookups,
        scope: Option<noe_registry::cache::Scope>,
    ) -> BTreeMap<String, Vec<Correction>> {
        let mut out = BTreeMap::new();
        let Some(corrections) = &self.corrections else {
            return out;
        };
        for (image, found) in lookups {
            if found.is_err() {
                continue;
            }
            let Some(digest) = self.resolve.digest(image, scope) else {
                continue;
            };
            let known = corrections.for_digest(&digest);
            if !known.is_empty() {
                out.insert(image.clone(), known);
            }
        }
        out
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
    pub(crate) async fn debug_containers(
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
        count_failures(&self.metrics, scope, &resolved);
        let facts = facts.unwrap_or_default();
        decide::check_ephemeral(&images, &resolved.lookups, &facts, &self.policy)
    }
}

impl SelectionStep {
    /// The pod to decide on: the selected one, `None` for the pod as it is.
    pub fn pod(&self) -> Option<&Value> {
        match self {
            Self::Decide { pod, .. } => pod.as_ref(),
            Self::Done(_) => None,
        }
    }

    /// `decision` on the selected pod, with selection's operations first and its warning.
    pub fn finish(self, decision: Decision) -> Decision {
        match self {
            Self::Done(done) => done,
            Self::Decide { ops, warning, .. } => with_selection(decision, ops, warning),
        }
    }
}

/// Counts what the lookups of one pod met: unusable pull secrets and failed lookups per registry.
fn count_failures(metrics: &Metrics, scope: &Scope<'_>, resolved: &Resolved) {
    if resolved.failed_pull_secrets > 0 {
        metrics
            .image_pull_secret_failed
            .with_label_values(&[metrics.namespace_label(scope.namespace)])
            .inc_by(u64::try_from(resolved.failed_pull_secrets).unwrap_or(u64::MAX));
    }
    for registry in &resolved.failed_registries {
        metrics
            .registry_errors
            .with_label_values(&[registry.as_str()])
            .inc();
    }
}

/// A denial by image selection.
fn selection_denial(message: String) -> Decision {
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
