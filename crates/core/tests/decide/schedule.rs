//! Schedulability of a pod, as the scheduler's node-affinity filter and scoring see it: the
//! synthetic nodes a placement case can tell apart, which of them a pod may land on, and how its
//! preferred terms rank them. Used to judge the decision by where a pod may run, not by the shape
//! of its patch.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

const ARCH: &str = "kubernetes.io/arch";
const BETA_ARCH: &str = "beta.kubernetes.io/arch";
const OS: &str = "kubernetes.io/os";
const BETA_OS: &str = "beta.kubernetes.io/os";
/// The architectures every case is evaluated on, besides those its pods name.
const ARCHES: [&str; 5] = ["amd64", "arm64", "ppc64le", "s390x", "riscv64"];
const OSES: [&str; 2] = ["linux", "windows"];
/// A value no pod names, and a node name no pod names.
const OTHER: &str = "<other>";
/// Refuse to enumerate more nodes than this (a case with too many label keys).
const MAX_NODES: usize = 500_000;

/// A synthetic node: its name and labels.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Node {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

fn array<'v>(value: &'v Value, key: &str) -> &'v [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn node_affinity(spec: &Value) -> Option<&Value> {
    spec.get("affinity")?.get("nodeAffinity")
}

fn required(spec: &Value) -> Option<&Value> {
    node_affinity(spec)?.get("requiredDuringSchedulingIgnoredDuringExecution")
}

fn preferred(spec: &Value) -> &[Value] {
    node_affinity(spec)
        .map(|n| array(n, "preferredDuringSchedulingIgnoredDuringExecution"))
        .unwrap_or_default()
}

/// Label keys and values, and node names, that the pod specs mention.
#[derive(Default)]
struct Universe {
    labels: BTreeMap<String, BTreeSet<String>>,
    names: BTreeSet<String>,
}

impl Universe {
    fn requirement(&mut self, requirement: &Value) {
        let Some(key) = requirement.get("key").and_then(Value::as_str) else {
            return;
        };
        let values = self.labels.entry(canonical(key).to_owned()).or_default();
        for value in array(requirement, "values") {
            if let Some(value) = value.as_str() {
                values.insert(value.to_owned());
                // Gt and Lt compare integers: a value on each side.
                if let Ok(number) = value.parse::<i64>() {
                    values.insert(number.saturating_add(1).to_string());
                    values.insert(number.saturating_sub(1).to_string());
                }
            }
        }
    }

    fn term(&mut self, term: &Value) {
        for requirement in array(term, "matchExpressions") {
            self.requirement(requirement);
        }
        for field in array(term, "matchFields") {
            for value in array(field, "values") {
                if let Some(name) = value.as_str() {
                    self.names.insert(name.to_owned());
                }
            }
        }
    }

    fn spec(&mut self, spec: &Value) {
        if let Some(Value::Object(selector)) = spec.get("nodeSelector") {
            for (key, value) in selector {
                let values = self.labels.entry(canonical(key).to_owned()).or_default();
                if let Some(value) = value.as_str() {
                    values.insert(value.to_owned());
                }
            }
        }
        if let Some(name) = spec.get("nodeName").and_then(Value::as_str) {
            self.names.insert(name.to_owned());
        }
        if let Some(required) = required(spec) {
            for term in array(required, "nodeSelectorTerms") {
                self.term(term);
            }
        }
        for term in preferred(spec) {
            if let Some(preference) = term.get("preference") {
                self.term(preference);
            }
        }
    }
}

/// The beta arch and OS labels carry the same value as the current ones on every node.
fn canonical(key: &str) -> &str {
    match key {
        BETA_ARCH => ARCH,
        BETA_OS => OS,
        other => other,
    }
}

/// Every combination of: each architecture (the five above and any a spec names), each OS, and for
/// every other label key the specs use, each value used, another value and the label absent; node
/// names from the names used plus another. No node carries a label of `never_set`.
pub fn nodes(specs: &[&Value], never_set: &[&str]) -> Vec<Node> {
    let mut universe = Universe::default();
    for spec in specs {
        universe.spec(spec);
    }
    for key in never_set {
        universe.labels.remove(*key);
    }
    let mut dimensions: Vec<(String, Vec<Option<String>>)> = Vec::new();
    let mut arches = universe.labels.remove(ARCH).unwrap_or_default();
    arches.extend(ARCHES.iter().map(|a| (*a).to_owned()));
    let mut oses = universe.labels.remove(OS).unwrap_or_default();
    oses.extend(OSES.iter().map(|o| (*o).to_owned()));
    dimensions.push((ARCH.to_owned(), arches.into_iter().map(Some).collect()));
    dimensions.push((OS.to_owned(), oses.into_iter().map(Some).collect()));
    for (key, values) in universe.labels {
        let mut choices: Vec<Option<String>> = values.into_iter().map(Some).collect();
        choices.push(Some(OTHER.to_owned()));
        choices.push(None);
        dimensions.push((key, choices));
    }
    let mut names: Vec<String> = universe.names.into_iter().collect();
    names.push(OTHER.to_owned());

    let total = dimensions
        .iter()
        .map(|(_, choices)| choices.len())
        .chain([names.len()])
        .try_fold(1usize, usize::checked_mul)
        .filter(|total| *total <= MAX_NODES)
        .expect("too many synthetic nodes for this case");
    let mut out = Vec::with_capacity(total);
    let mut labels = BTreeMap::new();
    expand(&dimensions, &names, &mut labels, &mut out);
    out
}

fn expand(
    dimensions: &[(String, Vec<Option<String>>)],
    names: &[String],
    labels: &mut BTreeMap<String, String>,
    out: &mut Vec<Node>,
) {
    match dimensions.split_first() {
        None => {
            for name in names {
                let mut node_labels = labels.clone();
                for (beta, current) in [(BETA_ARCH, ARCH), (BETA_OS, OS)] {
                    if let Some(value) = labels.get(current) {
                        node_labels.insert(beta.to_owned(), value.clone());
                    }
                }
                out.push(Node {
                    name: name.clone(),
                    labels: node_labels,
                });
            }
        }
        Some(((key, choices), rest)) => {
            for choice in choices {
                match choice {
                    Some(value) => {
                        labels.insert(key.clone(), value.clone());
                    }
                    None => {
                        labels.remove(key);
                    }
                }
                expand(rest, names, labels, out);
            }
            labels.remove(key);
        }
    }
}

fn requirement_matches(requirement: &Value, value: Option<&str>) -> bool {
    let values: Vec<&str> = array(requirement, "values")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let number = |text: &str| text.parse::<i64>().ok();
    match requirement.get("operator").and_then(Value::as_str) {
        Some("In") => value.is_some_and(|v| values.contains(&v)),
        Some("NotIn") => !value.is_some_and(|v| values.contains(&v)),
        Some("Exists") => value.is_some(),
        Some("DoesNotExist") => value.is_none(),
        Some("Gt") => match (
            value.and_then(number),
            values.first().and_then(|v| number(v)),
        ) {
            (Some(label), Some(bound)) => label > bound,
            _ => false,
        },
        Some("Lt") => match (
            value.and_then(number),
            values.first().and_then(|v| number(v)),
        ) {
            (Some(label), Some(bound)) => label < bound,
            _ => false,
        },
        _ => false,
    }
}

/// A node selector term: every requirement matches; a term without any matches no node.
fn term_matches(term: &Value, node: &Node) -> bool {
    let expressions = array(term, "matchExpressions");
    let fields = array(term, "matchFields");
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions.iter().all(|requirement| {
        let key = requirement
            .get("key")
            .and_then(Value::as_str)
            .unwrap_or_default();
        requirement_matches(requirement, node.labels.get(key).map(String::as_str))
    }) && fields.iter().all(|field| {
        field.get("key").and_then(Value::as_str) == Some("metadata.name")
            && requirement_matches(field, Some(&node.name))
    })
}

/// Whether the scheduler may place a pod with this spec on `node`: `nodeName`, `nodeSelector` and
/// the required node affinity (terms ORed; an empty or null term list matches no node).
pub fn eligible(spec: &Value, node: &Node) -> bool {
    if let Some(name) = spec.get("nodeName").and_then(Value::as_str) {
        if !name.is_empty() && name != node.name {
            return false;
        }
    }
    if let Some(Value::Object(selector)) = spec.get("nodeSelector") {
        for (key, value) in selector {
            if node.labels.get(key).map(String::as_str) != value.as_str() {
                return false;
            }
        }
    }
    match required(spec) {
        None | Some(Value::Null) => true,
        Some(required) => array(required, "nodeSelectorTerms")
            .iter()
            .any(|term| term_matches(term, node)),
    }
}

/// The sum of the weights of the preferred terms `node` matches (an empty preference matches all).
pub fn score(spec: &Value, node: &Node) -> i64 {
    preferred(spec)
        .iter()
        .filter(|term| {
            let preference = term.get("preference").unwrap_or(&Value::Null);
            let empty = array(preference, "matchExpressions").is_empty()
                && array(preference, "matchFields").is_empty();
            empty || term_matches(preference, node)
        })
        .map(|term| term.get("weight").and_then(Value::as_i64).unwrap_or(0))
        .sum()
}

/// The eligible nodes of a spec, grouped by preference score, best first.
pub fn ranking(spec: &Value, nodes: &[Node]) -> Vec<BTreeSet<usize>> {
    let mut by_score: BTreeMap<i64, BTreeSet<usize>> = BTreeMap::new();
    for (index, node) in nodes.iter().enumerate() {
        if eligible(spec, node) {
            by_score.entry(score(spec, node)).or_default().insert(index);
        }
    }
    by_score.into_values().rev().collect()
}

/// How two specs compare on `nodes`.
#[derive(Debug, PartialEq, Eq)]
pub enum Comparison {
    /// Same eligible nodes and the same preference ranking.
    Same,
    /// Same eligible nodes; the best-ranked ones are the same, not the whole order.
    SameTop,
    /// Same eligible nodes, different preferences.
    DifferentPreferences,
    /// Different eligible nodes (the first node only one of them may use, and which).
    DifferentNodes(Node, &'static str),
}

pub fn compare(got: &Value, want: &Value, nodes: &[Node]) -> Comparison {
    for node in nodes {
        match (eligible(got, node), eligible(want, node)) {
            (true, false) => return Comparison::DifferentNodes(node.clone(), "only ours"),
            (false, true) => return Comparison::DifferentNodes(node.clone(), "only expected"),
            _ => {}
        }
    }
    let (got, want) = (ranking(got, nodes), ranking(want, nodes));
    if got == want {
        Comparison::Same
    } else if got.first() == want.first() {
        Comparison::SameTop
    } else {
        Comparison::DifferentPreferences
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn terms_are_ored_and_empty_terms_match_nothing() {
        let spec = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{}, {"matchExpressions": [{"key": ARCH, "operator": "In", "values": ["arm64"]}]}]}}}});
        let nodes = nodes(&[&spec], &[]);
        let arches: BTreeSet<&str> = nodes
            .iter()
            .filter(|n| eligible(&spec, n))
            .map(|n| n.labels[ARCH].as_str())
            .collect();
        assert_eq!(arches, BTreeSet::from(["arm64"]));
        let none = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": []}}}});
        assert!(!nodes.iter().any(|n| eligible(&none, n)));
    }
}
