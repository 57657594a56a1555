//! The choice (explicit mode), the constraint (discovered mode) and the patch writing them.
//!
//! Required node affinity is written in KEP-3838's append-only form (the form
//! `crate::patch::release` checks): set whole when the pod has no required term; else one
//! conjunction of requirements appended to each non-empty term, the term count unchanged. A rule
//! whose label form needs several terms while the pod has terms of its own, or has no label
//! form, is pinned by node name (`matchFields metadata.name In [...]`) when at most
//! [`limits::PINNED_NODES`] nodes fit.

use serde_json::{json, Value};

use super::nodes::NodeFacts;
use super::rule::{Rule, Tri};
use super::spec::Spec;
use super::{limits, SelectionError, ARTIFACT_ANNOTATION, PINNED_ANNOTATION, TAG_ANNOTATION};
use crate::patch::{Op, PatchBuilder};

const AFFINITY: [&str; 3] = ["spec", "affinity", "nodeAffinity"];
const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
const PREFERRED: &str = "preferredDuringSchedulingIgnoredDuringExecution";

/// How a pod is kept to the nodes a rule fits.
#[derive(Clone, Debug, PartialEq)]
pub enum Pinning {
    /// Every candidate node fits: nothing to write.
    None,
    /// Node selector terms (ORed lists of ANDed requirements).
    Terms(Vec<Vec<Value>>),
    /// Node names (`matchFields metadata.name In`).
    Names(Vec<String>),
}

/// The set an explicit selection chose.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    /// Its index in the spec.
    pub index: usize,
    /// The image to substitute.
    pub tag: String,
    /// Its weight.
    pub weight: i64,
    /// How many candidate nodes there were.
    pub candidates: usize,
    /// The candidate nodes it fits.
    pub fitting: Vec<String>,
    /// How the pod is kept to them.
    pub pinning: Pinning,
}

/// What a discovered selection requires and prefers.
#[derive(Clone, Debug, PartialEq)]
pub struct Constraint {
    /// How many candidate nodes there were.
    pub candidates: usize,
    /// The candidate nodes where some set of every image holds.
    pub fitting: Vec<String>,
    /// How the pod is kept to them.
    pub pinning: Pinning,
    /// Preferred terms: (weight 1–100, requirements).
    pub preferred: Vec<(i64, Vec<Value>)>,
}

/// Whether the pod has required node selector terms of its own (then several terms cannot be
/// written in the append-only form).
fn has_terms(pod: &Value) -> bool {
    pod.pointer(
        "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
    )
    .and_then(Value::as_array)
    .is_some_and(|t| !t.is_empty())
}

/// How to keep `pod` to the `fitting` nodes of `candidates` under `rule`.
fn pinning(
    pod: &Value,
    rule: &Rule,
    candidates: &[&NodeFacts],
    fitting: &[String],
) -> Result<Pinning, SelectionError> {
    if fitting.len() == candidates.len() {
        return Ok(Pinning::None);
    }
    if let Some(terms) = rule.terms(candidates) {
        if terms.len() == 1 || !has_terms(pod) {
            return Ok(Pinning::Terms(terms));
        }
    }
    if fitting.len() > limits::PINNED_NODES {
        return Err(SelectionError::TooManyToPin {
            nodes: fitting.len(),
            limit: limits::PINNED_NODES,
        });
    }
    Ok(Pinning::Names(fitting.to_vec()))
}

fn fitting(rule: &Rule, candidates: &[&NodeFacts]) -> Vec<String> {
    candidates
        .iter()
        .filter(|n| rule.eval(n) == Tri::True)
        .map(|n| n.name.clone())
        .collect()
}

/// Refuses an evaluation of `rules` on `candidates` past [`limits::EVALUATIONS`].
fn affordable<'r>(
    rules: impl Iterator<Item = &'r Rule>,
    candidates: &[&NodeFacts],
) -> Result<(), SelectionError> {
    let cost = rules
        .map(Rule::cost)
        .fold(0usize, usize::saturating_add)
        .saturating_mul(candidates.len());
    if cost > limits::EVALUATIONS {
        return Err(SelectionError::TooMany {
            what: "comparisons (the values of the spec's rules times the candidate nodes)",
            limit: limits::EVALUATIONS,
        });
    }
    Ok(())
}

/// Explicit mode: the highest-weight set that fits at least one candidate node (ties: the first
/// in document order), and how the pod is kept to the nodes it fits.
pub fn choose(
    pod: &Value,
    spec: &Spec,
    candidates: &[&NodeFacts],
) -> Result<Choice, SelectionError> {
    if candidates.is_empty() {
        return Err(SelectionError::NoCandidates);
    }
    affordable(spec.sets.iter().map(|s| &s.rule), candidates)?;
    let mut best: Option<(usize, Vec<String>)> = None;
    for (index, set) in spec.sets.iter().enumerate() {
        if best
            .as_ref()
            .is_some_and(|(b, _)| spec.sets.get(*b).is_some_and(|b| b.weight >= set.weight))
        {
            continue;
        }
        let fits = fitting(&set.rule, candidates);
        if !fits.is_empty() {
            best = Some((index, fits));
        }
    }
    let (index, fits) = best.ok_or(SelectionError::NoMatch {
        candidates: candidates.len(),
    })?;
    let set = spec
        .sets
        .get(index)
        .ok_or(SelectionError::NoMatch { candidates: 0 })?;
    Ok(Choice {
        index,
        tag: set.tag.clone(),
        weight: set.weight,
        candidates: candidates.len(),
        pinning: pinning(pod, &set.rule, candidates, &fits)?,
        fitting: fits,
    })
}

/// Discovered mode: the pod may run where, for every image's spec, at least one set holds;
/// heavier sets are preferred (weight clamped 1–100, sets of weight ≤ 0 add no preference).
pub fn constrain(
    pod: &Value,
    specs: &[&Spec],
    candidates: &[&NodeFacts],
) -> Result<Constraint, SelectionError> {
    if candidates.is_empty() {
        return Err(SelectionError::NoCandidates);
    }
    affordable(
        specs
            .iter()
            .flat_map(|s| s.sets.iter().map(|set| &set.rule)),
        candidates,
    )?;
    let rule = Rule::All(
        specs
            .iter()
            .map(|s| Rule::Any(s.sets.iter().map(|set| set.rule.clone()).collect()))
            .collect(),
    );
    let fits = fitting(&rule, candidates);
    if fits.is_empty() {
        return Err(SelectionError::NoMatch {
            candidates: candidates.len(),
        });
    }
    let mut preferred = Vec::new();
    for set in specs.iter().flat_map(|s| &s.sets) {
        if set.weight <= 0 {
            continue;
        }
        for term in set.rule.terms(candidates).unwrap_or_default() {
            if preferred.len() < limits::TERMS {
                preferred.push((set.weight.clamp(1, 100), term));
            }
        }
    }
    Ok(Constraint {
        candidates: candidates.len(),
        pinning: pinning(pod, &rule, candidates, &fits)?,
        fitting: fits,
        preferred,
    })
}

fn path<'a>(tail: &[&'a str]) -> Vec<&'a str> {
    AFFINITY
        .iter()
        .copied()
        .chain(tail.iter().copied())
        .collect()
}

/// Writes `pinning` into the pod's required node affinity.
fn write_pinning(builder: &mut PatchBuilder<'_>, pinning: &Pinning) {
    let (field, conjunctions): (&str, Vec<Vec<Value>>) = match pinning {
        Pinning::None => return,
        Pinning::Terms(terms) => ("matchExpressions", terms.clone()),
        Pinning::Names(names) => (
            "matchFields",
            vec![vec![
                json!({"key": "metadata.name", "operator": "In", "values": names}),
            ]],
        ),
    };
    let terms = builder
        .doc()
        .pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array)
        .filter(|t| !t.is_empty())
        .cloned();
    match (terms, conjunctions.as_slice()) {
        (Some(terms), [conjunction]) => {
            for (i, term) in terms.iter().enumerate() {
                let empty = ["matchExpressions", "matchFields"].iter().all(|f| {
                    term.get(f)
                        .and_then(Value::as_array)
                        .is_none_or(Vec::is_empty)
                });
                if empty {
                    continue;
                }
                let index = i.to_string();
                for requirement in conjunction {
                    builder.append(
                        &path(&[REQUIRED, "nodeSelectorTerms", &index, field]),
                        requirement.clone(),
                    );
                }
            }
        }
        _ => {
            let terms: Vec<Value> = conjunctions
                .into_iter()
                .map(|c| json!({ field: c }))
                .collect();
            builder.set(&path(&[REQUIRED]), json!({ "nodeSelectorTerms": terms }));
        }
    }
}

fn annotate(builder: &mut PatchBuilder<'_>, artifact: &str, tag: &str, pinning: &Pinning) {
    builder.set(
        &["metadata", "annotations", ARTIFACT_ANNOTATION],
        json!(artifact),
    );
    if !tag.is_empty() {
        builder.set(&["metadata", "annotations", TAG_ANNOTATION], json!(tag));
    }
    if let Pinning::Names(names) = pinning {
        builder.set(
            &["metadata", "annotations", PINNED_ANNOTATION],
            json!(format!(
                "{} nodes by name: the features asked are not node labels",
                names.len()
            )),
        );
    }
}

/// Whether an earlier admission already selected for this pod (reinvocation: do nothing).
pub fn already_selected(pod: &Value) -> bool {
    pod.pointer("/metadata/annotations")
        .and_then(|a| a.get(ARTIFACT_ANNOTATION))
        .is_some()
}

/// The patch of an explicit choice: every container and init container whose image is `target`
/// gets the chosen tag; the pinning; the annotations naming `artifact` (its digest) and the tag.
pub fn explicit_patch(
    pod: &Value,
    choice: &Choice,
    target: &str,
    artifact: &str,
) -> Result<Vec<Op>, SelectionError> {
    let mut builder = PatchBuilder::new(pod);
    let mut replaced = 0usize;
    for list in ["containers", "initContainers"] {
        let containers = pod
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        for (i, c) in containers.iter().enumerate() {
            if c.get("image").and_then(Value::as_str) == Some(target) {
                builder.replace(&["spec", list, &i.to_string(), "image"], json!(choice.tag));
                replaced = replaced.saturating_add(1);
            }
        }
    }
    if replaced == 0 {
        return Err(SelectionError::NoTarget(target.to_owned()));
    }
    write_pinning(&mut builder, &choice.pinning);
    annotate(&mut builder, artifact, &choice.tag, &choice.pinning);
    Ok(builder.finish())
}

/// The patch of a discovered constraint; `artifacts` are the artifact digests (annotated,
/// comma-separated).
pub fn discovered_patch(pod: &Value, constraint: &Constraint, artifacts: &[&str]) -> Vec<Op> {
    let mut builder = PatchBuilder::new(pod);
    write_pinning(&mut builder, &constraint.pinning);
    for (weight, term) in &constraint.preferred {
        builder.append(
            &path(&[PREFERRED]),
            json!({"weight": weight, "preference": {"matchExpressions": term}}),
        );
    }
    annotate(&mut builder, &artifacts.join(","), "", &constraint.pinning);
    builder.finish()
}
