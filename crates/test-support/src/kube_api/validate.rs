//! What the apiserver enforces on pod creations and updates that matters to a controller writing
//! gated pods (`ValidatePodCreate` and `ValidatePodUpdate` in Kubernetes'
//! `pkg/apis/core/validation/validation.go`, KEP-3521 and KEP-3838), with the apiserver's
//! messages: a failed check is a `422 Invalid` whose message is
//! `Pod "<name>" is invalid: <field errors>`.
//!
//! - Scheduling gates are only removed after creation, and never set together with `nodeName`.
//! - Tolerations are only added (an existing one may change only its `tolerationSeconds`).
//! - While the old pod is gated: `nodeSelector` keys are only added; required node affinity is
//!   set whole when it had no terms, else the term count stays and each term only appends
//!   (an empty term stays empty); preferred terms are free; an absent `affinity` may gain only
//!   `nodeAffinity`.
//! - Nothing else in `spec` changes but container and init container images,
//!   `activeDeadlineSeconds` and `terminationGracePeriodSeconds`.

use serde_json::{Map, Value};

const TERMS: &str =
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";

/// The generic refusal of an update that touches a field pods may not change.
pub(crate) const FORBIDDEN_UPDATE: &str = "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

fn invalid(field: &str, value: &Value, detail: &str) -> String {
    format!("{field}: Invalid value: {value}: {detail}")
}

fn forbidden(field: &str, detail: &str) -> String {
    format!("{field}: Forbidden: {detail}")
}

/// `Pod "<name>" is invalid: <errors>` (one error as it is, several in brackets, like
/// apimachinery's aggregate).
fn message(name: &str, errors: &[String]) -> String {
    let errors = match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    format!("Pod {name:?} is invalid: {errors}")
}

fn name_of(pod: &Value) -> &str {
    pod["metadata"]["name"].as_str().unwrap_or_default()
}

fn gates(pod: &Value) -> &[Value] {
    pod["spec"]["schedulingGates"]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

/// `ValidatePodCreate`'s rule on gates: `Err(message)` for a 422.
pub(crate) fn pod_create(pod: &Value) -> Result<(), String> {
    let node_name = pod["spec"]["nodeName"].as_str().unwrap_or_default();
    if !gates(pod).is_empty() && !node_name.is_empty() {
        let error = forbidden(
            "spec.nodeName",
            "cannot be set until all schedulingGates have been cleared",
        );
        return Err(message(name_of(pod), &[error]));
    }
    Ok(())
}

/// `ValidatePodUpdate`'s rules on `spec`: `Err(message)` for a 422.
pub(crate) fn pod_update(new: &Value, old: &Value) -> Result<(), String> {
    let mut errors = Vec::new();
    let gated = !gates(old).is_empty();
    only_deleted_gates(new, old, &mut errors);
    only_added_tolerations(new, old, &mut errors);
    if gated {
        node_selector_additions(new, old, &mut errors);
        node_affinity_additions(new, old, &mut errors);
    }
    if errors.is_empty() && !rest_unchanged(new, old, gated) {
        errors.push(FORBIDDEN_UPDATE.to_owned());
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(message(name_of(new), &errors))
    }
}

fn only_deleted_gates(new: &Value, old: &Value, errors: &mut Vec<String>) {
    let old_names: Vec<&str> = gates(old)
        .iter()
        .filter_map(|gate| gate["name"].as_str())
        .collect();
    for (i, gate) in gates(new).iter().enumerate() {
        let name = gate["name"].as_str().unwrap_or_default();
        if !old_names.contains(&name) {
            errors.push(forbidden(
                &format!("spec.schedulingGates[{i}].name"),
                &format!("only deletion is allowed, but found new scheduling gate '{name}'"),
            ));
        }
    }
}

fn only_added_tolerations(new: &Value, old: &Value, errors: &mut Vec<String>) {
    let list = |pod: &Value| -> Vec<Value> {
        pod["spec"]["tolerations"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let without_seconds = |toleration: &Value| {
        let mut toleration = toleration.clone();
        if let Some(map) = toleration.as_object_mut() {
            map.remove("tolerationSeconds");
        }
        toleration
    };
    let new: Vec<Value> = list(new).iter().map(without_seconds).collect();
    for toleration in list(old) {
        if !new.contains(&without_seconds(&toleration)) {
            errors.push(forbidden(
                "spec.tolerations",
                "existing toleration can not be modified except its tolerationSeconds",
            ));
            return;
        }
    }
}

fn node_selector_additions(new: &Value, old: &Value, errors: &mut Vec<String>) {
    let empty = Map::new();
    let old_selector = old["spec"]["nodeSelector"].as_object().unwrap_or(&empty);
    let new_selector = new["spec"]["nodeSelector"].as_object().unwrap_or(&empty);
    let kept = old_selector
        .iter()
        .all(|(key, value)| new_selector.get(key) == Some(value));
    if !kept {
        errors.push(invalid(
            "spec.nodeSelector",
            &new["spec"]["nodeSelector"],
            "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
        ));
    }
}

fn terms(pod: &Value) -> Option<&Vec<Value>> {
    pod.pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array)
}

fn list<'a>(term: &'a Value, member: &str) -> &'a [Value] {
    term[member].as_array().map_or(&[], Vec::as_slice)
}

fn node_affinity_additions(new: &Value, old: &Value, errors: &mut Vec<String>) {
    let Some(old_terms) = terms(old).filter(|terms| !terms.is_empty()) else {
        return;
    };
    let new_terms: &[Value] = terms(new).map_or(&[], Vec::as_slice);
    if new_terms.len() != old_terms.len() {
        let value = new
            .pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
            .cloned()
            .unwrap_or(Value::Null);
        errors.push(invalid(
            TERMS,
            &value,
            "no additions/deletions to non-empty NodeSelectorTerms list are allowed",
        ));
        return;
    }
    for (i, (old_term, new_term)) in old_terms.iter().zip(new_terms).enumerate() {
        if !term_only_adds(old_term, new_term) {
            errors.push(invalid(
                &format!("{TERMS}[{i}]"),
                new_term,
                "only additions are allowed (no mutations or deletions)",
            ));
        }
    }
}

/// `validateNodeSelectorTermHasOnlyAdditions`: an empty old term stays empty; else each list
/// keeps the old entries as its prefix.
fn term_only_adds(old: &Value, new: &Value) -> bool {
    let (old_exprs, new_exprs) = (list(old, "matchExpressions"), list(new, "matchExpressions"));
    let (old_fields, new_fields) = (list(old, "matchFields"), list(new, "matchFields"));
    if old_exprs.is_empty() && old_fields.is_empty() {
        return new_exprs.is_empty() && new_fields.is_empty();
    }
    new_exprs.starts_with(old_exprs) && new_fields.starts_with(old_fields)
}

/// The spec with what the checks above own (or what may change freely) taken out.
fn rest(pod: &Value, gated: bool, old_affinity_absent: bool) -> Value {
    let mut spec = pod["spec"].clone();
    let Some(map) = spec.as_object_mut() else {
        return spec;
    };
    for key in [
        "schedulingGates",
        "tolerations",
        "activeDeadlineSeconds",
        "terminationGracePeriodSeconds",
    ] {
        map.remove(key);
    }
    for key in ["containers", "initContainers"] {
        if let Some(containers) = map.get_mut(key).and_then(Value::as_array_mut) {
            for container in containers {
                if let Some(container) = container.as_object_mut() {
                    container.remove("image");
                }
            }
        }
    }
    if gated {
        map.remove("nodeSelector");
        if let Some(affinity) = map.get_mut("affinity").and_then(Value::as_object_mut) {
            affinity.remove("nodeAffinity");
        }
        let empty = map
            .get("affinity")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty);
        if empty && old_affinity_absent {
            map.remove("affinity");
        }
    }
    spec
}

fn rest_unchanged(new: &Value, old: &Value, gated: bool) -> bool {
    let absent = old["spec"]["affinity"].is_null();
    rest(new, gated, absent) == rest(old, gated, absent)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    const GATE: &str = "arch.noe.adevinta.com/platforms";

    fn pod(spec: Value) -> Value {
        let mut spec = spec;
        spec["containers"] = json!([{"name": "c", "image": "app:1"}]);
        json!({"metadata": {"name": "web"}, "spec": spec})
    }

    fn term(exprs: Value) -> Value {
        json!({"matchExpressions": exprs})
    }

    fn required(terms: Value) -> Value {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})
    }

    fn arch(values: &[&str]) -> Value {
        json!({"key": "kubernetes.io/arch", "operator": "In", "values": values})
    }

    fn zone() -> Value {
        json!({"key": "zone", "operator": "In", "values": ["a"]})
    }

    fn host_field() -> Value {
        json!({"key": "metadata.name", "operator": "In", "values": ["n1"]})
    }

    /// (case, old spec, new spec, the error the apiserver gives, or None).
    fn cases() -> Vec<(&'static str, Value, Value, Option<String>)> {
        let gate = json!([{"name": GATE}]);
        let two_gates = json!([{"name": "other.example.com/quota"}, {"name": GATE}]);
        let toleration = json!({"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300});
        vec![
            (
                "gate removed, nodeSelector key added, term set whole",
                json!({"schedulingGates": gate}),
                json!({"nodeSelector": {"kubernetes.io/arch": "arm64"}, "affinity": required(json!([term(json!([arch(&["arm64"])]))]))}),
                None,
            ),
            (
                "only our gate removed, another controller's kept",
                json!({"schedulingGates": two_gates}),
                json!({"schedulingGates": [{"name": "other.example.com/quota"}]}),
                None,
            ),
            (
                "expression appended to each existing term, matchFields kept",
                json!({"schedulingGates": gate, "affinity": required(json!([term(json!([zone()])), {"matchFields": [host_field()]}]))}),
                json!({"affinity": required(json!([term(json!([zone(), arch(&["amd64"])])), {"matchFields": [host_field()], "matchExpressions": [arch(&["amd64"])]}]))}),
                None,
            ),
            (
                "preferred terms are free",
                json!({"schedulingGates": gate, "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": term(json!([zone()]))}]}}}),
                json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "preference": term(json!([arch(&["arm64"])]))}]}}}),
                None,
            ),
            (
                "tolerations added, tolerationSeconds changed",
                json!({"schedulingGates": gate, "tolerations": [toleration]}),
                json!({"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}, {"key": "arch", "operator": "Exists"}]}),
                None,
            ),
            (
                "a nodeSelector value changed",
                json!({"schedulingGates": gate, "nodeSelector": {"kubernetes.io/arch": "amd64"}}),
                json!({"nodeSelector": {"kubernetes.io/arch": "arm64"}}),
                Some(r#"Pod "web" is invalid: spec.nodeSelector: Invalid value: {"kubernetes.io/arch":"arm64"}: only additions to spec.nodeSelector are allowed (no mutations or deletions)"#.to_owned()),
            ),
            (
                "a term added to a non-empty list",
                json!({"schedulingGates": gate, "affinity": required(json!([term(json!([zone()]))]))}),
                json!({"affinity": required(json!([term(json!([zone()])), term(json!([arch(&["arm64"])]))]))}),
                Some(format!(r#"Pod "web" is invalid: {TERMS}: Invalid value: [{{"matchExpressions":[{zone}]}},{{"matchExpressions":[{arch}]}}]: no additions/deletions to non-empty NodeSelectorTerms list are allowed"#, zone = zone(), arch = arch(&["arm64"]))),
            ),
            (
                "an expression inserted before the user's",
                json!({"schedulingGates": gate, "affinity": required(json!([term(json!([zone()]))]))}),
                json!({"affinity": required(json!([term(json!([arch(&["arm64"]), zone()]))]))}),
                Some(format!(r#"Pod "web" is invalid: {TERMS}[0]: Invalid value: {{"matchExpressions":[{arch},{zone}]}}: only additions are allowed (no mutations or deletions)"#, zone = zone(), arch = arch(&["arm64"]))),
            ),
            (
                "an expression added to an empty term",
                json!({"schedulingGates": gate, "affinity": required(json!([term(json!([zone()])), {}]))}),
                json!({"affinity": required(json!([term(json!([zone(), arch(&["arm64"])])), term(json!([arch(&["arm64"])]))]))}),
                Some(format!(r#"Pod "web" is invalid: {TERMS}[1]: Invalid value: {{"matchExpressions":[{arch}]}}: only additions are allowed (no mutations or deletions)"#, arch = arch(&["arm64"]))),
            ),
            (
                "a gate added after creation",
                json!({}),
                json!({"schedulingGates": gate}),
                Some(format!("Pod \"web\" is invalid: spec.schedulingGates[0].name: Forbidden: only deletion is allowed, but found new scheduling gate '{GATE}'")),
            ),
            (
                "a toleration removed",
                json!({"schedulingGates": gate, "tolerations": [toleration]}),
                json!({"schedulingGates": gate}),
                Some("Pod \"web\" is invalid: spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds".to_owned()),
            ),
            (
                "affinity added to a pod that is not gated",
                json!({}),
                json!({"affinity": required(json!([term(json!([arch(&["arm64"])]))]))}),
                Some(format!("Pod \"web\" is invalid: {FORBIDDEN_UPDATE}")),
            ),
            (
                "pod affinity added to a gated pod",
                json!({"schedulingGates": gate}),
                json!({"affinity": {"podAffinity": {}}}),
                Some(format!("Pod \"web\" is invalid: {FORBIDDEN_UPDATE}")),
            ),
            (
                "nodeName set on a gated pod",
                json!({"schedulingGates": gate}),
                json!({"schedulingGates": gate, "nodeName": "n1"}),
                Some(format!("Pod \"web\" is invalid: {FORBIDDEN_UPDATE}")),
            ),
            (
                "two errors in brackets",
                json!({"schedulingGates": gate, "nodeSelector": {"a": "b"}}),
                json!({"schedulingGates": [{"name": "x"}]}),
                Some(r#"Pod "web" is invalid: [spec.schedulingGates[0].name: Forbidden: only deletion is allowed, but found new scheduling gate 'x', spec.nodeSelector: Invalid value: null: only additions to spec.nodeSelector are allowed (no mutations or deletions)]"#.to_owned()),
            ),
        ]
    }

    #[test]
    fn updates_are_validated_like_the_apiserver() {
        for (case, old, new, want) in cases() {
            let got = pod_update(&pod(new), &pod(old)).err();
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn gates_with_a_node_name_are_refused_at_creation() {
        let gated = pod(json!({"schedulingGates": [{"name": GATE}], "nodeName": "n1"}));
        assert_eq!(
            pod_create(&gated).err().as_deref(),
            Some("Pod \"web\" is invalid: spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared")
        );
        assert_eq!(pod_create(&pod(json!({"nodeName": "n1"}))), Ok(()));
        assert_eq!(
            pod_create(&pod(json!({"schedulingGates": [{"name": GATE}]}))),
            Ok(())
        );
    }
}
