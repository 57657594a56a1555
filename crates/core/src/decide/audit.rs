//! Audit mode (`--mode=audit`): the decision is made as usual, then reported instead of applied.
//!
//! The pod only gets the annotation `arch.noe.adevinta.com/audit`, whose value says what
//! enforcement would have done, short and machine-readable:
//! - `patch:<arch>,<arch>`: constrain the pod to these architectures (the common set);
//! - `patch`: patch the pod without an arch constraint (matchNodeLabels or tolerations only);
//! - `deny:<reason>`: deny it, `<reason>` one of [`DenyReason`](super::DenyReason)'s values.
//!
//! A pod enforcement would leave unchanged gets no annotation. Each audited pod also gets an
//! admission warning saying the same in words; nothing is ever denied.

use serde_json::{json, Value};

use super::keys::AUDIT_ANNOTATION;
use super::outcome::{Decision, Signal, SkipReason, Verdict};
use super::pod;
use super::text;
use crate::patch::PatchBuilder;

/// The audit annotation's value and the warning for an enforced verdict; `None` when
/// enforcement leaves the pod unchanged.
fn report(verdict: &Verdict) -> Option<(String, String)> {
    Some(match verdict {
        Verdict::Unchanged { .. } => return None,
        Verdict::Patch { common, .. } if common.is_empty() => (
            "patch".to_owned(),
            "audit: would patch the pod (no architecture constraint)".to_owned(),
        ),
        Verdict::Patch { common, .. } => {
            let archs = common.join(",");
            (
                format!("patch:{archs}"),
                format!("audit: would constrain to {archs}"),
            )
        }
        Verdict::Deny {
            reason, message, ..
        } => (
            format!("deny:{}", reason.as_str()),
            format!("audit: would deny: {}", text::truncate(message, 200)),
        ),
    })
}

/// Turns an enforced decision into its audit: the annotation instead of the patch, a warning,
/// no denial. Warnings and signals of the decision are kept.
pub(crate) fn audit(raw: &Value, mut decision: Decision) -> Decision {
    let Some((value, warning)) = report(&decision.verdict) else {
        return decision;
    };
    decision.warnings.push(warning);
    decision
        .summary
        .record(|summary| summary.audit = Some(value.clone()));
    let mut patch = PatchBuilder::new(raw);
    if pod::PodView::new(raw).annotation(AUDIT_ANNOTATION) != Some(value.as_str()) {
        patch.set(&["metadata", "annotations", AUDIT_ANNOTATION], json!(value));
    }
    decision.verdict = if patch.is_empty() {
        decision.signals.push(Signal::Skipped {
            reason: SkipReason::AlreadyUpToDate,
        });
        Verdict::Unchanged {
            reason: SkipReason::AlreadyUpToDate,
        }
    } else {
        Verdict::Patch {
            common: Vec::new(),
            ops: patch.finish(),
        }
    };
    decision
}
