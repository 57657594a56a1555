//! The decision table's vocabulary (pods, expressions, operations, signals) and its runner.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use noe_core::decide::{
    plan, ArchSettings, DenyReason, Facts, Lookups, Mode, Policy, Signal, SkipReason, Verdict,
    Weight,
};
use serde_json::{json, Value};

use super::helpers::{assert_constrained, decide_pod, patched_pod};

pub const MULTI: &[&str] = &["linux/amd64", "linux/arm64"];
pub const AMD: &[&str] = &["linux/amd64"];
pub const ARM: &[&str] = &["linux/arm64"];
pub const REQ: &str =
    "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms";
pub const PREF: &str =
    "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution";
pub const ANN: &str = "/metadata/annotations/arch.noe.adevinta.com~1platforms";

/// Deep-merges `patch` into `base` (objects merge, anything else replaces).
pub fn merge(base: &mut Value, patch: Value) {
    match (base, patch) {
        (Value::Object(base), Value::Object(patch)) => {
            for (key, value) in patch {
                merge(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (slot, value) => *slot = value,
    }
}

/// A pod with one container `app:1` and a field unknown to k8s-openapi, plus `overrides`.
pub fn pod(overrides: Value) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "containers": [{"name": "app", "image": "app:1"}],
            "futureField": {"kept": true}
        }
    });
    merge(&mut pod, overrides);
    pod
}

pub fn arch_in(archs: &[&str]) -> Value {
    json!({"key": "kubernetes.io/arch", "operator": "In", "values": archs})
}

pub fn expr(key: &str, operator: &str, values: &[&str]) -> Value {
    json!({"key": key, "operator": operator, "values": values})
}

/// `affinity` with one required term of `expressions`.
pub fn required(terms: Vec<Vec<Value>>) -> Value {
    let terms: Vec<Value> = terms
        .into_iter()
        .map(|e| json!({"matchExpressions": e}))
        .collect();
    json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": terms}}})
}

pub fn affinity(archs: &[&str]) -> Value {
    required(vec![vec![arch_in(archs)]])
}

pub fn pref_term(arch: &str, weight: i32) -> Value {
    json!({"weight": weight, "preference": {"matchExpressions": [arch_in(&[arch])]}})
}

pub fn add(path: &str, value: Value) -> Value {
    json!({"op": "add", "path": path, "value": value})
}

pub fn replace(path: &str, value: Value) -> Value {
    json!({"op": "replace", "path": path, "value": value})
}

pub fn remove(path: &str) -> Value {
    json!({"op": "remove", "path": path})
}

pub fn annotations(common: &str) -> Value {
    add(
        "/metadata/annotations",
        json!({"arch.noe.adevinta.com/platforms": common}),
    )
}

pub fn weight(weight: i64) -> Weight {
    Weight::try_from(weight).unwrap()
}

pub fn no_pref() -> Policy {
    Policy {
        preferred_arch: None,
        ..Policy::default()
    }
}

pub fn toleration(arch: &str) -> Value {
    json!({"key": "arch", "value": arch, "effect": "NoSchedule"})
}

/// Per-arch settings: tolerations `arch=<arch>:NoSchedule`, and node labels where given.
pub fn architectures(entries: &[(&str, &[(&str, &str)])]) -> BTreeMap<String, ArchSettings> {
    entries
        .iter()
        .map(|(arch, labels)| {
            let settings = ArchSettings {
                tolerations: vec![toleration(arch)],
                node_labels: labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            };
            ((*arch).to_owned(), settings)
        })
        .collect()
}

pub fn tolerations_policy(preferred: Option<&str>) -> Policy {
    let mut architectures = architectures(&[("amd64", &[]), ("arm64", &[])]);
    if let Some(arm) = architectures.get_mut("arm64") {
        arm.tolerations = vec![
            json!({"key": "arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}),
        ];
    }
    Policy {
        preferred_arch: preferred.map(str::to_owned),
        architectures,
        ..Policy::default()
    }
}

pub fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

pub fn injected(selector: &'static str) -> Signal {
    Signal::ArchSelectorInjected { selector }
}

pub fn skipped(reason: SkipReason) -> Signal {
    Signal::Skipped { reason }
}

pub fn not_available(arch: &str) -> Signal {
    Signal::PreferredArchNotAvailable {
        arch: arch.to_owned(),
    }
}

pub fn failed(image: &str, error: &str) -> Signal {
    Signal::LookupFailed {
        image: image.to_owned(),
        error: error.to_owned(),
    }
}

pub fn node_match(label: &str) -> Signal {
    Signal::NodeMatchInjection {
        label: label.to_owned(),
    }
}

pub fn recomputed(previous: &[&str]) -> Signal {
    Signal::Recomputed {
        previous: previous.iter().map(|s| (*s).to_owned()).collect(),
    }
}

pub enum Expect {
    Unchanged(SkipReason),
    /// Common archs and the exact operations.
    Patch(&'static [&'static str], Vec<Value>),
    Deny(DenyReason, &'static str),
}

pub struct Case {
    pub name: &'static str,
    pub pod: Value,
    pub lookups: Lookups,
    pub facts: Facts,
    pub policy: Policy,
    pub expect: Expect,
    pub warnings: Vec<String>,
    pub signals: Vec<Signal>,
}

pub fn case(
    name: &'static str,
    pod: Value,
    lookups: Lookups,
    policy: Policy,
    expect: Expect,
) -> Case {
    Case {
        name,
        pod,
        lookups,
        facts: Facts::default(),
        policy,
        expect,
        warnings: Vec::new(),
        signals: Vec::new(),
    }
}

impl Case {
    pub fn warn(mut self, warnings: &[&str]) -> Self {
        self.warnings = warnings.iter().map(|w| (*w).to_owned()).collect();
        self
    }
    pub fn signals(mut self, signals: Vec<Signal>) -> Self {
        self.signals = signals;
        self
    }
    pub fn facts(mut self, facts: Facts) -> Self {
        self.facts = facts;
        self
    }
}

fn check(case: &Case) {
    let plan = plan(&case.pod, &case.policy);
    let images: BTreeSet<&str> = plan.images().collect();
    for image in case.lookups.keys() {
        assert!(
            images.contains(image.as_str()),
            "{image} is looked up but not in Plan::images {images:?}"
        );
    }
    let decision = super::helpers::decide_checked(&plan, &case.lookups, &case.facts, &case.policy);
    match (&case.expect, &decision.verdict) {
        (Expect::Unchanged(want), Verdict::Unchanged { reason }) => assert_eq!(reason, want),
        (
            Expect::Deny(want_reason, want),
            Verdict::Deny {
                code,
                reason,
                message,
            },
        ) => {
            assert_eq!(*code, 403);
            assert_eq!(reason, want_reason);
            assert_eq!(message, want);
        }
        (Expect::Patch(common_want, ops_want), Verdict::Patch { common, ops }) => {
            assert_eq!(common, common_want, "common");
            assert_eq!(
                &super::helpers::values(ops),
                ops_want,
                "ops:\n{}",
                serde_json::to_string_pretty(ops).unwrap()
            );
        }
        (_, got) => panic!("unexpected verdict {got:?}"),
    }
    assert_eq!(decision.warnings, case.warnings, "warnings");
    let mut want_signals = case.signals.clone();
    let mut got_signals = decision.signals.clone();
    want_signals.sort_by_key(|s| format!("{s:?}"));
    got_signals.sort_by_key(|s| format!("{s:?}"));
    assert_eq!(got_signals, want_signals, "signals");
    // The patch addresses the raw object, applies, and yields a valid Pod.
    let (raw, _typed) = patched_pod(&case.pod, &decision.verdict);
    assert_eq!(
        raw["spec"]["futureField"],
        json!({"kept": true}),
        "unknown field kept"
    );
    if let Verdict::Patch { common, .. } = &decision.verdict {
        if !common.is_empty() {
            assert_constrained(&case.pod, &raw, common);
        }
        // Admitted again as it now is (a reinvocation), the pod needs nothing more.
        let again = decide_pod(&raw, &case.lookups, &case.facts, &case.policy);
        assert!(
            matches!(again.verdict, Verdict::Unchanged { .. }),
            "second decision on the patched pod: {:?}",
            again.verdict
        );
        if case.policy.mode == Mode::Audit {
            assert_eq!(
                again.verdict,
                Verdict::Unchanged {
                    reason: SkipReason::AlreadyUpToDate
                }
            );
        }
    }
}

/// Runs every case, then reports all failures at once.
pub fn run(cases: Vec<Case>) {
    let mut failures = Vec::new();
    let count = cases.len();
    for case in cases {
        let name = case.name;
        if let Err(panic) = std::panic::catch_unwind(|| check(&case)) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            failures.push(format!("case {name:?}: {message}"));
        }
    }
    assert!(count > 0, "no case");
    assert!(
        failures.is_empty(),
        "{} of {count} cases fail:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
