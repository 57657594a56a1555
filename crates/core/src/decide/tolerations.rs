//! Step 9: the tolerations of every architecture a pod may run on.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::pod::array;
use super::Policy;
use crate::patch::PatchBuilder;

/// A toleration with Kubernetes' defaults spelled out, to compare tolerations.
fn normalized(toleration: &Value) -> Value {
    let field = |name: &str| toleration.get(name).cloned().unwrap_or(Value::Null);
    let text = |name: &str, default: &str| match toleration.get(name) {
        Some(Value::String(s)) if !s.is_empty() => json!(s),
        _ => json!(default),
    };
    json!({
        "key": text("key", ""),
        "operator": text("operator", "Equal"),
        "value": text("value", ""),
        "effect": text("effect", ""),
        "tolerationSeconds": field("tolerationSeconds"),
    })
}

/// Appends the configured tolerations of each arch of `archs` the pod does not already have.
pub(crate) fn add(patch: &mut PatchBuilder<'_>, policy: &Policy, archs: &BTreeSet<&str>) {
    if policy.architectures.is_empty() {
        return;
    }
    let raw = patch.doc();
    let mut present: Vec<Value> = raw
        .get("spec")
        .map(|s| array(s, "tolerations"))
        .unwrap_or_default()
        .iter()
        .map(normalized)
        .collect();
    for arch in archs {
        let Some(settings) = policy.architectures.get(*arch) else {
            continue;
        };
        for toleration in &settings.tolerations {
            let key = normalized(toleration);
            if present.contains(&key) {
                continue;
            }
            present.push(key);
            patch.append(&["spec", "tolerations"], toleration.clone());
        }
    }
}
