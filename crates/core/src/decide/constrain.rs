//! Step 7's writing, the fifth step of the pass: the arch constraint written into the pod, as a
//! patch against the raw object — `nodeSelector` on the pinned arch, `kubernetes.io/arch In
//! [common]` ANDed into the required terms ([`terms`](super::terms)), the preferred term. What it
//! wrote is what [`labels`](super::labels) must not write again.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::intersect::Placement;
use super::keys::ARCH_LABEL;
use super::outcome::selector;
use super::outcome::{Decision, Signal};
use super::pod::{array, NODE_AFFINITY, PREFERRED};
use super::policy::Policy;
use super::prefer::Preference;
use super::read::Plan;
use super::summary::Constraint;
use super::terms::{self, Group, TermKind};
use crate::patch::PatchBuilder;

fn path<'a>(parts: &[&[&'a str]]) -> Vec<&'a str> {
    parts.concat()
}

/// `spec.nodeSelector[kubernetes.io/arch]`.
const NODE_SELECTOR_ARCH: [&str; 3] = ["spec", "nodeSelector", ARCH_LABEL];

fn preferred_term(arch: &str, weight: i32) -> Value {
    json!({"weight": weight, "preference": {"matchExpressions": [
        {"key": ARCH_LABEL, "operator": "In", "values": [arch]}
    ]}})
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

/// Writes the arch constraint of a pod whose images all run on the placement's common set;
/// returns the `nodeSelector` keys written. A placement that leaves the pod's arch alone writes
/// nothing here.
pub(crate) fn write<'a, 'p>(
    patch: &mut PatchBuilder<'_>,
    plan: &Plan<'_>,
    placement: &Placement<'a, '_>,
    preference: Preference<'a>,
    policy: &'p Policy,
    decision: &mut Decision,
) -> BTreeSet<&'p str> {
    let mut written = BTreeSet::new();
    let (analysis, common, windows) = match placement {
        Placement::Untouched {
            reason, may_run_on, ..
        } => {
            decision.signals.push(Signal::Skipped { reason: *reason });
            pinned_node_labels(patch, plan, policy, may_run_on, &mut written);
            return written;
        }
        Placement::Ours {
            analysis,
            common,
            windows,
        } => (analysis, common, windows),
    };
    let Preference { pin, soft } = preference;
    if let Some(previous) = &analysis.previous {
        decision.signals.push(Signal::Recomputed {
            previous: previous.iter().cloned().collect(),
        });
    }

    let before = patch.len();
    let ns_key = NODE_SELECTOR_ARCH;
    match (analysis.node_selector_ours, pin) {
        (true, Some(arch)) if plan.view.node_selector(ARCH_LABEL) != Some(arch) => {
            patch.replace(&ns_key, json!(arch))
        }
        (true, Some(_)) | (false, None) => {}
        (true, None) => patch.remove(&ns_key),
        (false, Some(arch)) => patch.set(&ns_key, json!(arch)),
    }

    // Owned only where it is kept (most pinned pods need no term).
    let common_set = || -> BTreeSet<String> { common.iter().map(|a| (*a).to_owned()).collect() };
    let groups: Vec<Group> = match pin {
        None => terms::groups(&common_set(), policy, windows.as_ref()),
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
                    archs: common_set().into_iter().collect(),
                    extra: Vec::new(),
                }]
            } else {
                Vec::new()
            }
        }
    };
    let mut changed = terms::write(patch, &plan.view, &analysis.terms, &groups);

    let preferences_path = [
        NODE_AFFINITY[0],
        NODE_AFFINITY[1],
        NODE_AFFINITY[2],
        PREFERRED,
    ];
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
    if pin.is_some() {
        written.insert(ARCH_LABEL);
    }
    decision.summary.record(|summary| {
        summary.constraint = match pin {
            Some(arch) => Constraint::Pinned {
                arch: arch.to_owned(),
            },
            None => Constraint::Constrained {
                archs: common_set().into_iter().collect(),
            },
        }
    });
    written
}

/// Step 9 for a pod that may run on exactly one arch without our arch constraint: that arch's
/// node labels go into `nodeSelector` (ANDed with the pod's own terms), keys the pod sets kept.
/// With several archs they would need one term per arch, which means rewriting the user's own
/// terms: not done.
fn pinned_node_labels<'p>(
    patch: &mut PatchBuilder<'_>,
    plan: &Plan<'_>,
    policy: &'p Policy,
    may_run_on: &BTreeSet<&str>,
    written: &mut BTreeSet<&'p str>,
) {
    let mut archs = may_run_on.iter();
    let (Some(arch), None) = (archs.next(), archs.next()) else {
        return;
    };
    let Some(settings) = policy.architectures.get(*arch) else {
        return;
    };
    for (key, value) in &settings.node_labels {
        if key.is_empty() || plan.view.node_selector_has(key) {
            continue;
        }
        patch.set(&["spec", "nodeSelector", key.as_str()], json!(value));
        written.insert(key.as_str());
    }
}
