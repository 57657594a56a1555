//! Reading the pod once (steps 1–4 in docs/architecture.md): whether it is ours to decide, the
//! arch constraint it already carries, its images and its OS. [`Plan::images`] is what the
//! admission looks up; [`decide`](crate::decide::decide) reads the plan, never the pod again for
//! these.

use std::collections::BTreeSet;

use serde_json::Value;

use super::keys::{
    ARCH_LABEL, BETA_ARCH_LABEL, PLATFORMS_ANNOTATION, PREFERRED_LABEL, WINDOWS_BUILD_LABEL,
};
use super::outcome::SkipReason;
use super::pod::{self, array, is_arch_key, ImageKind, PodView};
use super::policy::Policy;
use super::terms::{self, TermKind};

/// What the decision needs to know about a pod, read from its raw JSON once.
#[derive(Debug)]
pub struct Plan<'p> {
    pub(crate) pod: &'p Value,
    /// The pod's members the decision reads, looked up once.
    pub(crate) view: PodView<'p>,
    /// Step 1 (`nodeName`, skip label) or terms that match no node: nothing to decide.
    pub(crate) skip: Option<SkipReason>,
    pub(crate) images: Vec<(&'p str, ImageKind)>,
    pub(crate) os: &'p str,
    pub(crate) arch: Arch<'p>,
    /// The `arch.noe.adevinta.com/preferred` pod label, when set and not empty.
    pub(crate) label_preference: Option<&'p str>,
}

/// Step 2: the arch constraint the pod already carries.
#[derive(Debug)]
pub(crate) enum Arch<'p> {
    /// The pod constrains its arch everywhere: no arch constraint is added.
    User {
        /// The `update_skip_total` reason.
        reason: SkipReason,
        /// The archs the pod's own constraint admits.
        pins: Pins<'p>,
    },
    /// The decision writes the arch constraint.
    Decide(Analysis<'p>),
}

/// The node constraints of a pod whose arch the decision writes.
#[derive(Debug)]
pub(crate) struct Analysis<'p> {
    /// The common set our `platforms` annotation recorded (reinvocation).
    pub previous: Option<BTreeSet<String>>,
    /// `nodeSelector["kubernetes.io/arch"]` is ours (it is one of `previous`).
    pub node_selector_ours: bool,
    /// What each required term is (empty when the pod has no term list).
    pub terms: Vec<TermKind>,
    /// The arch expressions of the terms that carry the user's own (only some terms do).
    pub user_terms: Pins<'p>,
    /// Indexes of the preferred terms an earlier admission of ours wrote, ascending.
    pub our_preferences: Vec<usize>,
    /// The pod has a preferred term of its own on the arch key: it chose its preference.
    pub user_preference: bool,
    /// The pod constrains `node.kubernetes.io/windows-build` itself.
    pub windows_build_pinned: bool,
}

/// The arch requirements of a pod's own constraint: which archs a node may have.
#[derive(Debug, Default)]
pub(crate) struct Pins<'p> {
    /// Arch values of `nodeSelector` (current and beta key): each must equal the node's arch.
    pub node_selector: Vec<&'p str>,
    /// The arch expressions of each (non-empty) required term, ORed; `None` without terms.
    pub terms: Option<Vec<Vec<&'p Value>>>,
}

/// Whether a node of `arch` satisfies a requirement on the arch label (every node has one).
fn requirement_admits(requirement: &Value, arch: &str) -> bool {
    let listed = || {
        array(requirement, "values")
            .iter()
            .any(|v| v.as_str() == Some(arch))
    };
    match requirement.get("operator").and_then(Value::as_str) {
        Some("In") => listed(),
        Some("NotIn") => !listed(),
        Some("Exists") => true,
        // DoesNotExist: every node has an arch label; Gt and Lt: arch labels are not integers.
        _ => false,
    }
}

impl Pins<'_> {
    /// Whether a node of `arch` may satisfy the constraint.
    pub fn admits(&self, arch: &str) -> bool {
        self.node_selector.iter().all(|a| *a == arch)
            && self.terms.as_ref().is_none_or(|terms| {
                terms
                    .iter()
                    .any(|exprs| exprs.iter().all(|e| requirement_admits(e, arch)))
            })
    }

    /// Whether the constraint names archs on every path (a nodeSelector, or an arch expression
    /// in every term), rather than only letting some through.
    pub fn explicit(&self) -> bool {
        !self.node_selector.is_empty()
            || self
                .terms
                .as_ref()
                .is_some_and(|t| !t.is_empty() && t.iter().all(|exprs| !exprs.is_empty()))
    }
}

impl<'p> Plan<'p> {
    /// The images to look up (step 3): containers, init containers and image volumes, each once,
    /// in order of appearance; none when nothing will be decided.
    pub fn images(&self) -> impl Iterator<Item = &'p str> + '_ {
        let images = if self.skip.is_some() {
            &[][..]
        } else {
            &self.images[..]
        };
        images.iter().map(|(image, _)| *image)
    }

    /// Why nothing will be decided, when the pod is left alone whatever its images.
    pub fn skip_reason(&self) -> Option<SkipReason> {
        self.skip
    }

    /// Whether the decision writes the pod's arch constraint: it is not skipped, does not pin
    /// its arch itself, and has images (the pods worth gating).
    pub fn writes_arch(&self) -> bool {
        self.skip.is_none() && matches!(self.arch, Arch::Decide(_)) && !self.images.is_empty()
    }

    /// Whether the namespace's preferred arch may decide (step 7): the decision writes the
    /// pod's arch constraint, the pod has no soft preference of its own and no schedulable
    /// preference label. Only then is the namespace worth asking about.
    pub fn wants_namespace_preference(&self, policy: &Policy) -> bool {
        let Arch::Decide(analysis) = &self.arch else {
            return false;
        };
        self.skip.is_none()
            && !analysis.user_preference
            && self
                .label_preference
                .is_none_or(|arch| !policy.is_schedulable(arch))
    }
}

fn arch_expressions(term: &Value) -> Vec<&Value> {
    array(term, "matchExpressions")
        .iter()
        .filter(|e| is_arch_key(e))
        .collect()
}

/// Reads the pod once: steps 1 to 4.
pub fn plan<'p>(pod: &'p Value, policy: &'p Policy) -> Plan<'p> {
    let view = PodView::new(pod);
    let skip = if view.has_node_name() {
        Some(SkipReason::NodeName)
    } else if view.has_skip_label() {
        Some(SkipReason::SkipLabel)
    } else {
        None
    };
    let mut plan = Plan {
        pod,
        view,
        skip,
        images: view.images(),
        os: view.os(&policy.system_os),
        arch: Arch::User {
            reason: SkipReason::NodeName,
            pins: Pins::default(),
        },
        label_preference: view.label(PREFERRED_LABEL).filter(|a| !a.is_empty()),
    };
    if plan.skip.is_some() {
        return plan;
    }
    match analyse(view, policy) {
        Ok(arch) => plan.arch = arch,
        Err(reason) => plan.skip = Some(reason),
    }
    plan
}

/// Step 2: the arch constraint the pod carries; `Err` when its terms match no node.
fn analyse<'p>(pod: PodView<'p>, policy: &Policy) -> Result<Arch<'p>, SkipReason> {
    let previous: Option<BTreeSet<String>> = pod
        .annotation(PLATFORMS_ANNOTATION)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect::<BTreeSet<String>>()
        })
        .filter(|set| !set.is_empty());
    let raw_terms: &[Value] = pod.required_terms().map(Vec::as_slice).unwrap_or_default();
    let kinds = terms::classify(raw_terms, previous.as_ref(), policy);
    let user_term_pins = || {
        Some(
            raw_terms
                .iter()
                .zip(&kinds)
                .filter(|(_, k)| **k != TermKind::Empty)
                .map(|(t, _)| arch_expressions(t))
                .collect(),
        )
    };
    let selector_archs: Vec<&str> = [ARCH_LABEL, BETA_ARCH_LABEL]
        .into_iter()
        .filter_map(|key| pod.node_selector(key))
        .collect();
    let user = |reason| Arch::User {
        reason,
        pins: Pins {
            node_selector: selector_archs.clone(),
            terms: pod.required_terms().and_then(|_| user_term_pins()),
        },
    };

    let node_selector_ours = match pod.node_selector(ARCH_LABEL) {
        _ if pod.node_selector_has(BETA_ARCH_LABEL) => return Ok(user(SkipReason::NodeSelector)),
        Some(arch) if previous.as_ref().is_some_and(|p| p.contains(arch)) => true,
        _ if pod.node_selector_has(ARCH_LABEL) => return Ok(user(SkipReason::NodeSelector)),
        _ => false,
    };
    if raw_terms.iter().any(pod::pins_node_name) && pod.daemonset_owned() {
        return Ok(user(SkipReason::AffinityFieldSelector));
    }
    if pod.required_terms().is_some() {
        if kinds.iter().all(|k| *k == TermKind::Empty) {
            return Err(SkipReason::EmptyNodeSelectorTerms);
        }
        if kinds
            .iter()
            .all(|k| matches!(k, TermKind::User | TermKind::Empty))
        {
            return Ok(user(SkipReason::AffinityLabelSelector));
        }
    }

    let user_terms = Pins {
        node_selector: Vec::new(),
        terms: Some(
            raw_terms
                .iter()
                .zip(&kinds)
                .filter(|(_, k)| **k == TermKind::User)
                .map(|(t, _)| arch_expressions(t))
                .collect(),
        ),
    };
    let preferred = pod.preferred_terms();
    let our_preferences: Vec<usize> = match &previous {
        Some(previous) => preferred
            .iter()
            .enumerate()
            .filter(|(_, term)| is_our_preference(term, previous, policy))
            .map(|(i, _)| i)
            .collect(),
        None => Vec::new(),
    };
    let user_preference = preferred.iter().enumerate().any(|(i, term)| {
        our_preferences.binary_search(&i).is_err()
            && term
                .get("preference")
                .is_some_and(|p| array(p, "matchExpressions").iter().any(is_arch_key))
    });
    let windows_build_pinned = pod.node_selector_has(WINDOWS_BUILD_LABEL)
        || raw_terms
            .iter()
            .zip(&kinds)
            .any(|(t, k)| terms::has_user_windows_build(t, k));
    Ok(Arch::Decide(Analysis {
        previous,
        node_selector_ours,
        terms: kinds,
        user_terms,
        our_preferences,
        user_preference,
        windows_build_pinned,
    }))
}

/// A preferred term we write: the policy's weight, one expression `kubernetes.io/arch In [a]`
/// with `a` one of the common set our annotation recorded.
fn is_our_preference(term: &Value, previous: &BTreeSet<String>, policy: &Policy) -> bool {
    let Some(preference) = term.get("preference") else {
        return false;
    };
    if term.get("weight").and_then(Value::as_i64) != Some(i64::from(policy.preference_weight.get()))
        || !array(preference, "matchFields").is_empty()
    {
        return false;
    }
    let [expr] = array(preference, "matchExpressions") else {
        return false;
    };
    pod::key_of(expr) == Some(ARCH_LABEL)
        && expr.get("operator").and_then(Value::as_str) == Some("In")
        && matches!(array(expr, "values"), [Value::String(a)] if previous.contains(a))
}
