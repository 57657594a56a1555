//! Workload → pod template: the pod a Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet,
//! ReplicationController, Job, CronJob or PodTemplate object stands for, as its controller would
//! create it. Pure: what `explain`, `report` and a lookup endpoint decide for.

use std::borrow::Cow;

use serde_json::{json, Value};

use json_patch::jsonptr::Pointer;

use crate::patch::pod_template_pointer;

/// The pod an object stands for.
#[derive(Clone, Debug, PartialEq)]
pub struct PodOf<'a> {
    /// The object's `kind`.
    pub kind: &'a str,
    /// `metadata.namespace`, `default` when absent.
    pub namespace: &'a str,
    /// `metadata.name`, else `metadata.generateName`, else empty.
    pub name: &'a str,
    /// Where the pod template lives in the object (`""` for a Pod): patch paths go under it.
    pub template: &'static Pointer,
    /// The pod: the template, or for a DaemonSet the pod its controller creates from it
    /// ([`daemonset_pod`]).
    pub pod: Cow<'a, Value>,
}

/// Why an object stands for no pod.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoPod {
    #[error("kind {0:?} is not a Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, Job, CronJob or PodTemplate")]
    Kind(String),
    #[error("the {kind} has no pod template at {template}")]
    NoTemplate { kind: String, template: String },
}

/// An object's `kind`, `metadata.namespace` (`default` when absent or empty) and
/// `metadata.name` (else `metadata.generateName`, else empty).
pub fn identity(object: &Value) -> (&str, &str, &str) {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let namespace = Some(text("/metadata/namespace"))
        .filter(|ns| !ns.is_empty())
        .unwrap_or("default");
    let name = Some(text("/metadata/name"))
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| text("/metadata/generateName"));
    (text("/kind"), namespace, name)
}

/// The pod `object` stands for.
pub fn pod_of(object: &Value) -> Result<PodOf<'_>, NoPod> {
    let (kind, namespace, name) = identity(object);
    let template = pod_template_pointer(kind).ok_or_else(|| NoPod::Kind(kind.to_owned()))?;
    let pod = object
        .pointer(template.as_str())
        .filter(|pod| pod.is_object())
        .ok_or_else(|| NoPod::NoTemplate {
            kind: kind.to_owned(),
            template: template.to_string(),
        })?;
    let pod = if kind == "DaemonSet" {
        Cow::Owned(daemonset_pod(pod, name))
    } else {
        Cow::Borrowed(pod)
    };
    Ok(PodOf {
        kind,
        namespace,
        name,
        template,
        pod,
    })
}

/// A pod of the DaemonSet `name` as its controller creates it: the template, with every required
/// node selector term (or a new one) matching the field `metadata.name` of one node, and the
/// DaemonSet as controller owner.
pub fn daemonset_pod(template: &Value, name: &str) -> Value {
    let mut pod = template.clone();
    let pin = json!({"key": "metadata.name", "operator": "In", "values": ["<node>"]});
    if let Some(metadata) = ensure_object(&mut pod, "metadata") {
        metadata.insert(
            "ownerReferences".into(),
            json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name,
                    "uid": "", "controller": true}]),
        );
    }
    let terms = pod
        .pointer_mut("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array_mut);
    match terms {
        Some(terms) if !terms.is_empty() => {
            for term in terms.iter_mut().filter_map(Value::as_object_mut) {
                term.insert("matchFields".into(), json!([pin.clone()]));
            }
        }
        _ => {
            let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchFields": [pin]}]}}});
            if let Some(spec) = ensure_object(&mut pod, "spec") {
                match spec.get_mut("affinity").and_then(Value::as_object_mut) {
                    Some(existing) => {
                        existing.insert("nodeAffinity".into(), affinity["nodeAffinity"].clone());
                    }
                    None => {
                        spec.insert("affinity".into(), affinity);
                    }
                }
            }
        }
    }
    pod
}

fn ensure_object<'v>(
    value: &'v mut Value,
    key: &str,
) -> Option<&'v mut serde_json::Map<String, Value>> {
    let object = value.as_object_mut()?;
    let entry = object
        .entry(key)
        .or_insert_with(|| Value::Object(Default::default()));
    if !entry.is_object() {
        *entry = Value::Object(Default::default());
    }
    entry.as_object_mut()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_pod_of_each_kind() {
        let spec = json!({"containers": [{"name": "a", "image": "nginx"}]});
        let cases = [
            (
                json!({"kind": "Pod", "metadata": {"name": "p", "namespace": "n"}, "spec": spec}),
                "",
                "n",
                "p",
            ),
            (
                json!({"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"spec": spec}}}),
                "/spec/template",
                "default",
                "d",
            ),
            (
                json!({"kind": "CronJob", "metadata": {"generateName": "c-"}, "spec": {"jobTemplate": {"spec": {"template": {"spec": spec}}}}}),
                "/spec/jobTemplate/spec/template",
                "default",
                "c-",
            ),
            (
                json!({"kind": "PodTemplate", "metadata": {"name": "t"}, "template": {"spec": spec}}),
                "/template",
                "default",
                "t",
            ),
        ];
        for (object, template, namespace, name) in &cases {
            let pod = pod_of(object).unwrap();
            assert_eq!(pod.template.as_str(), *template);
            assert_eq!((pod.namespace, pod.name), (*namespace, *name));
            assert_eq!(
                pod.pod.pointer("/spec/containers/0/image"),
                Some(&json!("nginx"))
            );
        }
        assert_eq!(
            pod_of(&json!({"kind": "Service"})),
            Err(NoPod::Kind("Service".into()))
        );
        assert!(matches!(
            pod_of(&json!({"kind": "Job", "spec": {}})),
            Err(NoPod::NoTemplate { .. })
        ));
    }

    #[test]
    fn daemonset_pods_are_pinned_like_the_controller_pins_them() {
        let pin = json!([{"key": "metadata.name", "operator": "In", "values": ["<node>"]}]);
        let daemonset = json!({"kind": "DaemonSet", "metadata": {"name": "agent"},
                               "spec": {"template": {"spec": {"containers": []}}}});
        let bare = pod_of(&daemonset).unwrap().pod.into_owned();
        assert_eq!(
            bare.pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchFields"),
            Some(&pin)
        );
        assert_eq!(
            bare.pointer("/metadata/ownerReferences/0/kind"),
            Some(&json!("DaemonSet"))
        );
        let with_terms = daemonset_pod(
            &json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]}}}}}),
            "agent",
        );
        let term = with_terms
            .pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0")
            .unwrap();
        assert_eq!(term["matchFields"], pin);
        assert_eq!(term["matchExpressions"][0]["key"], "pool");
    }
}
