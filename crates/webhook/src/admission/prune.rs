//! The review's object read as raw JSON without what no step of the decision reads, and no patch
//! writes into: the pod's `status`, its `metadata.managedFields`, every member of a container
//! (`containers`, `initContainers`, `ephemeralContainers`) but its `name` and `image`, and every
//! member of a volume (`spec.volumes`) but its `name` and `image` (an image volume's reference).
//! A pod as the apiserver sends it carries most of its bytes there (field-manager entries, env,
//! probes, resources, mounts, the projected token volume): they are skipped while parsing, never
//! built into maps and strings (the
//! admission bench has the cost of each, docs/benchmarks.md). Everything else is kept as sent,
//! members newer than our k8s-openapi included; what is not the expected shape is kept whole, so
//! [`super::review`] still refuses it.

use std::borrow::Cow;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The pod's members no step reads.
const SKIPPED_TOP: &[&str] = &["status"];
/// The members of `metadata` no step reads.
const SKIPPED_METADATA: &[&str] = &["managedFields"];
/// The container lists whose entries are pruned to [`CONTAINER_KEPT`].
const CONTAINER_LISTS: &[&str] = &["containers", "initContainers", "ephemeralContainers"];
/// The members of a container the decision reads.
const CONTAINER_KEPT: &[&str] = &["name", "image"];
/// The members of a volume the decision reads (`image`: an image volume's reference).
const VOLUME_KEPT: &[&str] = &["name", "image"];

/// An object read with the members above left out.
#[derive(Debug)]
pub struct Pruned(pub Value);

impl<'de> Deserialize<'de> for Pruned {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Level::Object.deserialize(deserializer).map(Pruned)
    }
}

/// Where in the object a value stands: what to leave out of it.
#[derive(Clone, Copy, Debug)]
enum Level {
    /// The object itself.
    Object,
    /// `metadata`.
    Metadata,
    /// `spec`.
    Spec,
    /// A container list.
    Containers,
    /// One container.
    Container,
    /// `spec.volumes`.
    Volumes,
    /// One volume.
    Volume,
}

impl Level {
    /// The level of the value of `key` in a map at this level; `None` when it is kept whole.
    fn child(self, key: &str) -> Option<Self> {
        match (self, key) {
            (Self::Object, "metadata") => Some(Self::Metadata),
            (Self::Object, "spec") => Some(Self::Spec),
            (Self::Spec, key) if CONTAINER_LISTS.contains(&key) => Some(Self::Containers),
            (Self::Spec, "volumes") => Some(Self::Volumes),
            _ => None,
        }
    }

    /// Whether the member `key` of a map at this level is left out.
    fn skips(self, key: &str) -> bool {
        match self {
            Self::Object => SKIPPED_TOP.contains(&key),
            Self::Metadata => SKIPPED_METADATA.contains(&key),
            Self::Container => !CONTAINER_KEPT.contains(&key),
            Self::Volume => !VOLUME_KEPT.contains(&key),
            Self::Spec | Self::Containers | Self::Volumes => false,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Level {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Level {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(Name(key)) = map.next_key::<Name<'de>>()? {
            if self.skips(&key) {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let value = match self.child(&key) {
                Some(level) => map.next_value_seed(level)?,
                None => map.next_value::<Value>()?,
            };
            out.insert(key.into_owned(), value);
        }
        Ok(Value::Object(out))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        let entries = match self {
            Self::Containers => Some(Self::Container),
            Self::Volumes => Some(Self::Volume),
            _ => None,
        };
        match entries {
            Some(entry) => {
                while let Some(item) = seq.next_element_seed(entry)? {
                    out.push(item);
                }
            }
            _ => {
                while let Some(item) = seq.next_element::<Value>()? {
                    out.push(item);
                }
            }
        }
        Ok(Value::Array(out))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// A member's name, borrowed from the body unless it holds escapes (serde's borrowed `Cow`):
/// the name of a member left out is never copied.
#[derive(Deserialize)]
#[serde(transparent)]
struct Name<'a>(#[serde(borrow)] Cow<'a, str>);

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pruned(value: &Value) -> Value {
        serde_json::from_slice::<Pruned>(&serde_json::to_vec(value).unwrap())
            .unwrap()
            .0
    }

    #[test]
    fn leaves_out_what_no_step_reads_and_keeps_the_rest() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "labels": {"a": "b"}, "annotations": {"x": "y"},
                         "ownerReferences": [{"kind": "ReplicaSet", "controller": true}],
                         "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
                         "futureMember": [1, 2.5, -3, null, true]},
            "spec": {
                "containers": [{"name": "app", "image": "nginx", "env": [{"name": "A", "value": "1"}],
                                "resources": {"limits": {"cpu": "1"}}, "livenessProbe": {"exec": {}}}],
                "initContainers": [{"name": "init", "image": "busybox", "command": ["true"]}],
                "ephemeralContainers": [{"name": "debug", "image": "alpine", "stdin": true}],
                "volumes": [{"name": "v", "image": {"reference": "data:1", "pullPolicy": "Always"}},
                            {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}],
                "nodeSelector": {"disk": "ssd"},
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}]}}},
                "tolerations": [{"key": "t", "operator": "Exists"}],
                "imagePullSecrets": [{"name": "regcred"}],
                "os": {"name": "linux"}, "nodeName": "", "restartPolicy": "Always"
            },
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled"}]}
        });
        let mut want = pod.clone();
        want.as_object_mut().unwrap().remove("status");
        want["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        want["spec"]["containers"] = json!([{"name": "app", "image": "nginx"}]);
        want["spec"]["initContainers"] = json!([{"name": "init", "image": "busybox"}]);
        want["spec"]["ephemeralContainers"] = json!([{"name": "debug", "image": "alpine"}]);
        want["spec"]["volumes"] = json!([
            {"name": "v", "image": {"reference": "data:1", "pullPolicy": "Always"}},
            {"name": "token"}
        ]);
        assert_eq!(pruned(&pod), want);
    }

    /// A Deployment's pod as the apiserver sends it, whole and pruned: the same decision (patch,
    /// warnings, signals) for images of one and of two archs.
    #[test]
    fn the_decision_is_the_same_on_the_pruned_pod() {
        use noe_core::decide::{decide, plan, Facts, Lookups, Policy};
        use noe_core::Platform;
        use std::sync::Arc;

        let images = ["r.example/a:1".to_owned(), "r.example/b:2".to_owned()];
        let review = noe_test_support::deployment_pod_review("u", &images);
        let full = review["request"]["object"].clone();
        let lean = pruned(&full);
        let size = |v: &Value| serde_json::to_vec(v).unwrap().len();
        assert!(
            size(&lean) * 2 < size(&full),
            "{} of {}",
            size(&lean),
            size(&full)
        );
        let policy = Policy::default();
        let amd64 = Platform::new("linux", "amd64", None);
        let arm64 = Platform::new("linux", "arm64", None);
        for platforms in [vec![amd64.clone(), arm64], vec![amd64]] {
            let platforms: Arc<[Platform]> = Arc::from(platforms);
            let lookups: Lookups = images
                .iter()
                .map(|image| (image.clone(), Ok(platforms.clone())))
                .collect();
            let on_full = decide(&plan(&full, &policy), &lookups, &Facts::default(), &policy);
            let on_lean = decide(&plan(&lean, &policy), &lookups, &Facts::default(), &policy);
            assert_eq!(on_full, on_lean);
        }
    }

    #[test]
    fn shapes_it_does_not_expect_are_kept_whole() {
        for value in [
            json!(null),
            json!("a pod"),
            json!([1, 2]),
            json!({"metadata": "x", "spec": 3}),
            json!({"spec": {"containers": null, "initContainers": {"a": 1}}}),
            json!({"spec": {"containers": [null, "nginx", {"image": 7}]}}),
            json!({"spec": {"volumes": [null, "v", {"image": 7}]}}),
        ] {
            assert_eq!(pruned(&value), value, "{value}");
        }
    }
}
