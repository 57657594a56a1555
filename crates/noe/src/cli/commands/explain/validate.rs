//! A file's object checked against the Kubernetes schema of its kind, as the API server checks
//! it (strict field validation, `kubectl`'s default): a field of the wrong type or an unknown
//! field is refused, naming it, instead of being read as "no image".

use k8s_openapi::api::{apps, batch, core};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// How many unknown fields one message names.
const MAX_UNKNOWN: usize = 5;

/// Why the API server would refuse `object`, or `None` when its kind's schema accepts it (or the
/// kind is not one `explain` decides for, which is reported as skipped instead).
pub fn refusal(object: &Value) -> Option<String> {
    let kind = object.get("kind").and_then(Value::as_str)?;
    match kind {
        "Pod" => check::<core::v1::Pod>(object),
        "PodTemplate" => check::<core::v1::PodTemplate>(object),
        "ReplicationController" => check::<core::v1::ReplicationController>(object),
        "Deployment" => check::<apps::v1::Deployment>(object),
        "StatefulSet" => check::<apps::v1::StatefulSet>(object),
        "DaemonSet" => check::<apps::v1::DaemonSet>(object),
        "ReplicaSet" => check::<apps::v1::ReplicaSet>(object),
        "Job" => check::<batch::v1::Job>(object),
        "CronJob" => check::<batch::v1::CronJob>(object),
        "Namespace" => check::<core::v1::Namespace>(object),
        "Node" => check::<core::v1::Node>(object),
        _ => None,
    }
}

fn check<K>(object: &Value) -> Option<String>
where
    K: DeserializeOwned + k8s_openapi::Resource,
{
    // The schema's structure is what is checked, not the version a file names (the typed
    // deserializer refuses any `apiVersion` but its own).
    let mut object = object.clone();
    if let Some(map) = object.as_object_mut() {
        map.insert("apiVersion".into(), Value::from(K::API_VERSION));
    }
    let mut unknown = Vec::new();
    let mut note = |path: serde_ignored::Path<'_>| unknown.push(field_path(&path.to_string()));
    let ignored = serde_ignored::Deserializer::new(&object, &mut note);
    let typed: Result<K, _> = serde_path_to_error::deserialize(ignored);
    if let Err(error) = typed {
        let path = field_path(&error.path().to_string());
        let inner = error.into_inner();
        return Some(if path.is_empty() || path == "." {
            format!("not a valid {}: {inner}", K::KIND)
        } else {
            format!("field {path}: {inner}")
        });
    }
    if unknown.is_empty() {
        return None;
    }
    let more = unknown.len().saturating_sub(MAX_UNKNOWN);
    let named: Vec<String> = unknown
        .iter()
        .take(MAX_UNKNOWN)
        .map(|path| format!("{path:?}"))
        .collect();
    let mut message = format!(
        "unknown field{} {}",
        if unknown.len() == 1 { "" } else { "s" },
        named.join(", ")
    );
    if more > 0 {
        message.push_str(&format!(" and {more} more"));
    }
    Some(message)
}

/// `spec.containers.0.imagee` as the API server writes it: `spec.containers[0].imagee`.
fn field_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for segment in path.split('.').filter(|s| !s.is_empty() && *s != "?") {
        if segment.bytes().all(|b| b.is_ascii_digit()) {
            out.push('[');
            out.push_str(segment);
            out.push(']');
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(segment);
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_api_servers_refusals() {
        let cases: &[(Value, Option<&str>)] = &[
            (
                json!({"kind": "Pod", "metadata": {"name": "a"},
                       "spec": {"containers": [{"name": "a", "image": "nginx"}]}}),
                None,
            ),
            // Another apiVersion is still checked against the schema.
            (
                json!({"apiVersion": "v2", "kind": "Pod",
                       "spec": {"containers": [{"name": "a", "image": "nginx",
                                "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}]}}),
                None,
            ),
            (
                json!({"kind": "Pod", "spec": {"containers": {"name": "a"}}}),
                Some("field spec.containers: invalid type: map, expected a sequence"),
            ),
            (
                json!({"kind": "Pod", "spec": {"containers": [{"name": "a", "imagee": "nginx"}]}}),
                Some("unknown field \"spec.containers[0].imagee\""),
            ),
            (
                json!({"kind": "Deployment", "spec": {"selector": {}, "template": {"spec":
                       {"containers": [{"name": "a", "image": 3}]}}}}),
                Some("field spec.template.spec.containers[0].image: invalid type: integer"),
            ),
            (
                json!({"kind": "CronJob", "spec": {"schedule": "* * * * *", "jobTemplate":
                       {"spec": {"template": {"spec": {"containers": [], "nodeSelectr": {}}}}}}}),
                Some("unknown field \"spec.jobTemplate.spec.template.spec.nodeSelectr\""),
            ),
            (json!({"kind": "Service", "spec": {"anything": 1}}), None),
        ];
        for (object, want) in cases {
            let got = refusal(object);
            match want {
                None => assert_eq!(got, None, "{object}"),
                Some(want) => assert!(
                    got.as_deref().is_some_and(|got| got.starts_with(want)),
                    "{object}: {got:?}"
                ),
            }
        }
    }

    #[test]
    fn many_unknown_fields_are_counted_not_listed() {
        let containers: Vec<Value> = (0..8)
            .map(|i| json!({"name": i.to_string(), "x": 1}))
            .collect();
        let got = refusal(&json!({"kind": "Pod", "spec": {"containers": containers}})).unwrap();
        assert!(got.ends_with("and 3 more"), "{got}");
    }
}
