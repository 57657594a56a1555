//! What the cluster's nodes say ([`Facts::cluster_archs`], from `--watch-nodes`):
//! `--cluster-schedulable-archs=auto` takes the schedulable archs from them, and a pod that may
//! only run on archs no node has gets a warning (an autoscaler may still add such a node, so it
//! is never denied for it).

use std::borrow::Cow;
use std::collections::BTreeSet;

use super::facts::Facts;
use super::outcome::{Decision, Signal};
use super::policy::Policy;
use super::text;

/// `policy` with the nodes' archs added to its schedulable archs when they come from the nodes
/// and the nodes are known; unchanged otherwise (with `schedulable_from_nodes` and no known
/// node, every arch is schedulable).
pub(crate) fn effective<'a>(policy: &'a Policy, facts: &Facts) -> Cow<'a, Policy> {
    match &facts.cluster_archs {
        Some(nodes) if policy.schedulable_from_nodes && !nodes.is_empty() => {
            let mut resolved = policy.clone();
            resolved.schedulable_archs.extend(nodes.iter().cloned());
            resolved.schedulable_from_nodes = false;
            Cow::Owned(resolved)
        }
        _ => Cow::Borrowed(policy),
    }
}

/// Warns when no node of the cluster has any arch of `may_run_on` (the archs the pod may run on
/// once admitted): it stays pending until such a node joins.
pub(crate) fn warn_without_nodes(
    may_run_on: &BTreeSet<&str>,
    facts: &Facts,
    decision: &mut Decision,
) {
    let Some(nodes) = facts.cluster_archs.as_deref() else {
        return;
    };
    if nodes.is_empty()
        || may_run_on.is_empty()
        || may_run_on.iter().any(|arch| nodes.contains(*arch))
    {
        return;
    }
    let archs = text::list(may_run_on.iter().map(|arch| text::truncate(arch, 32)));
    decision.warnings.push(format!(
        "no node of the cluster has the architecture this pod may run on ({archs}): it stays pending until one joins"
    ));
    decision.signals.push(Signal::NoNode {
        archs: may_run_on.iter().map(|arch| (*arch).to_owned()).collect(),
    });
}
