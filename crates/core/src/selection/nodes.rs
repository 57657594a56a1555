//! What a node is to the evaluation, and which nodes a pod's own constraints already admit
//! (its `nodeSelector` and required node affinity, as the scheduler reads them).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::features::NodeFeatures;

/// Parses a decimal integer as Go's `strconv.Atoi` does (optional sign, digits).
pub(crate) fn integer(s: &str) -> Option<i64> {
    s.parse::<i64>().ok()
}

/// At most this many nodes are read from a node list (`noe explain --nodes`).
pub const MAX_NODES: usize = 10_000;
/// At most this many labels are kept per node.
const MAX_LABELS: usize = 512;
/// A node as the evaluation sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeFacts {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`; shared, as the node reflector holds them (image selection reads every
    /// node per admission).
    pub labels: Arc<BTreeMap<String, String>>,
    /// NFD's `NodeFeature` of the node, when known (`--watch-node-features`); shared, as the
    /// reflector holds it.
    pub features: Option<Arc<NodeFeatures>>,
    /// Ready and not cordoned: only these are candidates.
    pub schedulable: bool,
}

fn string_map(value: Option<&Value>) -> BTreeMap<String, String> {
    value
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .take(MAX_LABELS)
                .collect()
        })
        .unwrap_or_default()
}

impl NodeFacts {
    /// A node from its raw object (a `kubectl get nodes -o yaml` item): schedulable unless
    /// cordoned or its `Ready` condition is other than `True` (no conditions: schedulable).
    pub fn from_node(node: &Value) -> Option<Self> {
        let name = node.pointer("/metadata/name")?.as_str()?.to_owned();
        let labels = Arc::new(string_map(node.pointer("/metadata/labels")));
        let cordoned = node
            .pointer("/spec/unschedulable")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let ready = node
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|c| {
                c.iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
            })
            .is_none_or(|c| c.get("status").and_then(Value::as_str) == Some("True"));
        Some(Self {
            name,
            labels,
            features: None,
            schedulable: ready && !cordoned,
        })
    }

    /// The nodes of a `List` (or a single Node), at most [`MAX_NODES`].
    pub fn from_list(list: &Value) -> Vec<Self> {
        match list.get("items").and_then(Value::as_array) {
            Some(items) => items
                .iter()
                .take(MAX_NODES)
                .filter_map(Self::from_node)
                .collect(),
            None => Self::from_node(list).into_iter().collect(),
        }
    }
}

fn strings(value: Option<&Value>) -> Vec<&str> {
    value
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// A node selector requirement (`matchExpressions` or `matchFields` item) against `value`.
fn requirement_holds(req: &Value, value: Option<&str>) -> bool {
    let values = strings(req.get("values"));
    match (req.get("operator").and_then(Value::as_str), value) {
        (Some("In"), Some(v)) => values.contains(&v),
        (Some("NotIn"), None) => true,
        (Some("NotIn"), Some(v)) => !values.contains(&v),
        (Some("Exists"), v) => v.is_some(),
        (Some("DoesNotExist"), v) => v.is_none(),
        (Some(op @ ("Gt" | "Lt")), Some(v)) => {
            match (integer(v), values.first().and_then(|x| integer(x))) {
                (Some(n), Some(bound)) if op == "Gt" => n > bound,
                (Some(n), Some(bound)) => n < bound,
                _ => false,
            }
        }
        _ => false,
    }
}

fn term_holds(term: &Value, node: &NodeFacts) -> bool {
    let expressions = term.get("matchExpressions").and_then(Value::as_array);
    let fields = term.get("matchFields").and_then(Value::as_array);
    let (expressions, fields) = (
        expressions.map_or(&[][..], Vec::as_slice),
        fields.map_or(&[][..], Vec::as_slice),
    );
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions.iter().all(|e| {
        let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
        requirement_holds(e, node.labels.get(key).map(String::as_str))
    }) && fields.iter().all(|f| {
        let name = (f.get("key").and_then(Value::as_str) == Some("metadata.name"))
            .then_some(node.name.as_str());
        requirement_holds(f, name)
    })
}

/// Whether the pod's own `nodeSelector` and required node affinity admit `node`.
pub fn admits(pod: &Value, node: &NodeFacts) -> bool {
    let selector_ok = pod
        .pointer("/spec/nodeSelector")
        .and_then(Value::as_object)
        .is_none_or(|m| {
            m.iter()
                .all(|(k, v)| node.labels.get(k).map(String::as_str) == v.as_str())
        });
    let affinity_ok = pod
        .pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array)
        .is_none_or(|terms| terms.iter().any(|t| term_holds(t, node)));
    selector_ok && affinity_ok
}

/// The schedulable nodes the pod's own constraints admit: all of them, in the order given.
pub fn candidates<'n>(pod: &Value, nodes: &'n [NodeFacts]) -> Vec<&'n NodeFacts> {
    nodes
        .iter()
        .filter(|n| n.schedulable && admits(pod, n))
        .collect()
}
