//! Minimal RFC 6902 JSON patches built against the raw object (docs/architecture.md, "The patch").
//!
//! [`PatchBuilder`] records the writes a decision wants (set a key, append to an array, replace,
//! remove) and turns them into operations against the *original* document: when a parent is absent
//! or null, one `add` creates it whole with everything written below it; when it is present, a
//! single key is added or an array element appended with `/-`. No operation ever writes into a
//! parent another operation of the same patch creates.

mod builder;

pub use builder::PatchBuilder;

use serde::Serialize;
use serde_json::{json, Value};

/// Escapes one JSON Pointer reference token (RFC 6901): `~` → `~0`, `/` → `~1`.
pub fn escape(token: &str) -> std::borrow::Cow<'_, str> {
    if token.contains(['~', '/']) {
        token.replace('~', "~0").replace('/', "~1").into()
    } else {
        token.into()
    }
}

/// The JSON Pointer of a path given as unescaped segments: `["a", "b/c"]` → `/a/b~1c`.
pub fn pointer<S: AsRef<str>>(segments: &[S]) -> String {
    let mut out = String::new();
    for segment in segments {
        out.push('/');
        out.push_str(&escape(segment.as_ref()));
    }
    out
}

/// One RFC 6902 operation. Serializes with its members in the order a [`Value`] object sorts
/// them (`op`, `path`, `value`), so the bytes equal those of the same operation as a `Value`; it
/// compares equal to that `Value` too (tests write expected patches with `json!`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Op {
    /// `add`, `replace` or `remove`.
    pub op: &'static str,
    /// A JSON Pointer.
    pub path: String,
    /// The value written (`add` and `replace`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

impl Op {
    /// The operation as a JSON value.
    pub fn to_value(&self) -> Value {
        let mut object = json!({"op": self.op, "path": self.path});
        if let (Some(value), Some(map)) = (&self.value, object.as_object_mut()) {
            map.insert("value".to_owned(), value.clone());
        }
        object
    }
}

impl PartialEq<Value> for Op {
    fn eq(&self, other: &Value) -> bool {
        self.to_value() == *other
    }
}

impl PartialEq<Op> for Value {
    fn eq(&self, other: &Op) -> bool {
        other == self
    }
}

/// An `add` operation.
pub fn add(path: impl Into<String>, value: Value) -> Op {
    Op {
        op: "add",
        path: path.into(),
        value: Some(value),
    }
}

/// A `replace` operation.
pub fn replace(path: impl Into<String>, value: Value) -> Op {
    Op {
        op: "replace",
        path: path.into(),
        value: Some(value),
    }
}

/// A `remove` operation.
pub fn remove(path: impl Into<String>) -> Op {
    Op {
        op: "remove",
        path: path.into(),
        value: None,
    }
}

/// Moves operations computed for a pod under `prefix` (a JSON Pointer such as `/spec/template`,
/// or `/spec/jobTemplate/spec/template` for a CronJob), so a workload's pod template is patched.
/// `path` is rewritten; a trailing `/` of the prefix is ignored.
pub fn with_prefix(ops: Vec<Op>, prefix: &str) -> Vec<Op> {
    let prefix = prefix.trim_end_matches('/');
    ops.into_iter()
        .map(|mut op| {
            op.path = format!("{prefix}{}", op.path);
            op
        })
        .collect()
}

/// Where the pod template of a workload `kind` lives, for [`with_prefix`]: `""` for a Pod,
/// `/spec/template` for Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController and
/// Job, `/spec/jobTemplate/spec/template` for CronJob, `/template` for PodTemplate; `None` for
/// any other kind.
pub fn pod_template_pointer(kind: &str) -> Option<&'static str> {
    match kind {
        "Pod" => Some(""),
        "Deployment"
        | "StatefulSet"
        | "DaemonSet"
        | "ReplicaSet"
        | "ReplicationController"
        | "Job" => Some("/spec/template"),
        "CronJob" => Some("/spec/jobTemplate/spec/template"),
        "PodTemplate" => Some("/template"),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn escapes_tilde_before_slash() {
        assert_eq!(escape("a/b"), "a~1b");
        assert_eq!(escape("a~b"), "a~0b");
        assert_eq!(escape("~/"), "~0~1");
        assert_eq!(escape("~1"), "~01");
        assert_eq!(
            pointer(&["metadata", "annotations", "arch.noe.adevinta.com/platforms"]),
            "/metadata/annotations/arch.noe.adevinta.com~1platforms"
        );
        assert_eq!(pointer::<&str>(&[]), "");
    }

    #[test]
    fn template_pointers() {
        assert_eq!(pod_template_pointer("Pod"), Some(""));
        assert_eq!(pod_template_pointer("Deployment"), Some("/spec/template"));
        assert_eq!(pod_template_pointer("Job"), Some("/spec/template"));
        assert_eq!(
            pod_template_pointer("CronJob"),
            Some("/spec/jobTemplate/spec/template")
        );
        assert_eq!(pod_template_pointer("Service"), None);
    }

    #[test]
    fn prefixes_paths() {
        let ops = vec![add("/spec/nodeSelector", json!({})), remove("/a")];
        assert_eq!(
            with_prefix(ops, "/spec/template/"),
            vec![
                add("/spec/template/spec/nodeSelector", json!({})),
                remove("/spec/template/a"),
            ]
        );
    }

    #[test]
    fn operations_serialize_as_their_json_values() {
        for op in [
            add("/a~1b", json!({"x": [1, "two"]})),
            replace("/spec/nodeSelector/kubernetes.io~1arch", json!("arm64")),
            remove("/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution/0"),
        ] {
            assert_eq!(
                serde_json::to_string(&op).unwrap(),
                serde_json::to_string(&op.to_value()).unwrap()
            );
            assert_eq!(op, op.to_value());
            assert_eq!(op.to_value(), op);
        }
        assert_ne!(remove("/a"), json!({"op": "remove", "path": "/b"}));
    }
}
