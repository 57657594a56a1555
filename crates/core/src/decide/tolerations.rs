//! Step 9, the seventh step of the pass: the tolerations of every architecture the pod may run
//! on once admitted, and a warning when no node of the cluster has one of them.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::cluster;
use super::facts::Facts;
use super::intersect::Placement;
use super::outcome::Decision;
use super::pod::array;
use super::policy::Policy;
use super::prefer::Preference;
use crate::patch::PatchBuilder;

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

/// The archs the pod may run on once admitted: those of its own constraint its images support,
/// or ours (the pinned arch, else the common set) and those of the user's own arch terms that
/// its images support.
fn may_run_on<'a>(placement: &Placement<'a, '_>, preference: Preference<'a>) -> BTreeSet<&'a str> {
    match placement {
        Placement::Untouched { may_run_on, .. } => may_run_on.clone(),
        Placement::Ours {
            analysis, common, ..
        } => {
            let mut archs: BTreeSet<&str> = match preference.pin {
                Some(arch) => BTreeSet::from([arch]),
                None => common.clone(),
            };
            archs.extend(common.iter().filter(|a| analysis.user_terms.admits(a)));
            archs
        }
    }
}

/// Adds the tolerations of the archs the pod may run on, then warns when no node has any of
/// them (only when they come from resolved images).
pub(crate) fn tolerate(
    patch: &mut PatchBuilder<'_>,
    placement: &Placement<'_, '_>,
    preference: Preference<'_>,
    facts: &Facts,
    policy: &Policy,
    decision: &mut Decision,
) {
    if policy.architectures.is_empty() && facts.cluster_archs.is_none() {
        // No toleration to add, and no node to warn about.
        return;
    }
    let archs = may_run_on(placement, preference);
    let added = add(patch, policy, &archs);
    decision
        .summary
        .record(|summary| summary.tolerations = added);
    let known = match placement {
        Placement::Untouched { resolved, .. } => *resolved,
        Placement::Ours { .. } => true,
    };
    if known {
        cluster::warn_without_nodes(&archs, facts, decision);
    }
}

/// Appends the configured tolerations of each arch of `archs` the pod does not already have;
/// returns the archs that got one.
fn add(patch: &mut PatchBuilder<'_>, policy: &Policy, archs: &BTreeSet<&str>) -> Vec<String> {
    let mut added = Vec::new();
    if policy.architectures.is_empty() {
        return added;
    }
    let raw = patch.doc();
    let mut present: Vec<Value> = raw
        .get("spec")
        .map(|s| array(s, "tolerations"))
        .unwrap_or_default()
        .iter()
        .map(normalized)
        .collect();
    for arch in archs {
        let Some(settings) = policy.architectures.get(*arch) else {
            continue;
        };
        for toleration in &settings.tolerations {
            let key = normalized(toleration);
            if present.contains(&key) {
                continue;
            }
            present.push(key);
            patch.append(&["spec", "tolerations"], toleration.clone());
            if !added.iter().any(|a| a == arch) {
                added.push((*arch).to_owned());
            }
        }
    }
    added
}
