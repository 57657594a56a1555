//! What a node is to the evaluation, and which nodes a pod's own constraints already admit
//! (its `nodeSelector` and required node affinity, as the scheduler reads them).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

/// Parses a decimal integer as Go's `strconv.Atoi` does (optional sign, digits).
pub(crate) fn integer(s: &str) -> Option<i64> {
    s.parse::<i64>().ok()
}

/// At most this many nodes are read from a node list (`noe explain --nodes`).
pub const MAX_NODES: usize = 10_000;
/// At most this many labels are kept per node.
const MAX_LABELS: usize = 512;
/// At most this many elements or instances are kept per feature; a feature with more is
/// [`NodeFeatures::truncated`].
pub const MAX_FEATURE_ITEMS: usize = 4096;
/// At most this many features are kept per node (flags, attributes and instances together).
pub const MAX_FEATURES: usize = 512;
/// At most this many elements (instance attributes counted each) are kept per node; the
/// features past it are [`NodeFeatures::truncated`].
pub const MAX_NODE_ITEMS: usize = 16_384;
/// Bytes kept of a feature value (cut at a character boundary): a spec value has at most 63
/// characters, so a longer value equals none before or after the cut.
pub const MAX_VALUE_BYTES: usize = 256;

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

/// NFD's raw features of a node (`NodeFeature.spec.features`), by feature name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeFeatures {
    /// Flag features: their element names.
    pub flags: BTreeMap<String, BTreeSet<String>>,
    /// Attribute features: element name → value.
    pub attributes: BTreeMap<String, BTreeMap<String, String>>,
    /// Instance features: each instance's attributes.
    pub instances: BTreeMap<String, Vec<BTreeMap<String, String>>>,
    /// Features present on the node but not kept whole (past a bound): what they would answer
    /// is unknown, not false.
    pub truncated: BTreeSet<String>,
}

#[derive(Deserialize)]
struct RawElements<T> {
    #[serde(default)]
    elements: Option<T>,
}

#[derive(Deserialize)]
struct RawInstance {
    #[serde(default)]
    attributes: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct RawFeatures {
    #[serde(default)]
    flags: Option<BTreeMap<String, RawElements<BTreeMap<String, Value>>>>,
    #[serde(default)]
    attributes: Option<BTreeMap<String, RawElements<BTreeMap<String, String>>>>,
    #[serde(default)]
    instances: Option<BTreeMap<String, RawElements<Vec<RawInstance>>>>,
}

/// `text` cut to [`MAX_VALUE_BYTES`] at a character boundary.
fn value(mut text: String) -> String {
    if text.len() > MAX_VALUE_BYTES {
        let mut end = MAX_VALUE_BYTES;
        while !text.is_char_boundary(end) {
            end = end.saturating_sub(1);
        }
        text.truncate(end);
    }
    text
}

/// Whether a feature or element name can be named by a spec (longer ones are dropped).
fn nameable(name: &str) -> bool {
    name.len() <= super::limits::KEY_CHARS
}

/// Counts what a node keeps, and names the features that did not fit.
struct Budget {
    items: usize,
    features: usize,
    truncated: BTreeSet<String>,
}

impl Budget {
    /// Whether a feature of `size` items fits; when not, it is remembered as truncated.
    fn admit(&mut self, feature: &str, size: usize) -> bool {
        let fits = size <= MAX_FEATURE_ITEMS
            && self.features < MAX_FEATURES
            && self.items.saturating_add(size) <= MAX_NODE_ITEMS;
        if fits {
            self.items = self.items.saturating_add(size);
            self.features = self.features.saturating_add(1);
        } else if self.truncated.len() < MAX_FEATURES {
            self.truncated.insert(feature.to_owned());
        }
        fits
    }
}

impl NodeFeatures {
    /// Reads `spec.features` of a `NodeFeature` object (`None` when it is not of that shape).
    /// Bounded: [`MAX_FEATURES`] features, [`MAX_FEATURE_ITEMS`] elements per feature,
    /// [`MAX_NODE_ITEMS`] in all (a feature past a bound is kept out and named in
    /// [`Self::truncated`]), values cut to [`MAX_VALUE_BYTES`], names longer than a spec can
    /// write dropped.
    pub fn from_spec_features(features: &Value) -> Option<Self> {
        let raw = RawFeatures::deserialize(features).ok()?;
        let mut budget = Budget {
            items: 0,
            features: 0,
            truncated: BTreeSet::new(),
        };
        let mut out = Self::default();
        for (name, v) in raw.flags.unwrap_or_default() {
            let name = name.to_lowercase();
            let elements = v.elements.unwrap_or_default();
            if nameable(&name) && budget.admit(&name, elements.len()) {
                let names = elements.into_keys().filter(|k| nameable(k)).collect();
                out.flags.insert(name, names);
            }
        }
        for (name, v) in raw.attributes.unwrap_or_default() {
            let name = name.to_lowercase();
            let elements = v.elements.unwrap_or_default();
            if nameable(&name) && budget.admit(&name, elements.len()) {
                let elements = elements
                    .into_iter()
                    .filter(|(k, _)| nameable(k))
                    .map(|(k, v)| (k, value(v)))
                    .collect();
                out.attributes.insert(name, elements);
            }
        }
        for (name, v) in raw.instances.unwrap_or_default() {
            let name = name.to_lowercase();
            let items: Vec<BTreeMap<String, String>> = v
                .elements
                .unwrap_or_default()
                .into_iter()
                .map(|i| i.attributes.unwrap_or_default())
                .collect();
            let size = items.iter().map(|i| i.len().max(1)).sum::<usize>();
            if nameable(&name) && budget.admit(&name, size) {
                let items = items
                    .into_iter()
                    .map(|i| {
                        i.into_iter()
                            .filter(|(k, _)| nameable(k))
                            .map(|(k, v)| (k, value(v)))
                            .collect()
                    })
                    .collect();
                out.instances.insert(name, items);
            }
        }
        out.truncated = budget.truncated;
        Some(out)
    }

    /// The union of two nodes' worth of features (a node described by several `NodeFeature`
    /// objects, as NFD merges them): a feature in both is `self`'s.
    pub fn merged(&self, other: &Self) -> Self {
        let mut out = self.clone();
        for (k, v) in &other.flags {
            out.flags.entry(k.clone()).or_insert_with(|| v.clone());
        }
        for (k, v) in &other.attributes {
            out.attributes.entry(k.clone()).or_insert_with(|| v.clone());
        }
        for (k, v) in &other.instances {
            out.instances.entry(k.clone()).or_insert_with(|| v.clone());
        }
        out.truncated.extend(other.truncated.iter().cloned());
        out
    }

    /// Whether `feature` was present but not kept whole.
    pub fn is_truncated(&self, feature: &str) -> bool {
        self.truncated.contains(feature)
    }
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
