//! Steps 7–10: the constraints written into the pod, as a patch against the raw object.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::outcome::selector;
use super::plan::{Analysis, Plan};
use super::pod::{array, PodView, NODE_AFFINITY, PREFERRED};
use super::terms::{self, Group, TermKind};
use super::{
    cluster, tolerations, Decision, Facts, Policy, PreferenceMode, Signal, SkipReason, Verdict,
    ARCH_LABEL, PLATFORMS_ANNOTATION,
};
use crate::patch::PatchBuilder;

const NODE_SELECTOR: [&str; 2] = ["spec", "nodeSelector"];

fn path<'a>(parts: &[&[&'a str]]) -> Vec<&'a str> {
    parts.concat()
}

/// The arch constraint is not ours to add: only matchNodeLabels (step 8) and the tolerations of
/// the archs the pod may run on (step 9) apply.
pub(crate) fn untouched(
    plan: &Plan<'_>,
    policy: &Policy,
    reason: SkipReason,
    may_run_on: &BTreeSet<&str>,
    mut decision: Decision,
) -> Decision {
    decision.signals.push(Signal::Skipped { reason });
    let mut patch = PatchBuilder::new(plan.pod);
    let written = pinned_node_labels(&mut patch, plan.view, policy, may_run_on);
    match_node_labels(&mut patch, plan.view, policy, &written, &mut decision);
    tolerations::add(&mut patch, policy, may_run_on);
    decision.verdict = if patch.is_empty() {
        Verdict::Unchanged { reason }
    } else {
        Verdict::Patch {
            common: Vec::new(),
            ops: patch.finish(),
        }
    };
    decision
}

/// Step 9 for a pod that may run on exactly one arch without our arch constraint: that arch's
/// node labels go into `nodeSelector` (ANDed with the pod's own terms), keys the pod sets kept.
/// With several archs they would need one term per arch, which means rewriting the user's own
/// terms: not done.
fn pinned_node_labels<'p>(
    patch: &mut PatchBuilder<'_>,
    pod: PodView<'_>,
    policy: &'p Policy,
    may_run_on: &BTreeSet<&str>,
) -> BTreeSet<&'p str> {
    let mut written = BTreeSet::new();
    let mut archs = may_run_on.iter();
    let (Some(arch), None) = (archs.next(), archs.next()) else {
        return written;
    };
    let Some(settings) = policy.architectures.get(*arch) else {
        return written;
    };
    for (key, value) in &settings.node_labels {
        if key.is_empty() || pod.node_selector_has(key) {
            continue;
        }
        patch.set(&path(&[&NODE_SELECTOR, &[key.as_str()]]), json!(value));
        written.insert(key.as_str());
    }
    written
}

/// Step 8: each configured key present in the pod labels goes into `nodeSelector`, unless the
/// pod already sets it (or this patch does).
fn match_node_labels(
    patch: &mut PatchBuilder<'_>,
    pod: PodView<'_>,
    policy: &Policy,
    written: &BTreeSet<&str>,
    decision: &mut Decision,
) {
    let mut done: BTreeSet<&str> = BTreeSet::new();
    for key in &policy.match_node_labels {
        let key = key.as_str();
        if key.is_empty() || written.contains(key) || !done.insert(key) {
            continue;
        }
        let Some(value) = pod.label(key) else {
            continue;
        };
        if pod.node_selector_has(key) {
            continue;
        }
        patch.set(&path(&[&NODE_SELECTOR, &[key]]), json!(value));
        decision.signals.push(Signal::NodeMatchInjection {
            label: key.to_owned(),
        });
    }
}

fn preferred_term(arch: &str, weight: i32) -> Value {
    json!({"weight": weight, "preference": {"matchExpressions": [
        {"key": ARCH_LABEL, "operator": "In", "values": [arch]}
    ]}})
}

/// Step 7's candidate: the pod label if set and schedulable (else a warning), else the
/// namespace's label if schedulable, else the flag. The flag says whether it is the pod label.
fn candidate<'a>(
    plan: &Plan<'a>,
    facts: &'a Facts,
    policy: &'a Policy,
    decision: &mut Decision,
) -> (Option<&'a str>, bool) {
    if let Some(arch) = plan.label_preference {
        if policy.is_schedulable(arch) {
            return (Some(arch), true);
        }
        decision
            .warnings
            .push(format!("could not select preferred arch: {arch}"));
    }
    let namespace = facts
        .namespace_preferred_arch
        .as_deref()
        .filter(|a| !a.is_empty() && policy.is_schedulable(a));
    (namespace.or_else(|| policy.preferred()), false)
}

/// The arch of a preferred term we wrote.
fn preference_arch(term: &Value) -> Option<&str> {
    term.get("preference")
        .map(|p| array(p, "matchExpressions"))
        .and_then(|e| e.first())
        .map(|e| array(e, "values"))
        .and_then(|v| v.first())
        .and_then(Value::as_str)
}

/// Steps 7–10 for a pod whose images all run on `common` (non-empty). `windows` is the Windows
/// build expression, when the pod needs one.
pub(crate) fn constrain(
    plan: &Plan<'_>,
    analysis: &Analysis<'_>,
    facts: &Facts,
    policy: &Policy,
    common: &BTreeSet<&str>,
    windows: Option<Value>,
    mut decision: Decision,
) -> Decision {
    let raw = plan.pod;
    let (candidate, from_label) = candidate(plan, facts, policy, &mut decision);
    let preferred = match candidate {
        // The pod chose its own soft preference: none is added.
        _ if analysis.user_preference => None,
        Some(arch) if common.contains(arch) => Some(arch),
        Some(arch) => {
            decision.signals.push(Signal::PreferredArchNotAvailable {
                arch: arch.to_owned(),
            });
            if from_label {
                decision
                    .warnings
                    .push(format!("could not select preferred arch: {arch}"));
            }
            None
        }
        None => None,
    };
    // Some terms pin the arch themselves: a hard preference would make them impossible.
    let partial = analysis
        .user_terms
        .terms
        .as_ref()
        .is_some_and(|t| !t.is_empty());
    let required_mode = policy.preference_mode == PreferenceMode::Required;
    let pin = preferred.filter(|_| required_mode && !partial);
    let soft = preferred.filter(|_| !required_mode || partial);
    if let Some(previous) = &analysis.previous {
        decision.signals.push(Signal::Recomputed {
            previous: previous.iter().cloned().collect(),
        });
    }

    let mut patch = PatchBuilder::new(raw);
    let before = patch.len();
    let ns_key = path(&[&NODE_SELECTOR, &[ARCH_LABEL]]);
    match (analysis.node_selector_ours, pin) {
        (true, Some(arch)) if plan.view.node_selector(ARCH_LABEL) != Some(arch) => {
            patch.replace(&ns_key, json!(arch))
        }
        (true, Some(_)) | (false, None) => {}
        (true, None) => patch.remove(&ns_key),
        (false, Some(arch)) => patch.set(&ns_key, json!(arch)),
    }

    let common_set: BTreeSet<String> = common.iter().map(|a| (*a).to_owned()).collect();
    let groups: Vec<Group> = match pin {
        None => terms::groups(&common_set, policy, windows.as_ref()),
        Some(arch) => {
            let group = terms::pinned_group(arch, policy, windows.as_ref());
            let ours_in_terms = analysis
                .terms
                .iter()
                .any(|k| matches!(k, TermKind::Base { ours } if !ours.is_empty()));
            if !group.extra.is_empty() {
                vec![group]
            } else if ours_in_terms {
                // Our earlier expression stays, current.
                vec![Group {
                    archs: common_set.iter().cloned().collect(),
                    extra: Vec::new(),
                }]
            } else {
                Vec::new()
            }
        }
    };
    let mut changed = terms::write(&mut patch, &analysis.terms, &groups);

    let preferences_path = path(&[&NODE_AFFINITY, &[PREFERRED]]);
    let existing = plan.view.preferred_terms();
    let keep = analysis
        .our_preferences
        .iter()
        .copied()
        .find(|&i| soft.is_some() && existing.get(i).and_then(preference_arch) == soft);
    for &index in analysis.our_preferences.iter().rev() {
        if Some(index) != keep {
            let index = index.to_string();
            patch.remove(&path(&[&preferences_path, &[&index]]));
        }
    }
    if let (Some(arch), None) = (soft, keep) {
        patch.append(
            &preferences_path,
            preferred_term(arch, policy.preference_weight.get()),
        );
    }
    // Creations merge into one entry: count both the entries and the writes.
    changed |= patch.len() > before;
    if changed {
        let selector = if pin.is_some() {
            selector::PREFERRED
        } else if soft.is_some() {
            selector::PREFERRED_AFFINITY
        } else {
            selector::AFFINITY
        };
        decision
            .signals
            .push(Signal::ArchSelectorInjected { selector });
    }

    let mut written: BTreeSet<&str> = BTreeSet::new();
    if pin.is_some() {
        written.insert(ARCH_LABEL);
    }
    match_node_labels(&mut patch, plan.view, policy, &written, &mut decision);

    // Step 9: the archs the pod may now run on: ours, and those of the user's own arch terms
    // that its images support.
    let mut may_run_on: BTreeSet<&str> = match pin {
        Some(arch) => BTreeSet::from([arch]),
        None => common.clone(),
    };
    may_run_on.extend(common.iter().filter(|a| analysis.user_terms.admits(a)));
    tolerations::add(&mut patch, policy, &may_run_on);
    cluster::warn_without_nodes(&may_run_on, facts, &mut decision);

    let value = common.iter().copied().collect::<Vec<_>>().join(",");
    if plan.view.annotation(PLATFORMS_ANNOTATION) != Some(value.as_str()) {
        patch.set(
            &["metadata", "annotations", PLATFORMS_ANNOTATION],
            json!(value),
        );
    }

    decision.verdict = if patch.is_empty() {
        decision.signals.push(Signal::Skipped {
            reason: SkipReason::AlreadyUpToDate,
        });
        Verdict::Unchanged {
            reason: SkipReason::AlreadyUpToDate,
        }
    } else {
        Verdict::Patch {
            common: common_set.into_iter().collect(),
            ops: patch.finish(),
        }
    };
    decision
}
