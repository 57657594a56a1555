//! The release of a gated pod (docs/architecture.md, "Lookup modes"): the one write a gate
//! controller (and `noe ungate`) sends for a pod held by our scheduling gate, as a JSON merge
//! patch carrying the pod's `resourceVersion` (a pod changed since it was read is not
//! overwritten: `409`). The apiserver accepts such an update only when it follows KEP-3838
//! (`ValidatePodUpdate`, answered 422 otherwise), so [`release`] writes the decision's patch in
//! that form: `nodeSelector` keys only added; required node affinity set whole when the pod has
//! no term, else the decision's new expressions appended to each existing term (the term count
//! unchanged, an empty term left alone: where the inline decision would add a term, the gated
//! path appends instead); preferred terms as the decision wants them; tolerations only added;
//! our gate removed and every other gate kept. The result is checked against those rules on the
//! pod before it is returned.

use serde_json::{json, Map, Value};

use super::Op;

/// The scheduling gate the gate mode adds on CREATE and the release removes.
pub const SCHEDULING_GATE: &str = "arch.noe.adevinta.com/platforms";
/// The label of the pods the gate mode gates.
pub const GATE_LABEL: &str = "arch.noe.adevinta.com/lookup";
/// [`GATE_LABEL`] on a gated pod.
pub const GATED: &str = "gated";
/// [`GATE_LABEL`] on a released pod.
pub const RELEASED: &str = "released";
/// The annotation naming a gated pod's last lookup failure.
pub const LOOKUP_ERROR_ANNOTATION: &str = "arch.noe.adevinta.com/lookup-error";
/// The node label key no node has: required by pods whose images share no platform.
pub const NO_COMMON_PLATFORM_KEY: &str = "arch.noe.adevinta.com/no-common-platform";

/// A release the apiserver would refuse, or that could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReleaseError {
    /// The decision's patch does not apply to the pod (it changed since the decision).
    #[error("the patch does not apply to the pod: {0}")]
    Stale(String),
    /// The release would change what KEP-3838 keeps immutable on a gated pod.
    #[error("{field}: {rule}")]
    NotAppendOnly {
        /// The field, as the apiserver names it (`spec.nodeSelector`, ...).
        field: String,
        /// The rule broken.
        rule: &'static str,
    },
}

fn refused(field: impl Into<String>, rule: &'static str) -> ReleaseError {
    ReleaseError::NotAppendOnly {
        field: field.into(),
        rule,
    }
}

const REQUIRED: &str =
    "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms";
const PREFERRED: &str =
    "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution";

/// What the release writes besides the decision's constraints.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Extra {
    /// A required expression ANDed into every term (see [`no_common_platform`]).
    pub required: Option<Value>,
    /// The [`LOOKUP_ERROR_ANNOTATION`] (`None`: removed if present).
    pub lookup_error: Option<String>,
}

/// `arch.noe.adevinta.com/no-common-platform Exists`: no node has it, so the scheduler says
/// why the pod waits.
pub fn no_common_platform() -> Value {
    json!({"key": NO_COMMON_PLATFORM_KEY, "operator": "Exists"})
}

/// The index of our gate in `spec.schedulingGates`.
pub fn gate_index(pod: &Value) -> Option<usize> {
    pod.pointer("/spec/schedulingGates")?
        .as_array()?
        .iter()
        .position(|gate| gate.get("name").and_then(Value::as_str) == Some(SCHEDULING_GATE))
}

/// The merge patch releasing `pod` (the gated pod as read, raw) with the decision's `ops`
/// (its patch, written against this pod as inline admission writes it; empty: released
/// without a constraint), in KEP-3838's form, and `extra`. Errors when the ops do not apply
/// to the pod, or the release would break a rule (never expected: checked as a safeguard).
pub fn release(pod: &Value, ops: &[Op], extra: &Extra) -> Result<Value, ReleaseError> {
    let desired = if ops.is_empty() {
        None
    } else {
        let mut desired = pod.clone();
        json_patch::patch(&mut desired, ops).map_err(|e| ReleaseError::Stale(e.to_string()))?;
        Some(desired)
    };
    let patch = merge_patch(pod, desired.as_ref(), extra);
    let mut after = pod.clone();
    json_patch::merge(&mut after, &patch);
    check_node_selector(pod, &after)?;
    check_required_terms(pod, &after)?;
    check_tolerations(pod, &after)?;
    check_gates(pod, &after)?;
    check_rest(pod, &after)?;
    Ok(patch)
}

fn terms_of<'a>(pod: &'a Value, pointer: &str) -> &'a [Value] {
    pod.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn is_empty_term(term: &Value) -> bool {
    list(term, "matchExpressions").is_empty() && list(term, "matchFields").is_empty()
}

/// `added` ANDed into every term of `terms`: appended to each non-empty term's expressions
/// (those it has already are not repeated), an empty term left alone.
fn and_into(terms: &[Value], added: &[Value]) -> Vec<Value> {
    terms
        .iter()
        .map(|term| {
            if is_empty_term(term) || added.is_empty() {
                return term.clone();
            }
            let mut exprs = list(term, "matchExpressions").to_vec();
            for expr in added {
                if !exprs.contains(expr) {
                    exprs.push(expr.clone());
                }
            }
            let mut term = term.clone();
            if let Some(map) = term.as_object_mut() {
                map.insert("matchExpressions".to_owned(), Value::Array(exprs));
            }
            term
        })
        .collect()
}

/// The required terms the release writes, `None` when they stay as they are. The pod without
/// a term gets the decision's terms whole; otherwise the expressions the decision added to the
/// pod's first non-empty term are appended to each existing term.
fn required_terms(pod: &Value, desired: Option<&Value>, extra: &Extra) -> Option<Vec<Value>> {
    let existing = terms_of(pod, REQUIRED);
    let wanted = desired.map_or(&[][..], |d| terms_of(d, REQUIRED));
    let extra: Vec<Value> = extra.required.iter().cloned().collect();
    if existing.is_empty() {
        let terms = if wanted.is_empty() {
            if extra.is_empty() {
                return None;
            }
            vec![json!({"matchExpressions": extra})]
        } else {
            and_into(wanted, &extra)
        };
        return Some(terms);
    }
    let index = existing.iter().position(|t| !is_empty_term(t)).unwrap_or(0);
    let had = existing
        .get(index)
        .map_or(&[][..], |t| list(t, "matchExpressions"));
    let mut added: Vec<Value> = wanted
        .get(index)
        .map_or(&[][..], |t| list(t, "matchExpressions"))
        .iter()
        .filter(|e| !had.contains(e))
        .cloned()
        .collect();
    added.extend(extra);
    let terms = and_into(existing, &added);
    (terms != existing).then_some(terms)
}

/// The merge patch (see [`release`]), unchecked.
fn merge_patch(pod: &Value, desired: Option<&Value>, extra: &Extra) -> Value {
    let empty = Map::new();
    let mut spec = Map::new();
    let gates: Vec<Value> = pod["spec"]["schedulingGates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|gate| gate["name"] != json!(SCHEDULING_GATE))
        .cloned()
        .collect();
    spec.insert("schedulingGates".to_owned(), Value::Array(gates));
    let mut annotations = Map::new();
    if let Some(desired) = desired {
        // nodeSelector: only the keys the pod lacks.
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
    if let Some(terms) = required_terms(pod, desired, extra) {
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

/// Gates only removed: ours gone, every other kept in order.
fn check_gates(old: &Value, new: &Value) -> Result<(), ReleaseError> {
    let names = |pod: &Value| -> Vec<Value> {
        terms_of(pod, "/spec/schedulingGates")
            .iter()
            .map(|gate| gate["name"].clone())
            .collect()
    };
    let kept: Vec<Value> = names(old)
        .into_iter()
        .filter(|name| name != &json!(SCHEDULING_GATE))
        .collect();
    if names(new) == kept {
        Ok(())
    } else {
        Err(refused(
            "spec.schedulingGates",
            "only deletion is allowed, and only of our own gate",
        ))
    }
}

fn at<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    value.pointer(path).filter(|v| !v.is_null())
}

fn check_node_selector(old: &Value, new: &Value) -> Result<(), ReleaseError> {
    let Some(old) = at(old, "/spec/nodeSelector").and_then(Value::as_object) else {
        return Ok(());
    };
    let new = at(new, "/spec/nodeSelector").and_then(Value::as_object);
    if old
        .iter()
        .all(|(k, v)| new.and_then(|n| n.get(k)) == Some(v))
    {
        Ok(())
    } else {
        Err(refused(
            "spec.nodeSelector",
            "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
        ))
    }
}

fn list<'v>(term: &'v Value, key: &str) -> &'v [Value] {
    term.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn check_required_terms(old: &Value, new: &Value) -> Result<(), ReleaseError> {
    let old_terms = at(old, REQUIRED)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if old_terms.is_empty() {
        // Absent, null or no terms: the required affinity may be set whole.
        return Ok(());
    }
    let field = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
    let new_terms = at(new, REQUIRED)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if new_terms.len() != old_terms.len() {
        return Err(refused(
            field,
            "no additions/deletions to non-empty NodeSelectorTerms list are allowed",
        ));
    }
    for (i, (old, new)) in old_terms.iter().zip(new_terms).enumerate() {
        let empty = list(old, "matchExpressions").is_empty() && list(old, "matchFields").is_empty();
        let appended = ["matchExpressions", "matchFields"].into_iter().all(|key| {
            let (old, new) = (list(old, key), list(new, key));
            new.get(..old.len()) == Some(old) && (!empty || new.len() == old.len())
        });
        if !appended {
            return Err(refused(
                format!("{field}[{i}]"),
                "only additions are allowed (no mutations or deletions)",
            ));
        }
    }
    Ok(())
}

fn check_tolerations(old: &Value, new: &Value) -> Result<(), ReleaseError> {
    let old = at(old, "/spec/tolerations")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let new = at(new, "/spec/tolerations")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if old.iter().all(|t| new.contains(t)) {
        Ok(())
    } else {
        Err(refused(
            "spec.tolerations",
            "existing toleration can not be modified except its tolerationSeconds",
        ))
    }
}

/// Nothing else of the spec may change but what the checks above allow: the preferred terms,
/// and the node affinity when the pod had no affinity at all. Metadata (labels, annotations)
/// is free.
fn check_rest(old: &Value, new: &Value) -> Result<(), ReleaseError> {
    let strip = |pod: &Value| {
        let mut spec = pod.get("spec").cloned().unwrap_or(Value::Null);
        if let Some(spec) = spec.as_object_mut() {
            for key in ["nodeSelector", "tolerations", "schedulingGates"] {
                spec.remove(key);
            }
            let affinity = spec.get_mut("affinity").and_then(Value::as_object_mut);
            if let Some(affinity) = affinity {
                affinity.remove("nodeAffinity");
                if affinity.is_empty() {
                    spec.remove("affinity");
                }
            }
        }
        spec
    };
    if strip(old) == strip(new) {
        Ok(())
    } else {
        Err(refused(
            "spec",
            "pod updates may not change fields other than the scheduling directives",
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ops(patch: Value) -> Vec<Op> {
        serde_json::from_value(patch).unwrap()
    }

    fn arch(values: &[&str]) -> Value {
        json!({"key": "kubernetes.io/arch", "operator": "In", "values": values})
    }

    fn gated(spec: Value) -> Value {
        let mut spec = spec;
        spec["schedulingGates"] =
            json!([{"name": "other.example.com/quota"}, {"name": SCHEDULING_GATE}]);
        json!({"metadata": {"name": "web", "resourceVersion": "7"}, "spec": spec})
    }

    fn required(terms: Value) -> Value {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})
    }

    const TERMS: &str = "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms";
    const OTHER: &str = "other.example.com/quota";

    #[test]
    fn the_decision_is_written_in_kep_3838_form() {
        let zone = json!({"key": "zone", "operator": "In", "values": ["a"]});
        let host = json!({"key": "metadata.name", "operator": "In", "values": ["n1"]});
        let term = |exprs: Value| json!({"matchExpressions": exprs});
        // (case, the pod's spec, the inline decision's patch, the release's spec)
        let table: Vec<(&str, Value, Value, Value)> = vec![
            (
                "no terms: set whole",
                json!({}),
                json!([{"op": "add", "path": "/spec/affinity", "value": required(json!([term(json!([arch(&["amd64", "arm64"])]))]))}]),
                json!({"schedulingGates": [{"name": OTHER}],
                       "affinity": required(json!([term(json!([arch(&["amd64", "arm64"])]))]))}),
            ),
            (
                "no terms: the decision's terms (one per arch) set whole",
                json!({}),
                json!([{"op": "add", "path": "/spec/affinity", "value": required(json!([
                    term(json!([arch(&["amd64"])])), term(json!([arch(&["arm64"]), zone.clone()]))]))}]),
                json!({"schedulingGates": [{"name": OTHER}],
                       "affinity": required(json!([
                           term(json!([arch(&["amd64"])])), term(json!([arch(&["arm64"]), zone.clone()]))]))}),
            ),
            (
                // The inline writer adds a per-arch term; the release never adds a term.
                "the user's terms (one with matchFields, one empty): appended, the empty one left",
                json!({"affinity": required(json!([term(json!([zone.clone()])), {"matchFields": [host.clone()]}, {}]))}),
                json!([{"op": "add", "path": format!("{TERMS}/0/matchExpressions/-"), "value": arch(&["arm64"])},
                       {"op": "add", "path": format!("{TERMS}/1/matchExpressions"), "value": [arch(&["arm64"])]},
                       {"op": "add", "path": format!("{TERMS}/-"), "value": term(json!([arch(&["amd64"])]))}]),
                json!({"schedulingGates": [{"name": OTHER}],
                       "affinity": required(json!([term(json!([zone.clone(), arch(&["arm64"])])),
                                                   {"matchFields": [host.clone()], "matchExpressions": [arch(&["arm64"])]}, {}]))}),
            ),
            (
                "nodeSelector: only new keys; tolerations added after the pod's",
                json!({"nodeSelector": {"disk": "ssd"}, "tolerations": [{"key": "a", "operator": "Exists"}]}),
                json!([{"op": "add", "path": "/spec/nodeSelector/kubernetes.io~1arch", "value": "arm64"},
                       {"op": "add", "path": "/spec/tolerations/-", "value": {"key": "b", "operator": "Exists"}}]),
                json!({"schedulingGates": [{"name": OTHER}],
                       "nodeSelector": {"kubernetes.io/arch": "arm64"},
                       "tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]}),
            ),
            (
                "a nodeSelector key the pod has is never changed",
                json!({"nodeSelector": {"kubernetes.io/arch": "amd64"}}),
                json!([{"op": "replace", "path": "/spec/nodeSelector/kubernetes.io~1arch", "value": "arm64"}]),
                json!({"schedulingGates": [{"name": OTHER}]}),
            ),
            (
                "preferred terms free",
                json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": term(json!([zone.clone()]))}]}}}),
                json!([{"op": "replace", "path": "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution",
                        "value": [{"weight": 50, "preference": term(json!([arch(&["arm64"])]))}]}]),
                json!({"schedulingGates": [{"name": OTHER}],
                       "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "preference": term(json!([arch(&["arm64"])]))}]}}}),
            ),
        ];
        for (case, spec, decision, want) in table {
            let pod = gated(spec);
            let patch = release(&pod, &ops(decision), &Extra::default()).unwrap();
            assert_eq!(patch["spec"], want, "{case}");
            assert_eq!(patch["metadata"]["resourceVersion"], json!("7"), "{case}");
            assert_eq!(patch["metadata"]["labels"][GATE_LABEL], json!(RELEASED));
        }
    }

    #[test]
    fn annotations_are_written_and_the_lookup_error_cleared() {
        let mut pod = gated(json!({}));
        pod["metadata"]["annotations"] = json!({LOOKUP_ERROR_ANNOTATION: "old"});
        let decision = ops(
            json!([{"op": "add", "path": "/metadata/annotations/arch.noe.adevinta.com~1platforms", "value": "linux/arm64"}]),
        );
        let patch = release(&pod, &decision, &Extra::default()).unwrap();
        assert_eq!(
            patch["metadata"]["annotations"],
            json!({"arch.noe.adevinta.com/platforms": "linux/arm64", LOOKUP_ERROR_ANNOTATION: null})
        );
    }

    #[test]
    fn no_common_platform_is_required_in_every_term() {
        let extra = Extra {
            required: Some(no_common_platform()),
            lookup_error: Some("no common platform".to_owned()),
        };
        let pod =
            gated(json!({"affinity": required(json!([{"matchExpressions": [arch(&["amd64"])]}]))}));
        let patch = release(&pod, &[], &extra).unwrap();
        assert_eq!(
            patch["spec"]["affinity"],
            required(json!([{"matchExpressions": [arch(&["amd64"]), no_common_platform()]}]))
        );
        assert_eq!(
            patch["metadata"]["annotations"][LOOKUP_ERROR_ANNOTATION],
            json!("no common platform")
        );
        let bare = release(&gated(json!({})), &[], &extra).unwrap();
        assert_eq!(
            bare["spec"]["affinity"],
            required(json!([{"matchExpressions": [no_common_platform()]}]))
        );
    }

    #[test]
    fn released_unconstrained_only_loses_our_gate() {
        let patch = release(&gated(json!({})), &[], &Extra::default()).unwrap();
        assert_eq!(
            patch,
            json!({"metadata": {"resourceVersion": "7", "labels": {GATE_LABEL: RELEASED}},
                   "spec": {"schedulingGates": [{"name": OTHER}]}})
        );
        assert_eq!(gate_index(&gated(json!({}))), Some(1));
        assert_eq!(gate_index(&json!({"spec": {}})), None);
    }

    #[test]
    fn what_the_release_cannot_write_is_refused() {
        let pod = gated(json!({"containers": [{"name": "a", "image": "a:1"}]}));
        let stale = ops(json!([{"op": "replace", "path": "/spec/nodeSelector/a", "value": "b"}]));
        assert!(matches!(
            release(&pod, &stale, &Extra::default()),
            Err(ReleaseError::Stale(_))
        ));
        // The rules themselves, on the pod before and after.
        let table: Vec<(&str, Value, Value, &str)> = vec![
            ("nodeSelector key removed", json!({"nodeSelector": {"a": "b"}}), json!({}), "spec.nodeSelector"),
            ("term added", json!({"affinity": required(json!([{"matchExpressions": [arch(&["a"])]}]))}),
             json!({"affinity": required(json!([{"matchExpressions": [arch(&["a"])]}, {"matchExpressions": [arch(&["b"])]}]))}),
             "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"),
            ("expression inserted", json!({"affinity": required(json!([{"matchExpressions": [arch(&["a"])]}]))}),
             json!({"affinity": required(json!([{"matchExpressions": [arch(&["b"]), arch(&["a"])]}]))}),
             "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"),
            ("empty term filled", json!({"affinity": required(json!([{"matchExpressions": [arch(&["a"])]}, {}]))}),
             json!({"affinity": required(json!([{"matchExpressions": [arch(&["a"])]}, {"matchExpressions": [arch(&["b"])]}]))}),
             "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1]"),
            ("toleration removed", json!({"tolerations": [{"key": "a"}]}), json!({}), "spec.tolerations"),
            ("container changed", json!({"containers": [{"image": "a:1"}]}), json!({"containers": [{"image": "a:1", "args": ["x"]}]}), "spec"),
        ];
        for (case, before, after, field) in table {
            let (before, after) = (gated(before), gated(after));
            let got = check_node_selector(&before, &after)
                .and_then(|()| check_required_terms(&before, &after))
                .and_then(|()| check_tolerations(&before, &after))
                .and_then(|()| check_rest(&before, &after));
            match got {
                Err(ReleaseError::NotAppendOnly { field: got, .. }) => {
                    assert_eq!(got, field, "{case}")
                }
                other => panic!("{case}: {other:?}"),
            }
        }
        let other_gate_removed = json!({"spec": {"schedulingGates": []}});
        assert!(check_gates(&gated(json!({})), &other_gate_removed).is_err());
    }
}
