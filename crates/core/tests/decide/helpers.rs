//! Helpers shared by the decision tests: building lookups, applying patches, checking them.
#![allow(dead_code)]

use k8s_openapi::api::core::v1::Pod;
use noe_core::decide::{
    Decision, Facts, Lookups, Policy, Verdict, ARCH_LABEL, BETA_ARCH_LABEL, PLATFORMS_ANNOTATION,
};
use noe_core::Platform;
use serde_json::Value;

/// `"linux/arm/v7"` → a platform; `"/amd64"` has an empty OS.
/// `os/arch[/variant][@os.version]`, e.g. `windows/amd64@10.0.20348.2227`; `*` is
/// [`Platform::any`] (a platform override's arch-neutral image).
pub fn platform(spec: &str) -> Platform {
    if spec == "*" {
        return Platform::any();
    }
    let (spec, os_version) = spec
        .split_once('@')
        .map_or((spec, None), |(s, v)| (s, Some(v)));
    let mut parts = spec.split('/');
    let os = parts.next().unwrap_or_default();
    let arch = parts.next().unwrap_or_default();
    Platform::new(os, arch, parts.next()).with_os_version(os_version)
}

/// Lookups from `(image, Ok(platforms) | Err(error))`.
pub fn lookups(entries: &[(&str, Result<&[&str], &str>)]) -> Lookups {
    entries
        .iter()
        .map(|(image, result)| {
            let result = match result {
                Ok(platforms) => Ok(platforms.iter().map(|p| platform(p)).collect()),
                Err(error) => Err(noe_core::decide::LookupError::message(*error)),
            };
            ((*image).to_owned(), result)
        })
        .collect()
}

/// Unescapes a JSON Pointer into tokens.
pub fn tokens(pointer: &str) -> Vec<String> {
    assert!(
        pointer.starts_with('/'),
        "pointer {pointer:?} must start with /"
    );
    pointer[1..]
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect()
}

fn lookup<'v>(doc: &'v Value, tokens: &[String]) -> Option<&'v Value> {
    let mut current = doc;
    for token in tokens {
        current = match current {
            Value::Object(map) => map.get(token)?,
            Value::Array(items) => items.get(token.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(current)
}

/// Every operation addresses the *original* document: an `add` writes into a parent that exists
/// and is not null there, `replace`/`remove` target an existing value. So no operation writes
/// into a parent created by another, and each absent parent is created by exactly one `add`.
pub fn assert_minimal(doc: &Value, ops: &[Value]) {
    for op in ops {
        let kind = op["op"].as_str().unwrap();
        let path = tokens(op["path"].as_str().unwrap());
        let (last, parent) = path.split_last().unwrap();
        let parent_value = lookup(doc, parent);
        match kind {
            "add" => {
                let parent_value =
                    parent_value.unwrap_or_else(|| panic!("add {op} into an absent parent"));
                assert!(!parent_value.is_null(), "add {op} into a null parent");
                if parent_value.is_array() {
                    assert_eq!(last, "-", "adds to arrays append: {op}");
                } else {
                    assert!(parent_value.is_object(), "add {op} into a scalar");
                }
            }
            "replace" | "remove" => {
                assert!(
                    lookup(doc, &path).is_some(),
                    "{kind} of an absent value: {op}"
                );
            }
            other => panic!("unexpected op {other}"),
        }
    }
}

/// The operations as JSON values.
pub fn values(ops: &[noe_core::patch::Op]) -> Vec<Value> {
    ops.iter()
        .map(|op| serde_json::to_value(op).unwrap())
        .collect()
}

/// Applies `ops` to `doc` with the json-patch crate.
pub fn apply(doc: &Value, ops: &[Value]) -> Value {
    let patch: json_patch::Patch =
        serde_json::from_value(Value::Array(ops.to_vec())).expect("a valid RFC 6902 patch");
    let mut out = doc.clone();
    json_patch::patch(&mut out, &patch).unwrap_or_else(|e| panic!("patch {ops:?} fails: {e}"));
    out
}

/// Applies a verdict's patch (if any) and parses the result as a typed Pod.
pub fn patched_pod(doc: &Value, verdict: &Verdict) -> (Value, Pod) {
    let out = match verdict {
        Verdict::Patch { ops, .. } => {
            let ops = values(ops);
            assert_minimal(doc, &ops);
            apply(doc, &ops)
        }
        _ => doc.clone(),
    };
    let pod: Pod = serde_json::from_value(out.clone()).expect("the patched pod is a valid Pod");
    (out, pod)
}

/// The pod carries the constraints of a decision on `common`: the annotation, and the scheduler
/// may place it only on nodes of those archs, unless the pod has arch terms of its own (the terms
/// we did not write may let it elsewhere). Needs `mod schedule` beside this module.
pub fn assert_constrained(original: &Value, patched: &Value, common: &[String]) {
    assert_eq!(
        patched["metadata"]["annotations"][PLATFORMS_ANNOTATION],
        Value::String(common.join(",")),
        "platforms annotation"
    );
    let terms = original["spec"]["affinity"]["nodeAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let own_arch_terms = terms.iter().any(|t| {
        t["matchExpressions"].as_array().is_some_and(|e| {
            e.iter()
                .any(|e| e["key"] == ARCH_LABEL || e["key"] == BETA_ARCH_LABEL)
        })
    });
    if own_arch_terms {
        return;
    }
    let spec = &patched["spec"];
    let nodes = super::schedule::nodes(&[spec], &[]);
    for node in nodes.iter().filter(|n| super::schedule::eligible(spec, n)) {
        let arch = &node.labels[ARCH_LABEL];
        assert!(
            common.contains(arch),
            "the pod may land on {arch}, outside {common:?}: {}",
            serde_json::to_string(spec).unwrap()
        );
    }
}

/// Reads the pod and decides.
pub fn decide_pod(pod: &Value, lookups: &Lookups, facts: &Facts, policy: &Policy) -> Decision {
    let plan = noe_core::decide::plan(pod, policy);
    decide_checked(&plan, lookups, facts, policy)
}

/// `decide`, after checking that `decide_verdict` (what an admission runs) comes to the same
/// verdict, warnings and signals, and records no summary.
pub fn decide_checked(
    plan: &noe_core::decide::Plan<'_>,
    lookups: &Lookups,
    facts: &Facts,
    policy: &Policy,
) -> Decision {
    let decision = noe_core::decide::decide(plan, lookups, facts, policy);
    let lean = noe_core::decide::decide_verdict(plan, lookups, facts, policy);
    assert_eq!(lean.verdict, decision.verdict, "decide_verdict's verdict");
    assert_eq!(
        lean.warnings, decision.warnings,
        "decide_verdict's warnings"
    );
    assert_eq!(lean.signals, decision.signals, "decide_verdict's signals");
    let summary = &lean.summary;
    assert!(
        summary.images.is_empty()
            && summary.common.is_none()
            && summary.constraint == noe_core::decide::Constraint::None
            && summary.preferred.is_none()
            && summary.tolerations.is_empty()
            && summary.node_labels.is_empty()
            && summary.audit.is_none(),
        "decide_verdict recorded a summary: {summary:?}"
    );
    decision
}
