//! Reading the raw pod: labels, annotations, images, OS and its node selection fields.

use serde_json::Value;

use super::{ARCH_LABEL, BETA_ARCH_LABEL, OS_LABEL, SKIP_LABEL};

/// `spec.affinity.nodeAffinity` path segments.
pub(crate) const NODE_AFFINITY: [&str; 3] = ["spec", "affinity", "nodeAffinity"];
/// Required node selector terms.
pub(crate) const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
/// Preferred scheduling terms.
pub(crate) const PREFERRED: &str = "preferredDuringSchedulingIgnoredDuringExecution";

/// A string-valued member of `metadata.<map>`.
fn metadata_entry<'p>(pod: &'p Value, map: &str, key: &str) -> Option<&'p str> {
    pod.get("metadata")?.get(map)?.get(key)?.as_str()
}

/// A pod label value.
pub(crate) fn label<'p>(pod: &'p Value, key: &str) -> Option<&'p str> {
    metadata_entry(pod, "labels", key)
}

/// A pod annotation value.
pub(crate) fn annotation<'p>(pod: &'p Value, key: &str) -> Option<&'p str> {
    metadata_entry(pod, "annotations", key)
}

/// `spec.nodeSelector[key]` when it is a string.
pub(crate) fn node_selector<'p>(pod: &'p Value, key: &str) -> Option<&'p str> {
    pod.get("spec")?.get("nodeSelector")?.get(key)?.as_str()
}

/// Whether `spec.nodeSelector` has `key` with a non-null value.
pub(crate) fn node_selector_has(pod: &Value, key: &str) -> bool {
    pod.get("spec")
        .and_then(|s| s.get("nodeSelector"))
        .and_then(|n| n.get(key))
        .is_some_and(|v| !v.is_null())
}

/// The required node selector terms, when the list is present (possibly empty).
pub(crate) fn required_terms(pod: &Value) -> Option<&Vec<Value>> {
    pod.get("spec")?
        .get("affinity")?
        .get("nodeAffinity")?
        .get(REQUIRED)?
        .get("nodeSelectorTerms")?
        .as_array()
}

/// The preferred scheduling terms, when present.
pub(crate) fn preferred_terms(pod: &Value) -> &[Value] {
    pod.get("spec")
        .and_then(|s| s.get("affinity"))
        .and_then(|a| a.get("nodeAffinity"))
        .map(|n| array(n, PREFERRED))
        .unwrap_or_default()
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

/// Where an image comes from (step 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ImageKind {
    /// A container or init container: it runs on the node's CPU.
    Container,
    /// An image volume (`spec.volumes[].image.reference`): an OCI artifact without a platform
    /// constrains nothing.
    Volume,
}

/// Step 3: images of `containers`, `initContainers` and image volumes (not ephemeral
/// containers), empty strings dropped, duplicates removed (a container's image stays a container
/// image), in order of appearance.
pub(crate) fn images(pod: &Value) -> Vec<(&str, ImageKind)> {
    let mut images: Vec<(&str, ImageKind)> = Vec::new();
    let Some(spec) = pod.get("spec") else {
        return images;
    };
    // Pods are written by anyone who may create one: no quadratic scan over their lists.
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let containers = ["containers", "initContainers"]
        .into_iter()
        .flat_map(|list| array(spec, list))
        .filter_map(|c| c.get("image").and_then(Value::as_str))
        .map(|image| (image, ImageKind::Container));
    let volumes = array(spec, "volumes")
        .iter()
        .filter_map(|v| v.get("image")?.get("reference")?.as_str())
        .map(|image| (image, ImageKind::Volume));
    for (image, kind) in containers.chain(volumes) {
        if image.is_empty() || !seen.insert(image) {
            continue;
        }
        images.push((image, kind));
    }
    images
}

/// `spec.nodeName` is set and not empty.
pub(crate) fn has_node_name(pod: &Value) -> bool {
    pod.get("spec")
        .and_then(|s| s.get("nodeName"))
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty())
}

/// The skip label is `"true"`.
pub(crate) fn has_skip_label(pod: &Value) -> bool {
    label(pod, SKIP_LABEL) == Some("true")
}

/// A DaemonSet controls the pod (an owner reference of kind DaemonSet with `controller: true`).
pub(crate) fn daemonset_owned(pod: &Value) -> bool {
    pod.get("metadata")
        .map(|m| array(m, "ownerReferences"))
        .unwrap_or_default()
        .iter()
        .any(|owner| {
            owner.get("kind").and_then(Value::as_str) == Some("DaemonSet")
                && owner.get("controller").and_then(Value::as_bool) == Some(true)
        })
}

/// A term pins the node by name (`matchFields` on `metadata.name`), as the DaemonSet controller
/// writes.
pub(crate) fn pins_node_name(term: &Value) -> bool {
    array(term, "matchFields")
        .iter()
        .any(|f| key_of(f) == Some("metadata.name"))
}

/// Step 4: `spec.os.name`, else a `kubernetes.io/os` nodeSelector, else the first required
/// expression `kubernetes.io/os In [one value]`, else `system_os`.
pub(crate) fn pod_os<'p>(pod: &'p Value, system_os: &'p str) -> &'p str {
    let spec_os = pod
        .get("spec")
        .and_then(|s| s.get("os"))
        .and_then(|o| o.get("name"))
        .and_then(Value::as_str);
    if let Some(os) = spec_os.filter(|o| !o.is_empty()) {
        return os;
    }
    if let Some(os) = node_selector(pod, OS_LABEL).filter(|o| !o.is_empty()) {
        return os;
    }
    for term in required_terms(pod).map(Vec::as_slice).unwrap_or_default() {
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
