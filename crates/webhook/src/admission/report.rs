//! What an admission tells the operator: the decision's signals and the lookups' failures as
//! metrics (bounded labels) and log lines (inside the admission's span), and the decision as the
//! answer to send.

use tracing::Level;

use super::review::Answer;
use crate::metrics::{outcome, Metrics};
use crate::resolve::Resolved;
use noe_core::decide::{Decision, Signal, Verdict};

/// The admission a log line belongs to. Its span (`uid`, `namespace`, `pod`) is built on first
/// use only: on the warm path nothing is logged at the default level, and building a span with
/// three formatted fields for every admission costs a measurable share of the throughput
/// (docs/benchmarks.md).
pub struct Scope<'a> {
    pub uid: &'a str,
    pub namespace: &'a str,
    pub pod: &'a str,
    span: std::sync::OnceLock<tracing::Span>,
    /// Outside a review (`noe explain`): the decision's summary is wanted.
    pub explains: bool,
}

impl<'a> Scope<'a> {
    pub fn new(uid: &'a str, namespace: &'a str, pod: &'a str) -> Self {
        Self {
            uid,
            namespace,
            pod,
            span: std::sync::OnceLock::new(),
            explains: false,
        }
    }

    /// Outside a review (`noe explain`): no span at all, and the decision explained.
    pub fn detached(namespace: &'a str) -> Self {
        Self {
            span: std::sync::OnceLock::from(tracing::Span::none()),
            explains: true,
            ..Self::new("", namespace, "")
        }
    }

    pub fn span(&self) -> &tracing::Span {
        self.span.get_or_init(|| {
            tracing::info_span!(
                "admission",
                uid = %self.uid,
                namespace = %self.namespace,
                pod = %self.pod,
            )
        })
    }

    /// Enters the span when events at `level` may be logged.
    fn enter(&self, level: Level) -> Option<tracing::span::Entered<'_>> {
        (level <= tracing::level_filters::LevelFilter::current()).then(|| self.span().enter())
    }
}

/// Counts what the lookups of one pod met: unusable pull secrets and failed lookups per registry.
pub fn resolved(metrics: &Metrics, scope: &Scope<'_>, resolved: &Resolved) {
    if resolved.failed_pull_secrets > 0 {
        metrics
            .image_pull_secret_failed
            .with_label_values(&[metrics.namespace_label(scope.namespace)])
            .inc_by(u64::try_from(resolved.failed_pull_secrets).unwrap_or(u64::MAX));
    }
    for registry in &resolved.failed_registries {
        metrics
            .registry_errors
            .with_label_values(&[registry.as_str()])
            .inc();
    }
}

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
