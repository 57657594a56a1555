//! Steps 7–10: the constraints written into the pod, as a patch against the raw object.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::outcome::selector;
use super::pod::{self, array, is_empty_term, Ours, NODE_AFFINITY, PREFERRED, REQUIRED};
use super::{
    Decision, Policy, PreferenceMode, Signal, SkipReason, Verdict, ARCH_LABEL,
    PLATFORMS_ANNOTATION, PREFERRED_LABEL,
};
use crate::patch::PatchBuilder;

const NODE_SELECTOR: [&str; 2] = ["spec", "nodeSelector"];

fn path<'a>(parts: &[&[&'a str]]) -> Vec<&'a str> {
    parts.concat()
}

fn arch_expression(common: &BTreeSet<String>) -> Value {
    json!({"key": ARCH_LABEL, "operator": "In", "values": common.iter().collect::<Vec<_>>()})
}

/// The pod constrains its arch itself (or has no image): only matchNodeLabels apply.
pub(crate) fn labels_only(
    raw: &Value,
    policy: &Policy,
    reason: SkipReason,
    mut decision: Decision,
) -> Decision {
    decision.signals.push(Signal::Skipped { reason });
    let mut patch = PatchBuilder::new(raw);
    match_node_labels(&mut patch, policy, &BTreeSet::new(), &mut decision);
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

/// Step 8: each configured key present in the pod labels goes into `nodeSelector`, unless the
/// pod already sets it (or this patch does).
fn match_node_labels(
    patch: &mut PatchBuilder<'_>,
    policy: &Policy,
    written: &BTreeSet<&str>,
    decision: &mut Decision,
) {
    let raw = patch.doc();
    let mut done: BTreeSet<&str> = BTreeSet::new();
    for key in &policy.match_node_labels {
        let key = key.as_str();
        if key.is_empty() || written.contains(key) || !done.insert(key) {
            continue;
        }
        let Some(value) = pod::label(raw, key) else {
            continue;
        };
        let already = raw
            .get("spec")
            .and_then(|s| s.get("nodeSelector"))
            .and_then(|n| n.get(key))
            .is_some_and(|v| !v.is_null());
        if already {
            continue;
        }
        patch.set(&path(&[&NODE_SELECTOR, &[key]]), json!(value));
        decision.signals.push(Signal::NodeMatchInjection {
            label: key.to_owned(),
        });
    }
}

/// Step 7: ANDs `expr` into every non-empty required term (or makes it the only term when there
/// is no required term list). Returns whether anything was written. `skip` lists terms that
/// already carry our expression (reinvocation).
fn and_into_required_terms(
    patch: &mut PatchBuilder<'_>,
    expr: &Value,
    skip: &BTreeSet<usize>,
) -> bool {
    let terms_path = path(&[&NODE_AFFINITY, &[REQUIRED, "nodeSelectorTerms"]]);
    match pod::required_terms(patch.doc()) {
        None => {
            patch.append(&terms_path, json!({"matchExpressions": [expr]}));
            true
        }
        Some(terms) => {
            let mut wrote = false;
            for (index, term) in terms.iter().enumerate() {
                if is_empty_term(term) || skip.contains(&index) || !term.is_object() {
                    continue;
                }
                let index = index.to_string();
                patch.append(
                    &path(&[&terms_path, &[index.as_str(), "matchExpressions"]]),
                    expr.clone(),
                );
                wrote = true;
            }
            wrote
        }
    }
}

fn preferred_term(arch: &str, weight: i32) -> Value {
    json!({"weight": weight, "preference": {"matchExpressions": [
        {"key": ARCH_LABEL, "operator": "In", "values": [arch]}
    ]}})
}

/// The preferred arch of step 7 and whether it came from the pod label; warns when the label
/// cannot be honoured because it is not schedulable.
fn preferred_arch<'p>(
    raw: &'p Value,
    policy: &'p Policy,
    decision: &mut Decision,
) -> (Option<&'p str>, bool) {
    match pod::label(raw, PREFERRED_LABEL).filter(|a| !a.is_empty()) {
        Some(arch) if policy.is_schedulable(arch) => (Some(arch), true),
        Some(arch) => {
            decision
                .warnings
                .push(format!("could not select preferred arch: {arch}"));
            (policy.preferred(), false)
        }
        None => (policy.preferred(), false),
    }
}

/// Steps 7–10 for a pod whose images all run on `common` (non-empty).
pub(crate) fn constrain(
    raw: &Value,
    policy: &Policy,
    common: BTreeSet<String>,
    ours: Option<Ours>,
    mut decision: Decision,
) -> Decision {
    let (candidate, from_label) = preferred_arch(raw, policy, &mut decision);
    let preferred = match candidate {
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
    let required_mode = policy.preference_mode == PreferenceMode::Required;
    // What the pod should carry: a nodeSelector (required mode, preferred arch available), else
    // the `In [common]` expression in every required term, plus in preferred mode a soft term.
    let want_node_selector = preferred.filter(|_| required_mode);
    let want_preference = preferred.filter(|_| !required_mode);
    let mut patch = PatchBuilder::new(raw);
    let ours = ours.unwrap_or_default();
    if !ours.previous.is_empty() {
        decision.signals.push(Signal::Recomputed {
            previous: ours.previous.iter().cloned().collect(),
        });
    }
    let want = Want {
        node_selector: want_node_selector,
        preference: want_preference,
        candidate,
    };
    if write_arch(&mut patch, policy, &common, &ours, &want) {
        let selector = if want.node_selector.is_some() {
            selector::PREFERRED
        } else if want.preference.is_some() {
            selector::PREFERRED_AFFINITY
        } else {
            selector::AFFINITY
        };
        decision
            .signals
            .push(Signal::ArchSelectorInjected { selector });
    }
    let mut written: BTreeSet<&str> = BTreeSet::new();
    if want_node_selector.is_some() {
        written.insert(ARCH_LABEL);
    }

    match_node_labels(&mut patch, policy, &written, &mut decision);

    // Step 9: tolerations of every arch the pod may now run on.
    let may_run_on: Vec<&str> = match want_node_selector {
        Some(arch) => vec![arch],
        None => common.iter().map(String::as_str).collect(),
    };
    add_tolerations(&mut patch, policy, &may_run_on);

    let value = common
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(",");
    if pod::annotation(raw, PLATFORMS_ANNOTATION) != Some(value.as_str()) {
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
            common: common.into_iter().collect(),
            ops: patch.finish(),
        }
    };
    decision
}

/// The arch constraints the pod should carry.
struct Want<'p> {
    /// `nodeSelector["kubernetes.io/arch"]` (required mode, preferred arch available).
    node_selector: Option<&'p str>,
    /// A soft preferred term (preferred mode, preferred arch available).
    preference: Option<&'p str>,
    /// The preferred arch before intersection (label or flag), to recognise our soft term.
    candidate: Option<&'p str>,
}

/// Writes (or, on reinvocation, rewrites) the arch constraints; true when anything changed.
/// Without a nodeSelector, `kubernetes.io/arch In [common]` goes into every required term; our
/// earlier expressions are rewritten in place and terms without one get it.
fn write_arch(
    patch: &mut PatchBuilder<'_>,
    policy: &Policy,
    common: &BTreeSet<String>,
    ours: &Ours,
    want: &Want<'_>,
) -> bool {
    let raw = patch.doc();
    let before = patch.len();
    let mut changed = false;

    let ns_key = path(&[&NODE_SELECTOR, &[ARCH_LABEL]]);
    match (ours.node_selector, want.node_selector) {
        (true, Some(arch)) if pod::node_selector(raw, ARCH_LABEL) != Some(arch) => {
            patch.replace(&ns_key, json!(arch))
        }
        (true, Some(_)) | (false, None) => {}
        (true, None) => patch.remove(&ns_key),
        (false, Some(arch)) => patch.set(&ns_key, json!(arch)),
    }

    let expr = arch_expression(common);
    let terms_path = path(&[&NODE_AFFINITY, &[REQUIRED, "nodeSelectorTerms"]]);
    if &ours.previous != common {
        for &(term, index) in &ours.expressions {
            let (term, index) = (term.to_string(), index.to_string());
            let values = path(&[&terms_path, &[&term, "matchExpressions", &index, "values"]]);
            patch.replace(&values, expr["values"].clone());
            changed = true;
        }
    }
    if want.node_selector.is_none() || !ours.expressions.is_empty() {
        let skip: BTreeSet<usize> = ours.expressions.iter().map(|&(t, _)| t).collect();
        changed |= and_into_required_terms(patch, &expr, &skip);
    }

    // Our soft term is the one we would write: the candidate preferred arch, with our weight.
    let preferences_path = path(&[&NODE_AFFINITY, &[PREFERRED]]);
    let terms = pod::preferred_terms(raw)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let our_preferences: Vec<usize> = ours
        .preferences
        .iter()
        .copied()
        .filter(|&index| {
            let Some(term) = terms.get(index) else {
                return false;
            };
            let weight = term.get("weight").and_then(Value::as_i64);
            let arch = term
                .get("preference")
                .map(|p| array(p, "matchExpressions"))
                .and_then(|e| e.first())
                .map(|e| array(e, "values"))
                .and_then(|v| v.first())
                .and_then(Value::as_str);
            weight == Some(i64::from(policy.preference_weight))
                && arch.is_some()
                && arch == want.candidate
        })
        .collect();
    match (our_preferences.is_empty(), want.preference) {
        (true, Some(arch)) => patch.append(
            &preferences_path,
            preferred_term(arch, policy.preference_weight),
        ),
        (false, None) => {
            for &index in our_preferences.iter().rev() {
                let index = index.to_string();
                patch.remove(&path(&[&preferences_path, &[&index]]));
            }
        }
        // Ours is already there (same arch and weight), or none is wanted nor present.
        (false, Some(_)) | (true, None) => {}
    }
    // Creations merge into one entry: count both the entries and the writes.
    changed || patch.len() > before
}

/// A toleration with Kubernetes' defaults spelled out, to compare tolerations.
fn normalized(toleration: &Value) -> Value {
    let field = |name: &str| toleration.get(name).cloned().unwrap_or(Value::Null);
    let text = |name: &str, default: &str| match toleration.get(name) {
        Some(Value::String(s)) if !s.is_empty() => json!(s),
        _ => json!(default),
    };
    json!({
        "key": text("key", ""),
        "operator": text("operator", "Equal"),
        "value": text("value", ""),
        "effect": text("effect", ""),
        "tolerationSeconds": field("tolerationSeconds"),
    })
}

fn add_tolerations(patch: &mut PatchBuilder<'_>, policy: &Policy, archs: &[&str]) {
    let raw = patch.doc();
    let mut present: Vec<Value> = raw
        .get("spec")
        .map(|s| array(s, "tolerations"))
        .unwrap_or_default()
        .iter()
        .map(normalized)
        .collect();
    for arch in archs {
        for toleration in policy
            .arch_tolerations
            .get(*arch)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let key = normalized(toleration);
            if present.contains(&key) {
                continue;
            }
            present.push(key);
            patch.append(&["spec", "tolerations"], toleration.clone());
        }
    }
}
