//! Admission that never waits on a registry (`--lookup-mode`, docs/architecture.md, "Lookup
//! modes"). In `gate` mode a pod being created gets the scheduling gate
//! [`GATE`] and the label `arch.noe.adevinta.com/lookup: gated`, the answer goes back at once,
//! and the lookups of its images start at once in the background (into the caches the gate
//! controller reads). In `hybrid` mode the pod is decided inline when every image's platforms
//! come back within `--hybrid-budget` (cached in this process or the shared cache), and gated
//! otherwise. Pods gating could harm are never gated ([`exemption`]), nor pods outside
//! `--gate-object-selector` and `--gate-namespace-selector` ([`selector`], [`namespace_selection`]).

pub mod namespace_selection;
pub mod selector;

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::Semaphore;

use super::Admission;
use crate::decider::Scope;
use crate::resolve::pull_secrets::image_pull_secret_names;
use noe_core::decide::{self, Decision, Verdict};
use noe_core::patch::PatchBuilder;

/// The scheduling gate, the label of gated pods (the gate controller watches `lookup=gated`)
/// and its value: one definition, beside the release that removes them.
pub use noe_core::patch::release::{GATED, GATE_LABEL, SCHEDULING_GATE as GATE};
/// The annotation of a mirror (static) pod.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Background lookups started by admissions at once at most; past it a gated pod's images are
/// looked up by the gate controller alone.
const MAX_PREFETCHES: usize = 1024;

/// `--lookup-mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LookupMode {
    /// Every pod waits for its lookups inside admission (the default).
    #[default]
    Inline,
    /// Pods are gated at creation and released by the gate controller.
    Gate,
    /// Inline when every image is known within the hybrid budget, gated otherwise.
    Hybrid,
}

/// Namespaces whose pods are never gated besides noe's own and `kube-*`: those of the cluster's
/// admission-webhook backends (gating them could deadlock admission). Kept current by the
/// composition root.
#[derive(Clone, Debug, Default)]
pub struct ExemptNamespaces(Arc<RwLock<Arc<BTreeSet<String>>>>);

impl ExemptNamespaces {
    /// Replaces the set.
    pub fn set(&self, namespaces: BTreeSet<String>) {
        let mut current = self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *current = Arc::new(namespaces);
    }

    /// Whether `namespace` is in the set.
    pub fn contains(&self, namespace: &str) -> bool {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(namespace)
    }
}

/// How the admission gates.
#[derive(Clone, Debug)]
pub struct GateSettings {
    /// `gate` or `hybrid` (`inline` needs no settings).
    pub mode: LookupMode,
    /// How long a hybrid admission waits for its images before gating the pod.
    pub hybrid_budget: Duration,
    /// noe's own namespace, never gated.
    pub own_namespace: Option<String>,
    /// Admission-webhook backends' namespaces, never gated.
    pub exempt: ExemptNamespaces,
    /// Only pods whose labels match are gated (`--gate-object-selector`; empty: every pod).
    pub object_selector: selector::Selector,
    /// Only pods of the namespaces it selects are gated (`--gate-namespace-selector`);
    /// `None`: every namespace.
    pub namespaces: Option<namespace_selection::NamespaceSelection>,
}

/// What the admission keeps of the settings.
#[derive(Debug)]
pub(super) struct Gate {
    settings: GateSettings,
    prefetches: Arc<Semaphore>,
}

impl Gate {
    pub(super) fn new(settings: GateSettings) -> Self {
        Self {
            settings,
            prefetches: Arc::new(Semaphore::new(MAX_PREFETCHES)),
        }
    }
}

/// Why a pod is not gated, `None` when it may be. `writes_arch`: the decision would write the
/// pod's arch constraint (it is not skipped, not pinned by the pod itself, and has images).
pub fn exemption(
    pod: &Value,
    namespace: &str,
    writes_arch: bool,
    settings: &GateSettings,
) -> Option<&'static str> {
    let metadata = &pod["metadata"];
    let spec = &pod["spec"];
    if spec["nodeName"].as_str().is_some_and(|n| !n.is_empty()) {
        return Some("node-name");
    }
    if metadata["annotations"][MIRROR_ANNOTATION].is_string() {
        return Some("mirror-pod");
    }
    if !writes_arch {
        return Some("unconstrained");
    }
    let daemon_set = metadata["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|owner| owner["controller"] == json!(true) && owner["kind"] == json!("DaemonSet"));
    if daemon_set {
        return Some("daemonset");
    }
    if namespace == "kube-system" || namespace.starts_with("kube-") {
        return Some("system-namespace");
    }
    if settings.own_namespace.as_deref() == Some(namespace) {
        return Some("own-namespace");
    }
    if settings.exempt.contains(namespace) {
        return Some("webhook-namespace");
    }
    if !settings.object_selector.matches_json(&metadata["labels"]) {
        return Some("object-selector");
    }
    let already = spec["schedulingGates"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|gate| gate["name"] == json!(GATE));
    if already {
        return Some("already-gated");
    }
    None
}

/// The decision of a gated pod: our gate appended, our label set.
pub fn gated(pod: &Value) -> Decision {
    let mut patch = PatchBuilder::new(pod);
    patch.append(&["spec", "schedulingGates"], json!({"name": GATE}));
    patch.set(&["metadata", "labels", GATE_LABEL], json!(GATED));
    Decision::new(Verdict::Patch {
        common: Vec::new(),
        ops: patch.finish(),
    })
}

impl Admission {
    /// The decision of a pod being created: inline, or gated (`--lookup-mode`).
    pub(super) async fn decide_or_gate(&self, pod: &Value, scope: &Scope<'_>) -> Decision {
        match &self.gate {
            None => self.decider.decide(pod, scope).await,
            // Boxed: its state (the background lookups, the namespace selector's read) would
            // otherwise make the future of every admission, gated or not, that much larger, and
            // that future is moved into a box per request.
            Some(gate) => Box::pin(self.gate_or_decide(gate, pod, scope)).await,
        }
    }

    /// [`Admission::decide_or_gate`] with a gate.
    async fn gate_or_decide(&self, gate: &Gate, pod: &Value, scope: &Scope<'_>) -> Decision {
        let (images, exempt) = {
            let plan = decide::plan(pod, self.decider.policy());
            let images: Vec<String> = plan.images().map(str::to_owned).collect();
            let exempt = exemption(pod, scope.namespace, plan.writes_arch(), &gate.settings);
            (images, exempt)
        };
        let exempt = match (exempt, &gate.settings.namespaces) {
            (None, Some(selection)) => match selection.selects(scope.namespace).await {
                Some(true) => None,
                Some(false) => Some("namespace-selector"),
                None => Some("namespace-unknown"),
            },
            (exempt, _) => exempt,
        };
        if let Some(reason) = exempt {
            tracing::debug!(
                namespace = scope.namespace,
                pod = scope.pod,
                reason,
                "Not gated"
            );
            return self.decider.decide(pod, scope).await;
        }
        let secrets = pod
            .get("spec")
            .map(image_pull_secret_names)
            .unwrap_or_default();
        let resolve = self.decider.resolve().clone();
        let namespace = scope.namespace.to_owned();
        let lookups = async move { resolve.platforms(&namespace, &secrets, &images).await };
        if gate.settings.mode == LookupMode::Hybrid {
            // Polled once here: images all in the process cache answer at once.
            let mut lookups = Box::pin(lookups);
            let known = match futures::FutureExt::now_or_never(&mut lookups) {
                Some(resolved) => Some(resolved),
                None => {
                    let task = tokio::spawn(lookups);
                    let waited = tokio::time::timeout(gate.settings.hybrid_budget, task).await;
                    // On timeout the task goes on in the background, into the caches.
                    waited.ok().and_then(Result::ok)
                }
            };
            if known.is_some_and(|resolved| resolved.lookups.values().all(Result::is_ok)) {
                // Every image is cached now: the inline path costs no registry request.
                return self.decider.decide(pod, scope).await;
            }
        } else if let Ok(permit) = gate.prefetches.clone().try_acquire_owned() {
            tokio::spawn(async move {
                lookups.await;
                drop(permit);
            });
        }
        gated(pod)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn settings() -> GateSettings {
        let exempt = ExemptNamespaces::default();
        exempt.set(BTreeSet::from(["gatekeeper-system".to_owned()]));
        GateSettings {
            mode: LookupMode::Gate,
            hybrid_budget: Duration::from_millis(10),
            own_namespace: Some("noe".to_owned()),
            exempt,
            object_selector: "team in (shop),!example.com/no-gate".parse().unwrap(),
            namespaces: None,
        }
    }

    #[test]
    fn pods_gating_could_harm_are_not_gated() {
        let pod = |extra: Value| {
            let mut pod = json!({"metadata": {"name": "web", "labels": {"team": "shop"}}, "spec": {"containers": [{"name": "c", "image": "app:1"}]}});
            json_patch::merge(&mut pod, &extra);
            pod
        };
        let plain = pod(json!({}));
        let table: &[(&str, Value, &str, bool, Option<&str>)] = &[
            ("a plain pod", plain.clone(), "shop", true, None),
            (
                "bound",
                pod(json!({"spec": {"nodeName": "n1"}})),
                "shop",
                true,
                Some("node-name"),
            ),
            (
                "mirror",
                pod(json!({"metadata": {"annotations": {MIRROR_ANNOTATION: "x"}}})),
                "shop",
                true,
                Some("mirror-pod"),
            ),
            (
                "pinned by the pod",
                plain.clone(),
                "shop",
                false,
                Some("unconstrained"),
            ),
            (
                "a DaemonSet's",
                pod(
                    json!({"metadata": {"ownerReferences": [{"kind": "DaemonSet", "controller": true, "name": "d"}]}}),
                ),
                "shop",
                true,
                Some("daemonset"),
            ),
            (
                "kube-system",
                plain.clone(),
                "kube-system",
                true,
                Some("system-namespace"),
            ),
            (
                "kube-public",
                plain.clone(),
                "kube-public",
                true,
                Some("system-namespace"),
            ),
            ("ours", plain.clone(), "noe", true, Some("own-namespace")),
            (
                "a webhook backend's",
                plain.clone(),
                "gatekeeper-system",
                true,
                Some("webhook-namespace"),
            ),
            (
                "outside the object selector",
                pod(json!({"metadata": {"labels": {"team": "bank"}}})),
                "shop",
                true,
                Some("object-selector"),
            ),
            (
                "opted out by a label the object selector excludes",
                pod(json!({"metadata": {"labels": {"example.com/no-gate": ""}}})),
                "shop",
                true,
                Some("object-selector"),
            ),
            (
                "gated already (reinvocation)",
                pod(json!({"spec": {"schedulingGates": [{"name": GATE}]}})),
                "shop",
                true,
                Some("already-gated"),
            ),
        ];
        for (case, pod, namespace, writes, want) in table {
            assert_eq!(
                exemption(pod, namespace, *writes, &settings()),
                *want,
                "{case}"
            );
        }
    }

    #[test]
    fn the_gate_is_appended_and_the_label_set() {
        let pod = json!({"metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"schedulingGates": [{"name": "other.example.com/quota"}]}});
        let Verdict::Patch { ops, .. } = gated(&pod).verdict else {
            panic!("not a patch");
        };
        assert_eq!(
            serde_json::to_value(ops).unwrap(),
            json!([
                {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GATE}},
                {"op": "add", "path": "/metadata/labels/arch.noe.adevinta.com~1lookup", "value": "gated"},
            ])
        );
        let bare = json!({"metadata": {"name": "web"}, "spec": {}});
        let Verdict::Patch { ops, .. } = gated(&bare).verdict else {
            panic!("not a patch");
        };
        assert_eq!(
            serde_json::to_value(ops).unwrap(),
            json!([
                {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]},
                {"op": "add", "path": "/metadata/labels", "value": {GATE_LABEL: "gated"}},
            ])
        );
    }
}
