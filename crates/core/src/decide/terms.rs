//! The required node selector terms: which are the user's, which are ours to write, and the
//! operations that bring ours to what the decision wants (steps 2, 7 and 9 in
//! docs/architecture.md).
//!
//! We AND a *group* of expressions into every term that has no arch expression of the user's:
//! `kubernetes.io/arch In [archs]`, then the node labels of that arch (when it is one arch), then
//! the Windows build. When the pod may run on several archs and some have node labels, each such
//! arch gets its own copy of the term (terms are ORed), after the term that carries the archs
//! without labels. On reinvocation, what an earlier admission of ours wrote is recognised from the
//! common set our annotation recorded and rewritten; the user's expressions are never touched.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::keys::{ARCH_LABEL, WINDOWS_BUILD_LABEL};
use super::pod::{self, array, is_arch_key, is_empty_term, key_of, NODE_AFFINITY, REQUIRED};
use super::policy::Policy;
use crate::patch::PatchBuilder;

/// What a required term is to the decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TermKind {
    /// Matches no node (`{}`, empty lists) or is not an object: left alone.
    Empty,
    /// Carries the user's own arch expression: left as written.
    User,
    /// Ours to write into. `ours` are the indexes (in `matchExpressions`) of the expressions an
    /// earlier admission of ours added; the others are the user's.
    Base {
        /// Indexes of our earlier expressions.
        ours: Vec<usize>,
    },
}

/// `spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`.
const TERMS_PATH: [&str; 5] = [
    NODE_AFFINITY[0],
    NODE_AFFINITY[1],
    NODE_AFFINITY[2],
    REQUIRED,
    "nodeSelectorTerms",
];

/// The expressions ANDed into a term: `kubernetes.io/arch In [archs]`, then `extra`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Group {
    /// Sorted architectures.
    pub archs: Vec<String>,
    /// Node label expressions of the arch (one-arch groups) and the Windows build expression.
    pub extra: Vec<Value>,
}

impl Group {
    fn expressions(&self) -> impl Iterator<Item = Value> + '_ {
        std::iter::once(arch_expression(&self.archs)).chain(self.extra.iter().cloned())
    }
}

/// `kubernetes.io/arch In [archs]`.
pub(crate) fn arch_expression<S: AsRef<str>>(archs: &[S]) -> Value {
    let values: Vec<&str> = archs.iter().map(AsRef::as_ref).collect();
    json!({"key": ARCH_LABEL, "operator": "In", "values": values})
}

fn labels_of(policy: &Policy, arch: &str) -> Vec<Value> {
    policy
        .architectures
        .get(arch)
        .map(|s| s.node_label_expressions().collect())
        .unwrap_or_default()
}

fn has_labels(policy: &Policy, arch: &str) -> bool {
    policy
        .architectures
        .get(arch)
        .is_some_and(|s| !s.node_labels.is_empty())
}

/// The archs of `allowed` without node labels, when some arch of a multi-arch set has labels.
fn plain(allowed: &BTreeSet<String>, policy: &Policy) -> Option<BTreeSet<String>> {
    if allowed.len() < 2 || !allowed.iter().any(|a| has_labels(policy, a)) {
        return None;
    }
    Some(
        allowed
            .iter()
            .filter(|a| !has_labels(policy, a))
            .cloned()
            .collect(),
    )
}

/// The groups for a pod that may run on `allowed` (non-empty): one group when it is one arch
/// (its node labels ANDed) or when no arch has node labels; else the archs without labels in one
/// group and one group per arch with labels.
pub(crate) fn groups(
    allowed: &BTreeSet<String>,
    policy: &Policy,
    windows: Option<&Value>,
) -> Vec<Group> {
    let windows: Vec<Value> = windows.into_iter().cloned().collect();
    let Some(plain) = plain(allowed, policy) else {
        let mut extra = match allowed.iter().collect::<Vec<_>>().as_slice() {
            [one] => labels_of(policy, one),
            _ => Vec::new(),
        };
        extra.extend(windows);
        return vec![Group {
            archs: allowed.iter().cloned().collect(),
            extra,
        }];
    };
    let mut out = Vec::new();
    if !plain.is_empty() {
        out.push(Group {
            archs: plain.into_iter().collect(),
            extra: windows.clone(),
        });
    }
    for arch in allowed.iter().filter(|a| has_labels(policy, a)) {
        let mut extra = labels_of(policy, arch);
        extra.extend(windows.iter().cloned());
        out.push(Group {
            archs: vec![arch.clone()],
            extra,
        });
    }
    out
}

/// One group, for a pod pinned to `arch` by our nodeSelector.
pub(crate) fn pinned_group(arch: &str, policy: &Policy, windows: Option<&Value>) -> Group {
    let mut extra = labels_of(policy, arch);
    extra.extend(windows.cloned());
    Group {
        archs: vec![arch.to_owned()],
        extra,
    }
}

fn string_set(values: &[Value]) -> Option<BTreeSet<&str>> {
    values.iter().map(Value::as_str).collect()
}

/// The first index after `after`, not in `taken`, whose expression equals `wanted`.
fn find_after(exprs: &[Value], after: usize, taken: &[usize], wanted: &Value) -> Option<usize> {
    exprs
        .iter()
        .enumerate()
        .skip(after.saturating_add(1))
        .find(|(j, e)| !taken.contains(j) && *e == wanted)
        .map(|(j, _)| j)
}

/// The indexes of the expressions an admission of ours wrote into a term, given the common set
/// `previous` our annotation recorded, when the arch expression at `at` is ours.
fn recognise(
    exprs: &[Value],
    at: usize,
    previous: &BTreeSet<String>,
    policy: &Policy,
) -> Option<Vec<usize>> {
    let expr = exprs.get(at)?;
    if key_of(expr) != Some(ARCH_LABEL)
        || expr.get("operator").and_then(Value::as_str) != Some("In")
    {
        return None;
    }
    let values = string_set(array(expr, "values"))?;
    let previous_refs: BTreeSet<&str> = previous.iter().map(String::as_str).collect();
    let mut strip = vec![at];
    let labels: Vec<Value> = if values == previous_refs {
        // The whole set; one arch also had its node labels (each optional: the configuration
        // may have gained labels since).
        if let [one] = values.iter().collect::<Vec<_>>().as_slice() {
            for label in labels_of(policy, one) {
                if let Some(j) = find_after(exprs, at, &strip, &label) {
                    strip.push(j);
                }
            }
        }
        Vec::new()
    } else if plain(previous, policy).is_some_and(|p| {
        !p.is_empty() && p.iter().map(String::as_str).collect::<BTreeSet<_>>() == values
    }) {
        Vec::new()
    } else {
        // A per-arch copy: one arch of ours with every one of its node labels after it.
        let [one] = values.iter().copied().collect::<Vec<_>>()[..] else {
            return None;
        };
        if previous.len() < 2 || !previous.contains(one) || !has_labels(policy, one) {
            return None;
        }
        labels_of(policy, one)
    };
    for label in &labels {
        let j = find_after(exprs, at, &strip, label)?;
        strip.push(j);
    }
    let windows = exprs
        .iter()
        .enumerate()
        .skip(at.saturating_add(1))
        .find(|(j, e)| {
            !strip.contains(j)
                && key_of(e) == Some(WINDOWS_BUILD_LABEL)
                && e.get("operator").and_then(Value::as_str) == Some("In")
        });
    if let Some((j, _)) = windows {
        strip.push(j);
    }
    strip.sort_unstable();
    Some(strip)
}

/// Step 2: what each required term is. With our annotation's common set `previous`
/// (reinvocation), a term whose only arch expression is one we write is ours to rewrite.
pub(crate) fn classify(
    terms: &[Value],
    previous: Option<&BTreeSet<String>>,
    policy: &Policy,
) -> Vec<TermKind> {
    terms
        .iter()
        .map(|term| {
            if !term.is_object() || is_empty_term(term) {
                return TermKind::Empty;
            }
            let exprs = array(term, "matchExpressions");
            let arch: Vec<usize> = exprs
                .iter()
                .enumerate()
                .filter(|(_, e)| is_arch_key(e))
                .map(|(i, _)| i)
                .collect();
            match (arch.as_slice(), previous) {
                ([], _) => TermKind::Base { ours: Vec::new() },
                ([at], Some(previous)) => match recognise(exprs, *at, previous, policy) {
                    Some(ours) => TermKind::Base { ours },
                    None => TermKind::User,
                },
                _ => TermKind::User,
            }
        })
        .collect()
}

/// Whether a term holds a Windows build expression of the user's.
pub(crate) fn has_user_windows_build(term: &Value, kind: &TermKind) -> bool {
    let ours: &[usize] = match kind {
        TermKind::Base { ours } => ours,
        _ => &[],
    };
    array(term, "matchExpressions")
        .iter()
        .enumerate()
        .any(|(i, e)| key_of(e) == Some(WINDOWS_BUILD_LABEL) && !ours.contains(&i))
}

/// Brings the terms we write to `groups` (the first group ANDed into each term in place, the
/// others as copies appended); creates the term list when the pod has none. Returns whether
/// anything changed. `view` is the pod `patch` is written against.
pub(crate) fn write(
    patch: &mut PatchBuilder<'_>,
    view: &pod::PodView<'_>,
    kinds: &[TermKind],
    groups: &[Group],
) -> bool {
    if groups.is_empty() {
        // Nothing to create, and nothing to AND into the terms there are.
        return false;
    }
    let terms_path = TERMS_PATH;
    let Some(terms) = view.required_terms() else {
        for group in groups {
            let term = json!({"matchExpressions": group.expressions().collect::<Vec<_>>()});
            patch.append(&terms_path, term);
        }
        return !groups.is_empty();
    };
    let Some((first, others)) = groups.split_first() else {
        return false;
    };
    let mut changed = false;
    // Copies of ours exist only on reinvocation; the bases are compared by their JSON text so a
    // pod with many terms costs linear time.
    let reinvoked = kinds
        .iter()
        .any(|k| matches!(k, TermKind::Base { ours } if !ours.is_empty()));
    let mut bases: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut removals: Vec<usize> = Vec::new();
    let mut copies: Vec<Value> = Vec::new();
    for (index, (term, kind)) in terms.iter().zip(kinds).enumerate() {
        let TermKind::Base { ours } = kind else {
            continue;
        };
        let exprs = array(term, "matchExpressions");
        let base: Vec<&Value> = exprs
            .iter()
            .enumerate()
            .filter(|(i, _)| !ours.contains(i))
            .map(|(_, e)| e)
            .collect();
        if reinvoked {
            let identity =
                serde_json::to_string(&(&base, term.get("matchFields"))).unwrap_or_default();
            if !bases.insert(identity) && !ours.is_empty() {
                // A copy an earlier admission of ours appended: rewritten below with the others.
                removals.push(index);
                continue;
            }
        }
        let desired: Vec<Value> = base
            .iter()
            .map(|e| (*e).clone())
            .chain(first.expressions())
            .collect();
        changed |= rewrite(patch, &terms_path, index, exprs, desired);
        for group in others {
            let mut copy = term.clone();
            let exprs: Vec<Value> = base
                .iter()
                .map(|e| (*e).clone())
                .chain(group.expressions())
                .collect();
            if let Some(map) = copy.as_object_mut() {
                map.insert("matchExpressions".to_owned(), Value::Array(exprs));
            }
            copies.push(copy);
        }
    }
    // Copies already in place (an unchanged reinvocation) stay; else ours are replaced.
    let existing: Vec<&Value> = removals.iter().filter_map(|i| terms.get(*i)).collect();
    if existing.len() == copies.len() && existing.iter().zip(&copies).all(|(a, b)| *a == b) {
        return changed;
    }
    for index in removals.iter().rev() {
        let index = index.to_string();
        patch.remove(&[&terms_path[..], &[index.as_str()]].concat());
        changed = true;
    }
    for copy in copies {
        patch.append(&terms_path, copy);
        changed = true;
    }
    changed
}

/// The operations that turn a term's `matchExpressions` from `existing` into `desired`.
fn rewrite(
    patch: &mut PatchBuilder<'_>,
    terms_path: &[&str],
    index: usize,
    existing: &[Value],
    desired: Vec<Value>,
) -> bool {
    if existing == desired.as_slice() {
        return false;
    }
    let index = index.to_string();
    let path: Vec<&str> = [terms_path, &[index.as_str(), "matchExpressions"]].concat();
    if desired.starts_with(existing) {
        for expr in desired.into_iter().skip(existing.len()) {
            patch.append(&path, expr);
        }
    } else if existing.len() == desired.len() {
        for (k, (old, new)) in existing.iter().zip(desired).enumerate() {
            if *old == new {
                continue;
            }
            let k = k.to_string();
            // Our arch expression with other values: only the values change.
            let mut same_but_values = old.clone();
            if let (Some(map), Some(values)) = (same_but_values.as_object_mut(), new.get("values"))
            {
                map.insert("values".to_owned(), values.clone());
            }
            if same_but_values == new {
                let values = new.get("values").cloned().unwrap_or(Value::Null);
                patch.replace(&[&path[..], &[k.as_str(), "values"]].concat(), values);
            } else {
                patch.replace(&[&path[..], &[k.as_str()]].concat(), new);
            }
        }
    } else {
        patch.set(&path, Value::Array(desired));
    }
    true
}
