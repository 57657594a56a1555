//! Reading the raw pod: labels, images, OS and the arch constraints it already carries.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{SkipReason, ARCH_LABEL, BETA_ARCH_LABEL, OS_LABEL, PLATFORMS_ANNOTATION, SKIP_LABEL};

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
pub(crate) fn preferred_terms(pod: &Value) -> Option<&Vec<Value>> {
    pod.get("spec")?
        .get("affinity")?
        .get("nodeAffinity")?
        .get(PREFERRED)?
        .as_array()
}

/// The non-null array member `key` of `value`, or an empty slice.
pub(crate) fn array<'v>(value: &'v Value, key: &str) -> &'v [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// A term with neither expressions nor fields matches no node: we leave it alone.
pub(crate) fn is_empty_term(term: &Value) -> bool {
    array(term, "matchExpressions").is_empty() && array(term, "matchFields").is_empty()
}

/// Step 3: images of `containers` and `initContainers` (not ephemeral containers), empty strings
/// dropped, duplicates removed, in order of appearance.
pub fn pod_images(pod: &Value) -> Vec<String> {
    let mut images: Vec<String> = Vec::new();
    let Some(spec) = pod.get("spec") else {
        return images;
    };
    for list in ["containers", "initContainers"] {
        for container in array(spec, list) {
            if let Some(image) = container.get("image").and_then(Value::as_str) {
                if !image.is_empty() && !images.iter().any(|i| i == image) {
                    images.push(image.to_owned());
                }
            }
        }
    }
    images
}

/// Step 1: `spec.nodeName` set, or the skip label `"true"`.
pub fn should_skip(pod: &Value) -> Option<SkipReason> {
    let node_name = pod
        .get("spec")
        .and_then(|s| s.get("nodeName"))
        .and_then(Value::as_str);
    if node_name.is_some_and(|n| !n.is_empty()) {
        return Some(SkipReason::NodeName);
    }
    if label(pod, SKIP_LABEL) == Some("true") {
        return Some(SkipReason::SkipLabel);
    }
    None
}

/// Step 4: `spec.os.name`, else a `kubernetes.io/os` nodeSelector, else the first required
/// expression `kubernetes.io/os In [one value]`, else `system_os`.
pub(crate) fn pod_os(pod: &Value, system_os: &str) -> String {
    let spec_os = pod
        .get("spec")
        .and_then(|s| s.get("os"))
        .and_then(|o| o.get("name"))
        .and_then(Value::as_str);
    if let Some(os) = spec_os.filter(|o| !o.is_empty()) {
        return os.to_owned();
    }
    if let Some(os) = node_selector(pod, OS_LABEL).filter(|o| !o.is_empty()) {
        return os.to_owned();
    }
    for term in required_terms(pod).map(Vec::as_slice).unwrap_or_default() {
        for expr in array(term, "matchExpressions") {
            if expr.get("key").and_then(Value::as_str) != Some(OS_LABEL)
                || expr.get("operator").and_then(Value::as_str) != Some("In")
            {
                continue;
            }
            if let [Value::String(os)] = array(expr, "values") {
                return os.clone();
            }
        }
    }
    system_os.to_owned()
}

/// The arch constraints a previous admission by us wrote (reinvocation, step 2's exception).
#[derive(Debug, Default)]
pub(crate) struct Ours {
    /// The common set our `platforms` annotation recorded.
    pub previous: BTreeSet<String>,
    /// `nodeSelector["kubernetes.io/arch"]` is ours.
    pub node_selector: bool,
    /// `(term, expression)` indexes of our `kubernetes.io/arch In [previous]` expressions.
    pub expressions: Vec<(usize, usize)>,
    /// Indexes of our preferred terms (`kubernetes.io/arch In [one previous arch]`).
    pub preferences: Vec<usize>,
}

fn string_set(values: &[Value]) -> Option<BTreeSet<String>> {
    values
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect()
}

fn is_our_expression(expr: &Value, previous: &BTreeSet<String>) -> bool {
    expr.get("key").and_then(Value::as_str) == Some(ARCH_LABEL)
        && expr.get("operator").and_then(Value::as_str) == Some("In")
        && string_set(array(expr, "values")).as_ref() == Some(previous)
}

fn is_our_preference(term: &Value, previous: &BTreeSet<String>) -> bool {
    let Some(preference) = term.get("preference") else {
        return false;
    };
    if !array(preference, "matchFields").is_empty() {
        return false;
    }
    let [expr] = array(preference, "matchExpressions") else {
        return false;
    };
    expr.get("key").and_then(Value::as_str) == Some(ARCH_LABEL)
        && expr.get("operator").and_then(Value::as_str) == Some("In")
        && matches!(array(expr, "values"), [Value::String(a)] if previous.contains(a))
}

/// Step 2: `Err(reason)` when the pod constrains its arch itself; `Ok(Some(ours))` when it
/// carries our annotation (the constraints matching it are ours to recompute), else `Ok(None)`.
pub(crate) fn arch_constraint(pod: &Value) -> Result<Option<Ours>, SkipReason> {
    let previous: Option<BTreeSet<String>> = annotation(pod, PLATFORMS_ANNOTATION)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect::<BTreeSet<String>>()
        })
        .filter(|set| !set.is_empty());
    let mut ours = previous.map(|previous| Ours {
        previous,
        ..Ours::default()
    });

    if node_selector_has(pod, BETA_ARCH_LABEL) {
        return Err(SkipReason::NodeSelector);
    }
    if node_selector_has(pod, ARCH_LABEL) {
        match (&mut ours, node_selector(pod, ARCH_LABEL)) {
            (Some(o), Some(arch)) if o.previous.contains(arch) => o.node_selector = true,
            _ => return Err(SkipReason::NodeSelector),
        }
    }
    for (t, term) in required_terms(pod)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        for (e, expr) in array(term, "matchExpressions").iter().enumerate() {
            let key = expr.get("key").and_then(Value::as_str);
            if key != Some(ARCH_LABEL) && key != Some(BETA_ARCH_LABEL) {
                continue;
            }
            match &mut ours {
                Some(o) if is_our_expression(expr, &o.previous) => o.expressions.push((t, e)),
                _ => return Err(SkipReason::AffinityLabelSelector),
            }
        }
        let pinned = array(term, "matchFields")
            .iter()
            .any(|f| f.get("key").and_then(Value::as_str) == Some("metadata.name"));
        if pinned {
            return Err(SkipReason::AffinityFieldSelector);
        }
    }
    if let Some(o) = &mut ours {
        for (p, term) in preferred_terms(pod)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            if is_our_preference(term, &o.previous) {
                o.preferences.push(p);
            }
        }
    }
    Ok(ours)
}

fn node_selector_has(pod: &Value, key: &str) -> bool {
    pod.get("spec")
        .and_then(|s| s.get("nodeSelector"))
        .and_then(|n| n.get(key))
        .is_some_and(|v| !v.is_null())
}
