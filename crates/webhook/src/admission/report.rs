//! What an admission tells the operator: the decision's signals as metrics (bounded labels) and
//! log lines (inside the admission's span, [`Scope`]), and the decision as the answer to send.

use tracing::Level;

use super::response::Answer;
use crate::decider::Scope;
use crate::metrics::{outcome, Metrics};
use noe_core::decide::{Decision, Signal, Verdict};

/// Counts and logs the decision's signals and turns its verdict into the answer and the
/// `outcome` label of the request duration.
pub fn answer(metrics: &Metrics, scope: &Scope<'_>, decision: Decision) -> (Answer, &'static str) {
    signals(metrics, scope, &decision.signals);
    let Decision {
        verdict, warnings, ..
    } = decision;
    match verdict {
        Verdict::Unchanged { reason } => {
            let _span = scope.enter(Level::DEBUG);
            tracing::debug!(reason = reason.as_str(), "Allowed unchanged");
            let answer = Answer {
                warnings,
                ..Answer::allow()
            };
            (answer, outcome::ALLOWED)
        }
        Verdict::Patch { common, ops } => {
            let _span = scope.enter(Level::DEBUG);
            tracing::debug!(platforms = %common.join(","), operations = ops.len(), "Patched");
            let answer = Answer {
                patch: Some(ops),
                warnings,
                ..Answer::allow()
            };
            (answer, outcome::PATCHED)
        }
        Verdict::Deny {
            code,
            reason,
            message,
        } => {
            let _span = scope.enter(Level::INFO);
            tracing::info!(reason = reason.as_str(), %message, "Denied");
            let answer = Answer {
                allowed: false,
                patch: None,
                warnings,
                status: Some((code, message)),
            };
            (answer, outcome::DENIED)
        }
    }
}

/// Counts and logs the signals of a decision answered again from the memo, as [`answer`] did
/// when it was made.
pub fn remembered(metrics: &Metrics, scope: &Scope<'_>, remembered: &[Signal], outcome: &str) {
    signals(metrics, scope, remembered);
    let _span = scope.enter(Level::DEBUG);
    tracing::debug!(outcome, "Answered as the same pod before (decision memo)");
}

fn signals(metrics: &Metrics, scope: &Scope<'_>, signals: &[Signal]) {
    // Looked up only for the signals that carry it.
    let namespace = || metrics.namespace_label(scope.namespace);
    for signal in signals {
        match signal {
            Signal::Skipped { reason } => metrics
                .update_skip
                .with_label_values(&[reason.as_str()])
                .inc(),
            Signal::ArchSelectorInjected { selector } => metrics
                .arch_selector_injected
                .with_label_values(&[namespace(), selector])
                .inc(),
            Signal::PreferredArchNotAvailable { arch } => {
                let _span = scope.enter(Level::DEBUG);
                tracing::debug!(%arch, "Preferred architecture not available");
                metrics
                    .preferred_architecture_not_available
                    .with_label_values(&[namespace()])
                    .inc();
            }
            Signal::NodeMatchInjection { label } => metrics
                .node_match_injections
                .with_label_values(&[namespace(), label])
                .inc(),
            Signal::LookupFailed { image, error } => {
                // Counted per registry where the lookup failed (see `resolved`).
                let _span = scope.enter(Level::WARN);
                tracing::warn!(%image, %error, "Image lookup failed");
            }
            Signal::FailedOpen => {
                let _span = scope.enter(Level::WARN);
                tracing::warn!("Allowed unchanged: image lookups failed")
            }
            Signal::Contradiction => {
                let _span = scope.enter(Level::INFO);
                tracing::info!("The pod's images cannot run where it selects")
            }
            Signal::Recomputed { previous } => {
                let _span = scope.enter(Level::INFO);
                tracing::info!(previous = %previous.join(","), "Recomputed our earlier constraint")
            }
            Signal::NoNode { archs } => {
                let _span = scope.enter(Level::INFO);
                tracing::info!(archs = %archs.join(","), "No node has the pod's architectures")
            }
        }
    }
}
