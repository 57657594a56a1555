//! Step 10, the last step of the pass: the common set recorded in the
//! `arch.noe.adevinta.com/platforms` annotation of a pod whose arch constraint is ours, and the
//! patch closed into the verdict (unchanged when it holds no operation).

use serde_json::json;

use super::correct::{self, Applied};
use super::intersect::Placement;
use super::keys::{CORRECTIONS_ANNOTATION, PLATFORMS_ANNOTATION};
use super::outcome::{Decision, Signal, SkipReason, Verdict};
use super::read::Plan;
use crate::patch::PatchBuilder;

/// Annotates the pod and turns the patch into the verdict.
pub(crate) fn finish(
    mut patch: PatchBuilder<'_>,
    plan: &Plan<'_>,
    placement: &Placement<'_, '_>,
    applied: &Applied<'_>,
    decision: &mut Decision,
) -> Verdict {
    if !applied.is_empty() {
        let value = correct::annotation(applied);
        if plan.view.annotation(CORRECTIONS_ANNOTATION) != Some(value.as_str()) {
            patch.set(
                &["metadata", "annotations", CORRECTIONS_ANNOTATION],
                json!(value),
            );
        }
    }
    let common = match placement {
        Placement::Untouched { reason, .. } if patch.is_empty() => {
            return Verdict::Unchanged { reason: *reason }
        }
        Placement::Untouched { .. } => {
            return Verdict::Patch {
                common: Vec::new(),
                ops: patch.finish(),
            }
        }
        Placement::Ours { common, .. } => common,
    };
    let mut value = String::new();
    for (index, arch) in common.iter().enumerate() {
        if index > 0 {
            value.push(',');
        }
        value.push_str(arch);
    }
    if plan.view.annotation(PLATFORMS_ANNOTATION) != Some(value.as_str()) {
        patch.set(
            &["metadata", "annotations", PLATFORMS_ANNOTATION],
            json!(value),
        );
    }
    if patch.is_empty() {
        decision.signals.push(Signal::Skipped {
            reason: SkipReason::AlreadyUpToDate,
        });
        return Verdict::Unchanged {
            reason: SkipReason::AlreadyUpToDate,
        };
    }
    Verdict::Patch {
        common: common.iter().map(|a| (*a).to_owned()).collect(),
        ops: patch.finish(),
    }
}
