//! The admission's Prometheus metrics (noe's names, bounded labels), registered on an explicit
//! registry.

use std::collections::HashSet;
use std::sync::{Arc, OnceLock, RwLock};

use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

/// Outcome label values of `noe_webhook_request_duration_seconds`.
pub mod outcome {
    /// Allowed without a patch.
    pub const ALLOWED: &str = "allowed";
    /// Allowed with a patch.
    pub const PATCHED: &str = "patched";
    /// Denied by the decision.
    pub const DENIED: &str = "denied";
    /// The request could not be read as an AdmissionReview.
    pub const INVALID: &str = "invalid";
}

/// `fact` label values of `noe_hook_fact_errors_total`.
pub mod fact {
    /// A namespace's preferred architecture (`--namespace-preference`).
    pub const NAMESPACE: &str = "namespace";
    /// A node's platform (`--check-ephemeral-containers`).
    pub const NODE: &str = "node";
}

/// The `namespace` label value of namespaces beyond [`Metrics::with_namespace_limit`].
pub const OTHER_NAMESPACES: &str = "_other";

/// The default of `--metrics-max-namespaces`.
pub const DEFAULT_MAX_NAMESPACES: usize = 1000;

/// The namespaces that may be a `namespace` label value: the first ones seen, up to a limit.
/// Anyone who can reach the webhook port can send reviews with invented namespaces; without a
/// bound each would add series to every namespaced metric.
#[derive(Debug)]
struct Namespaces {
    seen: RwLock<HashSet<Box<str>>>,
    max: usize,
}

impl Namespaces {
    fn label<'a>(&self, namespace: &'a str) -> &'a str {
        // One read lock and one probe for a namespace seen before (every admission but the
        // first of each namespace).
        match self.seen.read() {
            Ok(seen) if seen.contains(namespace) => return namespace,
            Ok(seen) if seen.len() >= self.max => return OTHER_NAMESPACES,
            Ok(_) => {}
            Err(_) => return OTHER_NAMESPACES,
        }
        match self.seen.write() {
            Ok(seen) if seen.contains(namespace) => namespace,
            Ok(mut seen) if seen.len() < self.max => {
                seen.insert(namespace.into());
                namespace
            }
            _ => OTHER_NAMESPACES,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Metrics {
    pub image_pull_secret_failed: IntCounterVec,
    pub registry_errors: IntCounterVec,
    pub update_skip: IntCounterVec,
    pub arch_selector_injected: IntCounterVec,
    pub preferred_architecture_not_available: IntCounterVec,
    pub node_match_injections: IntCounterVec,
    /// Kubernetes API reads of a fact (a namespace's preferred arch, a node's platform) that
    /// failed; the fact is then unknown. Labels `fact` ([`fact`]) and `reason`
    /// ([`crate::facts::Failure::kind`]).
    pub fact_errors: IntCounterVec,
    /// Image selections by compatibility artifact that did something: labels `mode`
    /// (`explicit`, `discovered`) and `outcome` (`patched`, `warned`, `denied`).
    pub image_selection: IntCounterVec,
    /// Pod creations and the decision memo, by `result`: `hit` (answered from it), `changed`
    /// (remembered, decided again as a lookup or a fact changed), `miss`.
    pub decision_memo: IntCounterVec,
    pub request_duration: HistogramVec,
    /// `request_duration` children of the four outcomes, resolved on first use (no label lookup
    /// per admission; an outcome never seen stays absent from `/metrics`, as before).
    durations: Arc<[OnceLock<Histogram>; 4]>,
    namespaces: Arc<Namespaces>,
}

impl Metrics {
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let counter =
            |name: &str, help: &str, labels: &[&str]| -> Result<IntCounterVec, prometheus::Error> {
                let counter = IntCounterVec::new(Opts::new(name, help), labels)?;
                registry.register(Box::new(counter.clone()))?;
                Ok(counter)
            };
        let request_duration = HistogramVec::new(
            HistogramOpts::new(
                "noe_webhook_request_duration_seconds",
                "Time to answer one admission request, by outcome",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                10.0,
            ]),
            &["outcome"],
        )?;
        registry.register(Box::new(request_duration.clone()))?;
        Ok(Self {
            image_pull_secret_failed: counter(
                "noe_hook_image_pull_secret_failed_total",
                "Image pull secrets of a pod that could not be read",
                &["namespace"],
            )?,
            registry_errors: counter(
                "noe_hook_registry_errors_total",
                "Image lookups that failed, by registry",
                &["registry"],
            )?,
            update_skip: counter(
                "noe_hook_update_skip_total",
                "Pods whose architecture constraint was not added, by reason",
                &["reason"],
            )?,
            arch_selector_injected: counter(
                "noe_hook_arch_selector_injected_total",
                "Architecture constraints written into pods",
                &["namespace", "selector"],
            )?,
            preferred_architecture_not_available: counter(
                "noe_hook_preferred_architecture_not_available_total",
                "Pods whose preferred architecture is not supported by every image",
                &["namespace"],
            )?,
            node_match_injections: counter(
                "noe_hook_node_match_injections_total",
                "Pod labels copied into the nodeSelector (--match-node-labels)",
                &["namespace", "label"],
            )?,
            fact_errors: counter(
                "noe_hook_fact_errors_total",
                "Kubernetes API reads of a namespace or node that failed (the fact is then unknown), by fact and reason",
                &["fact", "reason"],
            )?,
            image_selection: counter(
                "noe_image_selection_total",
                "Image selections by compatibility artifact that patched, warned or denied, by mode and outcome",
                &["mode", "outcome"],
            )?,
            decision_memo: counter(
                "noe_admission_decision_memo_total",
                "Pod creations answered from the decision memo (hit), decided again as a lookup or a fact changed (changed), or decided (miss)",
                &["result"],
            )?,
            request_duration,
            durations: Arc::default(),
            namespaces: Arc::new(Namespaces {
                seen: RwLock::default(),
                max: DEFAULT_MAX_NAMESPACES,
            }),
        })
    }

    /// At most `max` distinct `namespace` label values (the first seen); the others are counted
    /// as [`OTHER_NAMESPACES`].
    pub fn with_namespace_limit(mut self, max: usize) -> Self {
        self.namespaces = Arc::new(Namespaces {
            seen: RwLock::default(),
            max,
        });
        self
    }

    /// The `namespace` label value for `namespace`: itself, or [`OTHER_NAMESPACES`] once the
    /// limit of distinct namespaces is reached.
    pub fn namespace_label<'a>(&self, namespace: &'a str) -> &'a str {
        self.namespaces.label(namespace)
    }

    /// Records the time to answer one admission with `outcome` (one of [`outcome`]'s values).
    pub fn observe_duration(&self, outcome: &str, seconds: f64) {
        match OUTCOMES.iter().position(|known| *known == outcome) {
            Some(index) => self.durations[index]
                .get_or_init(|| self.request_duration.with_label_values(&[outcome]))
                .observe(seconds),
            None => self
                .request_duration
                .with_label_values(&[outcome])
                .observe(seconds),
        }
    }
}

const OUTCOMES: [&str; 4] = [
    outcome::ALLOWED,
    outcome::PATCHED,
    outcome::DENIED,
    outcome::INVALID,
];

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_bounded() {
        let metrics = Metrics::register(&Registry::new())
            .unwrap()
            .with_namespace_limit(2);
        assert_eq!(metrics.namespace_label("a"), "a");
        assert_eq!(metrics.namespace_label("b"), "b");
        assert_eq!(metrics.namespace_label("c"), OTHER_NAMESPACES);
        assert_eq!(metrics.namespace_label("a"), "a", "the first ones stay");
        for n in 0..10_000 {
            assert_eq!(
                metrics.namespace_label(&format!("invented-{n}")),
                OTHER_NAMESPACES
            );
        }
    }
}
