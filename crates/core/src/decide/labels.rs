//! Step 8, the sixth step of the pass (matchNodeLabels): each configured key present in the pod
//! labels goes into `nodeSelector`, unless the pod already sets it or the arch constraint just
//! wrote it.

use std::collections::BTreeSet;

use serde_json::json;

use super::outcome::{Decision, Signal};
use super::pod::PodView;
use super::policy::Policy;
use crate::patch::PatchBuilder;

/// Copies the configured pod labels into `nodeSelector`; `written` are the keys the arch
/// constraint wrote.
pub(crate) fn copy(
    patch: &mut PatchBuilder<'_>,
    pod: PodView<'_>,
    policy: &Policy,
    written: &BTreeSet<&str>,
    decision: &mut Decision,
) {
    let mut done: BTreeSet<&str> = BTreeSet::new();
    for key in &policy.match_node_labels {
        let key = key.as_str();
        if key.is_empty() || written.contains(key) || !done.insert(key) {
            continue;
        }
        let Some(value) = pod.label(key) else {
            continue;
        };
        if pod.node_selector_has(key) {
            continue;
        }
        patch.set(&["spec", "nodeSelector", key], json!(value));
        decision.signals.push(Signal::NodeMatchInjection {
            label: key.to_owned(),
        });
        decision
            .summary
            .record(|summary| summary.node_labels.push(key.to_owned()));
    }
}
