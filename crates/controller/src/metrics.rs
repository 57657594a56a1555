//! Controller metrics, registered on an explicit registry. Every label value comes from a
//! bounded set: `namespace` keeps at most `metrics_max_namespaces` distinct values, then
//! `_other`; the other labels are fixed words.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};

/// The label value past the namespace bound.
pub const OTHER_NAMESPACE: &str = "_other";

/// Controller metrics (docs/configuration.md lists them).
#[derive(Clone)]
pub struct Metrics {
    /// `noe_pods_deletion_total{namespace,status}`: evictions (noe's name; noe deleted),
    /// status `success`, `blocked` (a PodDisruptionBudget said 429) or `failed` (noe's values).
    pub(crate) deletions: IntCounterVec,
    /// `noe_controller_pods_checked_total{result}`: remediation verdicts.
    pub(crate) checked: IntCounterVec,
    /// `noe_controller_pods_misplaced_total{namespace}`: pods found on a node their images
    /// cannot run on (once per pod).
    pub(crate) misplaced: IntCounterVec,
    /// `noe_controller_events_total{result}`: Events written (`ok`, `error`).
    pub(crate) events: IntCounterVec,
    /// `noe_controller_node_taint_writes_total{result}`: `applied`, `conflict`, `error`.
    pub(crate) taint_writes: IntCounterVec,
    /// `noe_controller_leader`: 1 while this replica leads (always 1 without election).
    pub(crate) leader: IntGauge,
    /// `noe_controller_leader_transitions_total`: times this replica started leading.
    pub(crate) transitions: IntCounter,
    /// `noe_controller_watch_errors_total{resource}`: list/watch failures (retried with backoff).
    pub(crate) watch_errors: IntCounterVec,
    /// `noe_controller_nodes`: nodes in the reflector.
    pub(crate) nodes: IntGauge,
    namespaces: Arc<Mutex<HashSet<String>>>,
    max_namespaces: usize,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Creates and registers the metrics; `max_namespaces` bounds the `namespace` label.
    pub fn new(registry: &Registry, max_namespaces: usize) -> prometheus::Result<Self> {
        let vec = |name: &str, help: &str, labels: &[&str]| -> prometheus::Result<IntCounterVec> {
            let counter = IntCounterVec::new(Opts::new(name, help), labels)?;
            registry.register(Box::new(counter.clone()))?;
            Ok(counter)
        };
        let deletions = vec(
            "noe_pods_deletion_total",
            "Evictions of pods whose images cannot run on their node, by outcome",
            &["namespace", "status"],
        )?;
        let checked = vec(
            "noe_controller_pods_checked_total",
            "Pods checked by the remediation controller, by verdict",
            &["result"],
        )?;
        let misplaced = vec(
            "noe_controller_pods_misplaced_total",
            "Pods found on a node their images cannot run on",
            &["namespace"],
        )?;
        let events = vec(
            "noe_controller_events_total",
            "Kubernetes Events written by the controllers",
            &["result"],
        )?;
        let taint_writes = vec(
            "noe_controller_node_taint_writes_total",
            "Writes of the arch taint to nodes, by outcome",
            &["result"],
        )?;
        let watch_errors = vec(
            "noe_controller_watch_errors_total",
            "List or watch failures of the controllers' reflectors (retried with backoff)",
            &["resource"],
        )?;
        let leader = IntGauge::new(
            "noe_controller_leader",
            "1 while this replica runs the writing controllers",
        )?;
        registry.register(Box::new(leader.clone()))?;
        let transitions = IntCounter::new(
            "noe_controller_leader_transitions_total",
            "Times this replica started leading",
        )?;
        registry.register(Box::new(transitions.clone()))?;
        let nodes = IntGauge::new("noe_controller_nodes", "Nodes in the node reflector")?;
        registry.register(Box::new(nodes.clone()))?;
        Ok(Self {
            deletions,
            checked,
            misplaced,
            events,
            taint_writes,
            leader,
            transitions,
            watch_errors,
            nodes,
            namespaces: Arc::default(),
            max_namespaces,
        })
    }

    /// `namespace` if it is one of the first `max_namespaces` seen, else `_other`.
    pub(crate) fn namespace<'a>(&self, namespace: &'a str) -> &'a str {
        let mut seen = self
            .namespaces
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if seen.contains(namespace) {
            return namespace;
        }
        if seen.len() < self.max_namespaces {
            seen.insert(namespace.to_owned());
            return namespace;
        }
        OTHER_NAMESPACE
    }
}
