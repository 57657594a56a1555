//! Reading the raw pod: labels, annotations, images, OS and its node selection fields.

use serde_json::Value;

pub(crate) use crate::images::ImageKind;

use super::keys::{ARCH_LABEL, BETA_ARCH_LABEL, OS_LABEL, SKIP_LABEL};

/// `spec.affinity.nodeAffinity` path segments.
pub(crate) const NODE_AFFINITY: [&str; 3] = ["spec", "affinity", "nodeAffinity"];
/// Required node selector terms.
pub(crate) const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
/// Preferred scheduling terms.
pub(crate) const PREFERRED: &str = "preferredDuringSchedulingIgnoredDuringExecution";

/// The members of a raw pod the decision reads, each looked up once: `metadata`, its `labels`
/// and `annotations`, `spec`, its `nodeSelector` and `affinity.nodeAffinity`. Walking the maps
/// again from the top for every question cost the warm path a measurable share of its CPU
/// (docs/benchmarks.md, "The admission envelope").
#[derive(Clone, Copy, Debug)]
pub(crate) struct PodView<'p> {
    metadata: Option<&'p Value>,
    labels: Option<&'p Value>,
    annotations: Option<&'p Value>,
    spec: Option<&'p Value>,
    node_selector: Option<&'p Value>,
    node_affinity: Option<&'p Value>,
}

impl<'p> PodView<'p> {
    pub(crate) fn new(pod: &'p Value) -> Self {
        let metadata = pod.get("metadata");
        let spec = pod.get("spec");
        Self {
            metadata,
            labels: metadata.and_then(|m| m.get("labels")),
            annotations: metadata.and_then(|m| m.get("annotations")),
            spec,
            node_selector: spec.and_then(|s| s.get("nodeSelector")),
            node_affinity: spec
                .and_then(|s| s.get("affinity"))
                .and_then(|a| a.get("nodeAffinity")),
        }
    }

    /// A pod label value.
    pub(crate) fn label(&self, key: &str) -> Option<&'p str> {
        self.labels?.get(key)?.as_str()
    }

    /// A pod annotation value.
    pub(crate) fn annotation(&self, key: &str) -> Option<&'p str> {
        self.annotations?.get(key)?.as_str()
    }

    /// `spec.nodeSelector[key]` when it is a string.
    pub(crate) fn node_selector(&self, key: &str) -> Option<&'p str> {
        self.node_selector?.get(key)?.as_str()
    }

    /// Whether `spec.nodeSelector` has `key` with a non-null value.
    pub(crate) fn node_selector_has(&self, key: &str) -> bool {
        self.node_selector
            .and_then(|n| n.get(key))
            .is_some_and(|v| !v.is_null())
    }

    /// The required node selector terms, when the list is present (possibly empty).
    pub(crate) fn required_terms(&self) -> Option<&'p Vec<Value>> {
        self.node_affinity?
            .get(REQUIRED)?
            .get("nodeSelectorTerms")?
            .as_array()
    }

    /// The preferred scheduling terms, when present.
    pub(crate) fn preferred_terms(&self) -> &'p [Value] {
        self.node_affinity
            .map(|n| array(n, PREFERRED))
            .unwrap_or_default()
    }

    /// `spec.nodeName` is set and not empty.
    pub(crate) fn has_node_name(&self) -> bool {
        self.spec
            .and_then(|s| s.get("nodeName"))
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty())
    }

    /// The skip label is `"true"`.
    pub(crate) fn has_skip_label(&self) -> bool {
        self.label(SKIP_LABEL) == Some("true")
    }

    /// A DaemonSet controls the pod (an owner reference of kind DaemonSet with `controller:
    /// true`).
    pub(crate) fn daemonset_owned(&self) -> bool {
        self.metadata
            .map(|m| array(m, "ownerReferences"))
            .unwrap_or_default()
            .iter()
            .any(|owner| {
                owner.get("kind").and_then(Value::as_str) == Some("DaemonSet")
                    && owner.get("controller").and_then(Value::as_bool) == Some(true)
            })
    }

    /// Step 3: the images that decide placement ([`images::of_spec`](crate::images::of_spec)).
    pub(crate) fn images(&self) -> Vec<(&'p str, ImageKind)> {
        self.spec.map(crate::images::of_spec).unwrap_or_default()
    }

    /// Step 4: `spec.os.name`, else a `kubernetes.io/os` nodeSelector, else the first required
    /// expression `kubernetes.io/os In [one value]`, else `system_os`.
    pub(crate) fn os(&self, system_os: &'p str) -> &'p str {
        let spec_os = self
            .spec
            .and_then(|s| s.get("os"))
            .and_then(|o| o.get("name"))
            .and_then(Value::as_str);
        if let Some(os) = spec_os.filter(|o| !o.is_empty()) {
            return os;
        }
        if let Some(os) = self.node_selector(OS_LABEL).filter(|o| !o.is_empty()) {
            return os;
        }
        for term in self.required_terms().map(Vec::as_slice).unwrap_or_default() {
            for expr in array(term, "matchExpressions") {
                if key_of(expr) != Some(OS_LABEL)
                    || expr.get("operator").and_then(Value::as_str) != Some("In")
                {
                    continue;
                }
                if let [Value::String(os)] = array(expr, "values") {
                    return os;
                }
            }
        }
        system_os
    }
}

/// The non-null array member `key` of `value`, or an empty slice.
pub(crate) fn array<'v>(value: &'v Value, key: &str) -> &'v [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The `key` of a requirement.
pub(crate) fn key_of(requirement: &Value) -> Option<&str> {
    requirement.get("key").and_then(Value::as_str)
}

/// Whether a requirement is on the arch label (current or beta key).
pub(crate) fn is_arch_key(requirement: &Value) -> bool {
    matches!(key_of(requirement), Some(ARCH_LABEL | BETA_ARCH_LABEL))
}

/// A term with neither expressions nor fields matches no node: we leave it alone.
pub(crate) fn is_empty_term(term: &Value) -> bool {
    array(term, "matchExpressions").is_empty() && array(term, "matchFields").is_empty()
}

/// A term pins the node by name (`matchFields` on `metadata.name`), as the DaemonSet controller
/// writes.
pub(crate) fn pins_node_name(term: &Value) -> bool {
    array(term, "matchFields")
        .iter()
        .any(|f| key_of(f) == Some("metadata.name"))
}
