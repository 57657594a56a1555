//! The one write that releases a gated pod, as a JSON merge patch built from the pod as it is
//! and the pod as the decision wants it, within what the apiserver allows on a gated pod
//! (KEP-3838): nodeSelector keys only added; required node affinity set whole when the pod has
//! no term, else the new expressions appended to each existing term (the term count unchanged,
//! an empty term left alone); preferred terms as wanted; tolerations only added; our gate
//! removed and every other gate kept. The patch carries the pod's `resourceVersion`, so a pod
//! changed since it was read is not overwritten (`409`).

use serde_json::{json, Map, Value};

use super::{GATE, GATE_LABEL, LOOKUP_ERROR_ANNOTATION, NO_COMMON_PLATFORM_KEY, RELEASED};

const REQUIRED: &str =
    "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms";
const PREFERRED: &str =
    "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution";

fn terms_of<'a>(pod: &'a Value, pointer: &str) -> &'a [Value] {
    pod.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn list<'a>(term: &'a Value, member: &str) -> &'a [Value] {
    term[member].as_array().map_or(&[], Vec::as_slice)
}

fn is_empty_term(term: &Value) -> bool {
    list(term, "matchExpressions").is_empty() && list(term, "matchFields").is_empty()
}

/// The required terms the release writes, `None` when they stay as they are. `added` are the
/// expressions to AND into every term (what the decision wrote into its first term).
fn required_terms(existing: &[Value], added: &[Value]) -> Option<Vec<Value>> {
    if added.is_empty() {
        return None;
    }
    if existing.is_empty() {
        return Some(vec![json!({"matchExpressions": added})]);
    }
    let mut changed = false;
    let terms = existing
        .iter()
        .map(|term| {
            if is_empty_term(term) {
                return term.clone();
            }
            let mut exprs = list(term, "matchExpressions").to_vec();
            for expr in added {
                if !exprs.contains(expr) {
                    exprs.push(expr.clone());
                    changed = true;
                }
            }
            let mut term = term.clone();
            if let Some(map) = term.as_object_mut() {
                map.insert("matchExpressions".to_owned(), Value::Array(exprs));
            }
            term
        })
        .collect();
    changed.then_some(terms)
}

/// The expressions the decision added to the pod's terms: those of its first term (or of the
/// first term it created) that the pod's first non-empty term lacks.
fn added_expressions(pod: &Value, desired: &Value) -> Vec<Value> {
    let before = terms_of(pod, REQUIRED);
    let after = terms_of(desired, REQUIRED);
    let index = before.iter().position(|t| !is_empty_term(t)).unwrap_or(0);
    let Some(wanted) = after.get(index) else {
        return Vec::new();
    };
    let had = before
        .get(index)
        .map_or(&[][..], |t| list(t, "matchExpressions"));
    list(wanted, "matchExpressions")
        .iter()
        .filter(|e| !had.contains(e))
        .cloned()
        .collect()
}

/// What the release adds besides the decision's own constraints.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Extra {
    /// A required expression ANDed into every term (no common platform).
    pub required: Option<Value>,
    /// The `lookup-error` annotation (`None`: removed if present).
    pub lookup_error: Option<String>,
}

/// The merge patch releasing `pod`, constrained as in `desired` (the pod with the decision's
/// inline patch applied; `None`: released without a constraint).
pub fn patch(pod: &Value, desired: Option<&Value>, extra: &Extra) -> Value {
    let mut spec = Map::new();
    let gates: Vec<Value> = pod["spec"]["schedulingGates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|gate| gate["name"] != json!(GATE))
        .cloned()
        .collect();
    spec.insert("schedulingGates".to_owned(), Value::Array(gates));
    let mut annotations = Map::new();
    let mut added = Vec::new();
    if let Some(desired) = desired {
        // nodeSelector: only the keys the pod lacks.
        let empty = Map::new();
        let old = pod["spec"]["nodeSelector"].as_object().unwrap_or(&empty);
        let new_keys: Map<String, Value> = desired["spec"]["nodeSelector"]
            .as_object()
            .unwrap_or(&empty)
            .iter()
            .filter(|(key, _)| !old.contains_key(*key))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !new_keys.is_empty() {
            spec.insert("nodeSelector".to_owned(), Value::Object(new_keys));
        }
        added = added_expressions(pod, desired);
        let preferred = desired.pointer(PREFERRED);
        if preferred.is_some() && preferred != pod.pointer(PREFERRED) {
            spec.insert(
                "affinity".to_owned(),
                json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}),
            );
        }
        // Tolerations: the pod's, then the new ones.
        let mut tolerations: Vec<Value> = pod["spec"]["tolerations"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let before = tolerations.len();
        for toleration in desired["spec"]["tolerations"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if !tolerations.contains(toleration) {
                tolerations.push(toleration.clone());
            }
        }
        if tolerations.len() > before {
            spec.insert("tolerations".to_owned(), Value::Array(tolerations));
        }
        let old = pod["metadata"]["annotations"].as_object().unwrap_or(&empty);
        for (key, value) in desired["metadata"]["annotations"]
            .as_object()
            .unwrap_or(&empty)
        {
            if old.get(key) != Some(value) {
                annotations.insert(key.clone(), value.clone());
            }
        }
    }
    if let Some(required) = &extra.required {
        added.push(required.clone());
    }
    if let Some(terms) = required_terms(terms_of(pod, REQUIRED), &added) {
        let affinity = spec.entry("affinity").or_insert_with(|| json!({}));
        affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
            json!({"nodeSelectorTerms": terms});
    }
    match &extra.lookup_error {
        Some(error) => {
            annotations.insert(LOOKUP_ERROR_ANNOTATION.to_owned(), json!(error));
        }
        None if pod["metadata"]["annotations"][LOOKUP_ERROR_ANNOTATION].is_string() => {
            annotations.insert(LOOKUP_ERROR_ANNOTATION.to_owned(), Value::Null);
        }
        None => {}
    }
    let mut metadata = json!({
        "resourceVersion": pod["metadata"]["resourceVersion"],
        "labels": {GATE_LABEL: RELEASED},
    });
    if !annotations.is_empty() {
        metadata["annotations"] = Value::Object(annotations);
    }
    json!({"metadata": metadata, "spec": spec})
}

/// `arch.noe.adevinta.com/no-common-platform Exists`: no node has it, so the scheduler says
/// why the pod waits.
pub fn no_common_platform() -> Value {
    json!({"key": NO_COMMON_PLATFORM_KEY, "operator": "Exists"})
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn arch(values: &[&str]) -> Value {
        json!({"key": "kubernetes.io/arch", "operator": "In", "values": values})
    }

    fn pod(spec: Value) -> Value {
        let mut spec = spec;
        spec["schedulingGates"] = json!([{"name": "other.example.com/quota"}, {"name": GATE}]);
        json!({"metadata": {"name": "web", "resourceVersion": "7"}, "spec": spec})
    }

    fn required(terms: Value) -> Value {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})
    }

    #[test]
    fn releases_within_kep_3838() {
        let zone = json!({"key": "zone", "operator": "In", "values": ["a"]});
        let host = json!({"key": "metadata.name", "operator": "In", "values": ["n1"]});
        let table: Vec<(&str, Value, Value, Value)> = vec![
            (
                "no terms: set whole",
                pod(json!({})),
                pod(
                    json!({"affinity": required(json!([{"matchExpressions": [arch(&["amd64", "arm64"])]}]))}),
                ),
                json!({"schedulingGates": [{"name": "other.example.com/quota"}],
                       "affinity": required(json!([{"matchExpressions": [arch(&["amd64", "arm64"])]}]))}),
            ),
            (
                "the user's terms (one with matchFields, one empty): appended, the empty one left",
                pod(
                    json!({"affinity": required(json!([{"matchExpressions": [zone.clone()]}, {"matchFields": [host.clone()]}, {}]))}),
                ),
                // The inline writer would add a per-arch copy; the release never adds a term.
                pod(
                    json!({"affinity": required(json!([{"matchExpressions": [zone.clone(), arch(&["arm64"])]}, {"matchFields": [host.clone()], "matchExpressions": [arch(&["arm64"])]}, {}, {"matchExpressions": [arch(&["amd64"])]}]))}),
                ),
                json!({"schedulingGates": [{"name": "other.example.com/quota"}],
                       "affinity": required(json!([{"matchExpressions": [zone.clone(), arch(&["arm64"])]}, {"matchFields": [host.clone()], "matchExpressions": [arch(&["arm64"])]}, {}]))}),
            ),
            (
                "nodeSelector: only new keys; tolerations added after the pod's",
                pod(
                    json!({"nodeSelector": {"disk": "ssd"}, "tolerations": [{"key": "a", "operator": "Exists"}]}),
                ),
                pod(
                    json!({"nodeSelector": {"disk": "ssd", "kubernetes.io/arch": "arm64"}, "tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]}),
                ),
                json!({"schedulingGates": [{"name": "other.example.com/quota"}],
                       "nodeSelector": {"kubernetes.io/arch": "arm64"},
                       "tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]}),
            ),
        ];
        for (case, before, desired, spec) in table {
            let patch = patch(&before, Some(&desired), &Extra::default());
            assert_eq!(patch["spec"], spec, "{case}");
            assert_eq!(patch["metadata"]["resourceVersion"], json!("7"), "{case}");
            assert_eq!(patch["metadata"]["labels"][GATE_LABEL], json!(RELEASED));
        }
    }

    #[test]
    fn no_common_platform_is_required_in_every_term() {
        let before =
            pod(json!({"affinity": required(json!([{"matchExpressions": [arch(&["amd64"])]}]))}));
        let extra = Extra {
            required: Some(no_common_platform()),
            lookup_error: Some("no common platform".to_owned()),
        };
        let patch = patch(&before, None, &extra);
        assert_eq!(
            patch["spec"]["affinity"],
            required(json!([{"matchExpressions": [arch(&["amd64"]), no_common_platform()]}]))
        );
        assert_eq!(
            patch["metadata"]["annotations"][LOOKUP_ERROR_ANNOTATION],
            json!("no common platform")
        );
        let bare = patch_of_bare();
        assert_eq!(
            bare["spec"]["affinity"],
            required(json!([{"matchExpressions": [no_common_platform()]}]))
        );
    }

    fn patch_of_bare() -> Value {
        let extra = Extra {
            required: Some(no_common_platform()),
            lookup_error: None,
        };
        patch(&pod(json!({})), None, &extra)
    }

    #[test]
    fn released_unconstrained_only_loses_our_gate() {
        let mut before = pod(json!({}));
        before["metadata"]["annotations"] = json!({LOOKUP_ERROR_ANNOTATION: "old"});
        let patch = patch(&before, None, &Extra::default());
        assert_eq!(
            patch,
            json!({"metadata": {"resourceVersion": "7", "labels": {GATE_LABEL: RELEASED},
                                "annotations": {LOOKUP_ERROR_ANNOTATION: null}},
                   "spec": {"schedulingGates": [{"name": "other.example.com/quota"}]}})
        );
    }
}
