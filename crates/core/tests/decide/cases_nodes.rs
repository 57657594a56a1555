//! The decision table of node awareness (`--watch-nodes`, docs/architecture.md "The decision"):
//! the cluster's node archs as a fact, `--cluster-schedulable-archs=auto`, and the warning for a
//! pod that may only run on archs no node has (never a denial: an autoscaler may add the node).

use std::collections::BTreeSet;
use std::sync::Arc;

use noe_core::decide::{selector, DenyReason, Facts, Mode, Policy, Signal, SkipReason};
use serde_json::json;

use super::helpers::lookups;
use super::runner::*;

fn nodes(archs: &[&str]) -> Facts {
    Facts {
        cluster_archs: Some(Arc::new(
            archs
                .iter()
                .map(|a| (*a).to_owned())
                .collect::<BTreeSet<_>>(),
        )),
        ..Facts::default()
    }
}

/// `--cluster-schedulable-archs=auto[,extra...]`.
fn auto(extra: &[&str], policy: Policy) -> Policy {
    Policy {
        schedulable_from_nodes: true,
        schedulable_archs: set(extra),
        ..policy
    }
}

fn no_node(archs: &[&str]) -> Signal {
    Signal::NoNode {
        archs: archs.iter().map(|a| (*a).to_owned()).collect(),
    }
}

fn no_node_warning(archs: &str) -> String {
    format!("no node of the cluster has the architecture this pod may run on ({archs}): it stays pending until one joins")
}

pub fn cases() -> Vec<Case> {
    let arm_warning = no_node_warning("arm64");
    let amd_warning = no_node_warning("amd64");
    vec![
        // ---- The warning (`--watch-nodes`) ----
        case("images run only where no node is: constrained as usual, with a warning",
            pod(json!({})), lookups(&[("app:1", Ok(ARM))]), Policy::default(),
            Expect::Patch(&["arm64"], vec![
                add("/spec/affinity", affinity(&["arm64"])),
                annotations("arm64"),
            ])).facts(nodes(&["amd64"])).warn(&[&arm_warning])
            .signals(vec![not_available("amd64"), injected(selector::AFFINITY), no_node(&["arm64"])]),
        case("a node of one of the common archs exists: no warning",
            pod(json!({})), lookups(&[("app:1", Ok(MULTI))]), no_pref(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/affinity", affinity(&["amd64", "arm64"])),
                annotations("amd64,arm64"),
            ])).facts(nodes(&["arm64", "s390x"]))
            .signals(vec![injected(selector::AFFINITY)]),
        case("the preferred arch is pinned but has no node: the warning names it",
            pod(json!({})), lookups(&[("app:1", Ok(MULTI))]), Policy::default(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/nodeSelector", json!({"kubernetes.io/arch": "amd64"})),
                annotations("amd64,arm64"),
            ])).facts(nodes(&["arm64"])).warn(&[&amd_warning])
            .signals(vec![injected(selector::PREFERRED), no_node(&["amd64"])]),
        case("nodes not known yet: no warning",
            pod(json!({})), lookups(&[("app:1", Ok(ARM))]), no_pref(),
            Expect::Patch(&["arm64"], vec![
                add("/spec/affinity", affinity(&["arm64"])),
                annotations("arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),
        case("a cluster without nodes: no warning (nothing is known)",
            pod(json!({})), lookups(&[("app:1", Ok(ARM))]), no_pref(),
            Expect::Patch(&["arm64"], vec![
                add("/spec/affinity", affinity(&["arm64"])),
                annotations("arm64"),
            ])).facts(nodes(&[])).signals(vec![injected(selector::AFFINITY)]),
        case("a pod pinned to an arch no node has: unchanged, warned",
            pod(json!({"spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"}}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy::default(),
            Expect::Unchanged(SkipReason::NodeSelector))
            .facts(nodes(&["amd64"])).warn(&[&arm_warning])
            .signals(vec![skipped(SkipReason::NodeSelector), no_node(&["arm64"])]),
        case("a pinned pod whose lookups failed: nothing known to warn about",
            pod(json!({"spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"}}})),
            lookups(&[("app:1", Err("unauthorized"))]), Policy::default(),
            Expect::Unchanged(SkipReason::NodeSelector))
            .facts(nodes(&["amd64"]))
            .signals(vec![skipped(SkipReason::NodeSelector), failed("app:1", "unauthorized")]),
        case("audit mode keeps the warning",
            pod(json!({})), lookups(&[("app:1", Ok(ARM))]),
            Policy { mode: Mode::Audit, ..no_pref() },
            Expect::Patch(&[], vec![add("/metadata/annotations",
                json!({"arch.noe.adevinta.com/audit": "patch:arm64"}))]))
            .facts(nodes(&["amd64"]))
            .warn(&[&arm_warning, "audit: would constrain to arm64"])
            .signals(vec![injected(selector::AFFINITY), no_node(&["arm64"])]),

        // ---- `--cluster-schedulable-archs=auto` ----
        case("auto: only the archs of the nodes are schedulable",
            pod(json!({})), lookups(&[("app:1", Ok(MULTI))]), auto(&[], no_pref()),
            Expect::Patch(&["amd64"], vec![
                add("/spec/affinity", affinity(&["amd64"])),
                annotations("amd64"),
            ])).facts(nodes(&["amd64"])).signals(vec![injected(selector::AFFINITY)]),
        case("auto: the preferred arch without a node is not available",
            pod(json!({})), lookups(&[("app:1", Ok(MULTI))]), auto(&[], Policy::default()),
            Expect::Patch(&["arm64"], vec![
                add("/spec/affinity", affinity(&["arm64"])),
                annotations("arm64"),
            ])).facts(nodes(&["arm64"]))
            .signals(vec![not_available("amd64"), injected(selector::AFFINITY)]),
        case("auto plus a pool at zero: its arch is schedulable, and warned about",
            pod(json!({})), lookups(&[("app:1", Ok(ARM))]), auto(&["arm64"], no_pref()),
            Expect::Patch(&["arm64"], vec![
                add("/spec/affinity", affinity(&["arm64"])),
                annotations("arm64"),
            ])).facts(nodes(&["amd64"])).warn(&[&arm_warning])
            .signals(vec![injected(selector::AFFINITY), no_node(&["arm64"])]),
        case("auto: images of no schedulable arch are denied, naming the schedulable ones",
            pod(json!({})), lookups(&[("app:1", Ok(ARM))]), auto(&["s390x"], no_pref()),
            Expect::Deny(DenyReason::NoCommonArch,
                "no architecture is supported by every container: app:1 [linux/arm64] (schedulable: amd64, s390x)"))
            .facts(nodes(&["amd64"])),
        case("auto before the nodes are known: every arch is schedulable (not only the extra ones)",
            pod(json!({})), lookups(&[("app:1", Ok(MULTI))]), auto(&["s390x"], no_pref()),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/affinity", affinity(&["amd64", "arm64"])),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),
        case("auto before the nodes are known: a denial names no schedulable list",
            pod(json!({"spec": {"containers": [
                {"name": "app", "image": "app:1"}, {"name": "s", "image": "sidecar:2"}]}})),
            lookups(&[("app:1", Ok(AMD)), ("sidecar:2", Ok(ARM))]),
            auto(&["s390x"], no_pref()),
            Expect::Deny(DenyReason::NoCommonArch,
                "no architecture is supported by every container: app:1 [linux/amd64], sidecar:2 [linux/arm64]")),
        case("auto: the tolerations of a node arch only",
            pod(json!({})), lookups(&[("app:1", Ok(MULTI))]),
            auto(&[], tolerations_policy(None)),
            Expect::Patch(&["amd64"], vec![
                add("/spec/affinity", affinity(&["amd64"])),
                add("/spec/tolerations", json!([toleration("amd64")])),
                annotations("amd64"),
            ])).facts(nodes(&["amd64"])).signals(vec![injected(selector::AFFINITY)]),
    ]
}
