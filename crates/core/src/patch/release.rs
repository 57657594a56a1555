//! The release form of a decision's patch (docs/architecture.md, "The patch"): what a gate
//! controller writes to a pod held by our scheduling gate. The apiserver accepts such an update
//! only when it follows KEP-3838 (`ValidatePodUpdate`, answered 422 otherwise): `nodeSelector`
//! keys only added; required node affinity set whole when absent or without terms, else
//! expressions and fields only appended to each existing term (term count unchanged, an empty
//! term left empty); preferred terms free; tolerations only added; scheduling gates only removed.
//!
//! [`release`] checks the decision's patch against those rules on the pod as it is now, and adds
//! the removal of our gate by index (guarded by a `test` of its name), never another controller's.

use json_patch::TestOperation;
use serde_json::Value;

use super::{pointer, remove, Op};

/// The scheduling gate the gate mode adds on CREATE and the release removes.
pub const SCHEDULING_GATE: &str = "arch.noe.adevinta.com/platforms";

/// A release the apiserver would refuse, or could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReleaseError {
    /// The decision's patch does not apply to the pod (it changed since the decision).
    #[error("the patch does not apply to the pod: {0}")]
    Stale(String),
    /// The decision changes what KEP-3838 keeps immutable on a gated pod.
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

/// The release of `pod` (the gated pod as read, raw): the decision's `ops` (its
/// [`Verdict::Patch`](crate::decide::Verdict::Patch) operations, written against this pod)
/// checked against KEP-3838, followed by the removal of our gate. A pod without our gate gets
/// the checked `ops` alone.
pub fn release(pod: &Value, ops: &[Op]) -> Result<Vec<Op>, ReleaseError> {
    let mut after = pod.clone();
    json_patch::patch(&mut after, ops).map_err(|e| ReleaseError::Stale(e.to_string()))?;
    check_node_selector(pod, &after)?;
    check_required_terms(pod, &after)?;
    check_tolerations(pod, &after)?;
    check_rest(pod, &after)?;
    let mut out = ops.to_vec();
    if let Some(index) = gate_index(pod) {
        let name = pointer(&["spec", "schedulingGates", &index.to_string(), "name"]);
        out.push(Op::Test(TestOperation {
            path: name,
            value: Value::String(SCHEDULING_GATE.to_owned()),
        }));
        out.push(remove(pointer(&[
            "spec",
            "schedulingGates",
            &index.to_string(),
        ])));
    }
    Ok(out)
}

/// The index of our gate in `spec.schedulingGates`.
pub fn gate_index(pod: &Value) -> Option<usize> {
    pod.pointer("/spec/schedulingGates")?
        .as_array()?
        .iter()
        .position(|gate| gate.get("name").and_then(Value::as_str) == Some(SCHEDULING_GATE))
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
    use serde_json::json;

    fn ops(patch: Value) -> Vec<Op> {
        serde_json::from_value(patch).unwrap()
    }

    fn gated(spec: Value) -> Value {
        let mut pod = json!({"metadata": {"name": "p"}, "spec": spec});
        pod["spec"]["schedulingGates"] =
            json!([{"name": "other.example.com/quota"}, {"name": SCHEDULING_GATE}]);
        pod
    }

    const TERMS: &str = "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms";

    #[test]
    fn releases_follow_kep_3838() {
        let arch = json!({"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]});
        let pool = json!({"key": "pool", "operator": "In", "values": ["a"]});
        let term = |exprs: Value| json!({"matchExpressions": exprs});
        // (case, pod spec, the decision's patch, Ok or the refused field)
        let cases: Vec<(&str, Value, Value, Result<(), &str>)> = vec![
            ("nodeSelector key added", json!({"nodeSelector": {"a": "b"}}),
             json!([{"op": "add", "path": "/spec/nodeSelector/kubernetes.io~1arch", "value": "arm64"}]), Ok(())),
            ("nodeSelector created", json!({}),
             json!([{"op": "add", "path": "/spec/nodeSelector", "value": {"kubernetes.io/arch": "arm64"}}]), Ok(())),
            ("nodeSelector key replaced", json!({"nodeSelector": {"kubernetes.io/arch": "amd64"}}),
             json!([{"op": "replace", "path": "/spec/nodeSelector/kubernetes.io~1arch", "value": "arm64"}]), Err("spec.nodeSelector")),
            ("nodeSelector key removed", json!({"nodeSelector": {"a": "b"}}),
             json!([{"op": "remove", "path": "/spec/nodeSelector/a"}]), Err("spec.nodeSelector")),
            ("required affinity set whole", json!({}),
             json!([{"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term(json!([arch]))]}}}}]), Ok(())),
            ("required affinity set over no terms", json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}}),
             json!([{"op": "add", "path": format!("{TERMS}/-"), "value": term(json!([arch]))}]), Ok(())),
            ("expression appended to each term", json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term(json!([pool])), {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}]}}}}),
             json!([{"op": "add", "path": format!("{TERMS}/0/matchExpressions/-"), "value": arch},
                    {"op": "add", "path": format!("{TERMS}/1/matchExpressions"), "value": [arch]}]), Ok(())),
            ("term added", json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term(json!([pool]))]}}}}),
             json!([{"op": "add", "path": format!("{TERMS}/-"), "value": term(json!([arch]))}]), Err("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms")),
            ("expression inserted before the user's", json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term(json!([pool]))]}}}}),
             json!([{"op": "add", "path": format!("{TERMS}/0/matchExpressions/0"), "value": arch}]), Err("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]")),
            ("expression replaced", json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term(json!([arch]))]}}}}),
             json!([{"op": "replace", "path": format!("{TERMS}/0/matchExpressions/0"), "value": pool}]), Err("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]")),
            ("empty term gains an expression", json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term(json!([pool])), {}]}}}}),
             json!([{"op": "add", "path": format!("{TERMS}/1/matchExpressions"), "value": [arch]}]), Err("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1]")),
            ("preferred terms free", json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": term(json!([pool]))}]}}}),
             json!([{"op": "replace", "path": "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution", "value": [{"weight": 50, "preference": term(json!([arch]))}]}]), Ok(())),
            ("toleration added", json!({"tolerations": [{"key": "a", "operator": "Exists"}]}),
             json!([{"op": "add", "path": "/spec/tolerations/-", "value": {"key": "arch", "operator": "Exists"}}]), Ok(())),
            ("toleration removed", json!({"tolerations": [{"key": "a", "operator": "Exists"}]}),
             json!([{"op": "remove", "path": "/spec/tolerations/0"}]), Err("spec.tolerations")),
            ("annotations free", json!({}),
             json!([{"op": "add", "path": "/metadata/annotations", "value": {"arch.noe.adevinta.com/platforms": "arm64"}}]), Ok(())),
            ("pod affinity immutable", json!({}),
             json!([{"op": "add", "path": "/spec/affinity", "value": {"podAffinity": {}}}]), Err("spec")),
            ("container changed", json!({"containers": [{"name": "a", "image": "a:1"}]}),
             json!([{"op": "add", "path": "/spec/containers/0/args", "value": ["x"]}]), Err("spec")),
        ];
        for (case, spec, patch, expected) in cases {
            let pod = gated(spec);
            let got = release(&pod, &ops(patch.clone()));
            match (got, expected) {
                (Ok(release), Ok(())) => {
                    let mut after = pod.clone();
                    json_patch::patch(&mut after, &release).unwrap();
                    assert_eq!(
                        after["spec"]["schedulingGates"],
                        json!([{"name": "other.example.com/quota"}]),
                        "{case}"
                    );
                    assert_eq!(release.len(), ops(patch).len() + 2, "{case}");
                }
                (Err(ReleaseError::NotAppendOnly { field, .. }), Err(expected)) => {
                    assert_eq!(field, expected, "{case}");
                }
                (got, expected) => panic!("{case}: {got:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn only_our_gate_is_removed_and_only_if_still_there() {
        let pod = json!({"spec": {"schedulingGates": [{"name": "other.example.com/quota"}]}});
        assert_eq!(gate_index(&pod), None);
        assert_eq!(release(&pod, &[]).unwrap(), Vec::<Op>::new());
        let ours = gated(json!({}));
        let release = release(&ours, &[]).unwrap();
        assert_eq!(
            serde_json::to_value(&release).unwrap(),
            json!([{"op": "test", "path": "/spec/schedulingGates/1/name", "value": SCHEDULING_GATE},
                   {"op": "remove", "path": "/spec/schedulingGates/1"}])
        );
        // Another controller removed its gate first: ours moved, the test fails, nothing else
        // is removed.
        let mut moved = ours.clone();
        moved["spec"]["schedulingGates"] = json!([{"name": SCHEDULING_GATE}]);
        assert!(json_patch::patch(&mut moved, &release).is_err());
    }

    #[test]
    fn a_patch_for_another_pod_is_stale() {
        let pod = gated(json!({}));
        let patch = ops(json!([{"op": "add", "path": "/spec/nodeSelector/a", "value": "b"}]));
        assert!(matches!(release(&pod, &patch), Err(ReleaseError::Stale(_))));
    }
}
