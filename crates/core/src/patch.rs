//! Minimal RFC 6902 JSON patches built against the raw object (docs/architecture.md, "The patch").
//!
//! [`PatchBuilder`] records the writes a decision wants (set a key, append to an array, replace,
//! remove) and turns them into operations against the *original* document: when a parent is absent
//! or null, one `add` creates it whole with everything written below it; when it is present, a
//! single key is added or an array element appended with `/-`. No operation ever writes into a
//! parent another operation of the same patch creates.

mod builder;
pub mod release;

pub use builder::PatchBuilder;
pub use json_patch::PatchOperation as Op;
pub use release::{release, ReleaseError};

use json_patch::jsonptr::{Pointer, PointerBuf};
use json_patch::{AddOperation, RemoveOperation, ReplaceOperation};
use serde_json::Value;

/// The JSON Pointer of a path given as unescaped segments: `["a", "b/c"]` → `/a/b~1c`
/// (RFC 6901 escaping, `~` → `~0`, `/` → `~1`).
pub fn pointer<S: AsRef<str>>(segments: &[S]) -> PointerBuf {
    // One allocation of the right size: jsonptr's `from_tokens` grows its string token by token,
    // a measurable share of the warm path's patch (docs/benchmarks.md).
    let len = segments
        .iter()
        .map(|s| s.as_ref().len().saturating_add(1))
        .fold(0usize, usize::saturating_add);
    let mut encoded = String::with_capacity(len.saturating_add(8));
    for segment in segments {
        let segment = segment.as_ref();
        encoded.push('/');
        if segment.contains(['~', '/']) {
            for c in segment.chars() {
                match c {
                    '~' => encoded.push_str("~0"),
                    '/' => encoded.push_str("~1"),
                    c => encoded.push(c),
                }
            }
        } else {
            encoded.push_str(segment);
        }
    }
    // Every `~` is escaped above, so the pointer is valid; the fallback is never taken.
    PointerBuf::parse(encoded)
        .unwrap_or_else(|_| PointerBuf::from_tokens(segments.iter().map(AsRef::as_ref)))
}

/// An `add` operation.
pub fn add(path: PointerBuf, value: Value) -> Op {
    Op::Add(AddOperation { path, value })
}

/// A `replace` operation.
pub fn replace(path: PointerBuf, value: Value) -> Op {
    Op::Replace(ReplaceOperation { path, value })
}

/// A `remove` operation.
pub fn remove(path: PointerBuf) -> Op {
    Op::Remove(RemoveOperation { path })
}

/// Moves operations computed for a pod under `prefix` (such as `/spec/template`, or
/// `/spec/jobTemplate/spec/template` for a CronJob), so a workload's pod template is patched.
pub fn with_prefix(ops: Vec<Op>, prefix: &Pointer) -> Vec<Op> {
    ops.into_iter()
        .map(|mut op| {
            let path = match &mut op {
                Op::Add(AddOperation { path, .. })
                | Op::Remove(RemoveOperation { path })
                | Op::Replace(ReplaceOperation { path, .. })
                | Op::Move(json_patch::MoveOperation { path, .. })
                | Op::Copy(json_patch::CopyOperation { path, .. })
                | Op::Test(json_patch::TestOperation { path, .. }) => path,
            };
            *path = prefix.concat(path);
            op
        })
        .collect()
}

/// Where the pod template of a workload `kind` lives, for [`with_prefix`]: `""` for a Pod,
/// `/spec/template` for Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController and
/// Job, `/spec/jobTemplate/spec/template` for CronJob, `/template` for PodTemplate; `None` for
/// any other kind.
pub fn pod_template_pointer(kind: &str) -> Option<&'static Pointer> {
    let pointer = match kind {
        "Pod" => "",
        "Deployment"
        | "StatefulSet"
        | "DaemonSet"
        | "ReplicaSet"
        | "ReplicationController"
        | "Job" => "/spec/template",
        "CronJob" => "/spec/jobTemplate/spec/template",
        "PodTemplate" => "/template",
        _ => return None,
    };
    Some(Pointer::from_static(pointer))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_escape_tilde_before_slash() {
        assert_eq!(pointer(&["a/b"]).as_str(), "/a~1b");
        assert_eq!(pointer(&["a~b"]).as_str(), "/a~0b");
        assert_eq!(pointer(&["~/"]).as_str(), "/~0~1");
        assert_eq!(pointer(&["~1"]).as_str(), "/~01");
        assert_eq!(
            pointer(&["metadata", "annotations", "arch.noe.adevinta.com/platforms"]).as_str(),
            "/metadata/annotations/arch.noe.adevinta.com~1platforms"
        );
        assert_eq!(pointer::<&str>(&[]).as_str(), "");
    }

    proptest::proptest! {
        /// The one-allocation encoder writes what jsonptr's token encoder writes.
        #[test]
        fn pointer_is_jsonptrs_encoding(segments in proptest::collection::vec("[a-z~/.0-9é]{0,12}", 0..6)) {
            proptest::prop_assert_eq!(
                pointer(&segments),
                PointerBuf::from_tokens(segments.iter().map(String::as_str))
            );
        }
    }

    #[test]
    fn template_pointers() {
        let path = |kind| pod_template_pointer(kind).map(Pointer::as_str);
        assert_eq!(path("Pod"), Some(""));
        assert_eq!(path("Deployment"), Some("/spec/template"));
        assert_eq!(path("Job"), Some("/spec/template"));
        assert_eq!(path("CronJob"), Some("/spec/jobTemplate/spec/template"));
        assert_eq!(path("Service"), None);
    }

    #[test]
    fn prefixes_paths() {
        let ops = vec![
            add(pointer(&["spec", "nodeSelector"]), json!({})),
            remove(pointer(&["a"])),
        ];
        let prefix = pod_template_pointer("Deployment").unwrap();
        assert_eq!(
            serde_json::to_value(with_prefix(ops, prefix)).unwrap(),
            json!([
                {"op": "add", "path": "/spec/template/spec/nodeSelector", "value": {}},
                {"op": "remove", "path": "/spec/template/a"},
            ])
        );
    }

    #[test]
    fn operations_serialize_as_rfc_6902() {
        let ops = vec![
            add(pointer(&["a/b"]), json!({"x": [1, "two"]})),
            replace(
                pointer(&["spec", "nodeSelector", "kubernetes.io/arch"]),
                json!("arm64"),
            ),
            remove(pointer(&["spec", "tolerations", "0"])),
        ];
        assert_eq!(
            serde_json::to_string(&ops).unwrap(),
            r#"[{"op":"add","path":"/a~1b","value":{"x":[1,"two"]}},{"op":"replace","path":"/spec/nodeSelector/kubernetes.io~1arch","value":"arm64"},{"op":"remove","path":"/spec/tolerations/0"}]"#
        );
    }
}
