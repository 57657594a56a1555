//! Controller metrics, registered on an explicit registry. Every label value comes from a
//! bounded set: `namespace` keeps at most `metrics_max_namespaces` distinct values, then
//! `_other`; the other labels are fixed words.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus::{
    Gauge, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts,
    Registry,
};

/// The label value past the namespace bound.
pub const OTHER_NAMESPACE: &str = "_other";

/// Controller metrics (docs/configuration.md lists them).
#[derive(Clone, derive_more::Debug)]
#[debug("Metrics {{ .. }}")]
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
    /// `noe_gated_pods`: pods carrying our gate, counted from the gate controller's watch.
    pub(crate) gated_pods: IntGauge,
    /// `noe_gate_oldest_seconds`: the age of the oldest gated pod.
    pub(crate) gate_oldest: Gauge,
    /// `noe_gate_duration_seconds`: pod creation to release.
    pub(crate) gate_duration: Histogram,
    /// `noe_gate_releases_total{outcome}`.
    pub(crate) gate_releases: IntCounterVec,
    /// `noe_gate_stage_seconds{stage}`: the parts of a release attempt ([`crate::gate::stage`]).
    pub(crate) gate_stages: HistogramVec,
    /// `noe_gate_queue_full_total`: gated pods the full work queue did not take (the resync
    /// queues them later).
    pub(crate) gate_queue_full: IntCounter,
    /// `noe_gate_queued`: gated pods the work queue holds (waiting, in flight or retried later).
    pub(crate) gate_queued: IntGauge,
    /// `noe_exec_format_errors_total{source}`: exec format errors acted on (an Event each),
    /// by where they were seen: `status`, `log`, `learned`.
    pub(crate) exec_format_errors: IntCounterVec,
    /// `noe_exec_format_log_reads_total{result}`: previous logs read: `matched`, `no_match`,
    /// `not_found`, `timeout`, `error`.
    pub(crate) log_reads: IntCounterVec,
    /// `noe_exec_format_queue_drops_total{queue}`: signals dropped by a full queue (`pods`,
    /// `reads`, `acts`); the next status update or restart brings them again.
    pub(crate) detect_drops: IntCounterVec,
    /// `noe_learned_corrections`: valid entries in the learned store, as this replica reads it.
    pub(crate) learned_entries: IntGauge,
    /// `noe_learned_invalid_entries`: entries of the learned store ignored (edited by hand).
    pub(crate) learned_invalid: IntGauge,
    /// `noe_learned_writes_total{result}`: applies of the learned store: `applied`,
    /// `conflict` (retried on the fresh object), `error`.
    pub(crate) learned_writes: IntCounterVec,
    namespaces: Arc<Mutex<HashSet<String>>>,
    max_namespaces: usize,
}

impl Metrics {
    /// Creates and registers the metrics; `max_namespaces` bounds the `namespace` label.
    pub fn new(registry: &Registry, max_namespaces: usize) -> prometheus::Result<Self> {
        let vec = |name: &str, help: &str, labels: &[&str]| -> prometheus::Result<IntCounterVec> {
            registered(registry, IntCounterVec::new(Opts::new(name, help), labels)?)
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
        let leader = registered(
            registry,
            IntGauge::new(
                "noe_controller_leader",
                "1 while this replica runs the writing controllers",
            )?,
        )?;
        let transitions = registered(
            registry,
            IntCounter::new(
                "noe_controller_leader_transitions_total",
                "Times this replica started leading",
            )?,
        )?;
        let nodes = registered(
            registry,
            IntGauge::new("noe_controller_nodes", "Nodes in the node reflector")?,
        )?;
        let gated_pods = registered(registry, IntGauge::new(
            "noe_gated_pods",
            "Pods carrying noe's scheduling gate, counted from the gate controller's watch (on the leader)",
        )?)?;
        let gate_oldest = registered(
            registry,
            Gauge::new(
                "noe_gate_oldest_seconds",
                "Age of the oldest pod carrying noe's scheduling gate (on the leader)",
            )?,
        )?;
        let gate_duration = registered(
            registry,
            Histogram::with_opts(
                HistogramOpts::new(
                    "noe_gate_duration_seconds",
                    "Time from a gated pod's creation to its release",
                )
                .buckets(vec![
                    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
                ]),
            )?,
        )?;
        let gate_releases = vec(
            "noe_gate_releases_total",
            "Gated pods released, by outcome",
            &["outcome"],
        )?;
        let gate_stages = registered(registry, HistogramVec::new(
            HistogramOpts::new(
                "noe_gate_stage_seconds",
                "The parts of a gated pod's release attempt: queue (the watch event's arrival to a worker), lookup (the images' platforms and the decision), write (the release's round trip)",
            )
            .buckets(vec![
                0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                10.0, 30.0,
            ]),
            &["stage"],
        )?)?;
        let gate_queue_full = registered(registry, IntCounter::new(
            "noe_gate_queue_full_total",
            "Gated pods the gate controller's full work queue did not take: each waits for the next resync (on the leader)",
        )?)?;
        let gate_queued = registered(registry, IntGauge::new(
            "noe_gate_queued",
            "Gated pods the gate controller's work queue holds: waiting, in flight or retried later (on the leader)",
        )?)?;
        let exec_format_errors = vec(
            "noe_exec_format_errors_total",
            "Exec format errors seen on nodes and acted on (an Event each), by where they were seen",
            &["source"],
        )?;
        let log_reads = vec(
            "noe_exec_format_log_reads_total",
            "Previous logs of crashed containers read for an exec format error, by result",
            &["result"],
        )?;
        let detect_drops = vec(
            "noe_exec_format_queue_drops_total",
            "Exec format error signals dropped by a full queue (brought again by the next update)",
            &["queue"],
        )?;
        let learned_entries = registered(
            registry,
            IntGauge::new(
                "noe_learned_corrections",
                "Valid entries of the learned store, as this replica reads it",
            )?,
        )?;
        let learned_invalid = registered(registry, IntGauge::new(
            "noe_learned_invalid_entries",
            "Entries of the learned store ignored because they cannot be read (edited by hand?)",
        )?)?;
        let learned_writes = vec(
            "noe_learned_writes_total",
            "Server-side applies of the learned store, by result",
            &["result"],
        )?;
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
            gated_pods,
            gate_oldest,
            gate_duration,
            gate_releases,
            gate_stages,
            gate_queue_full,
            gate_queued,
            exec_format_errors,
            log_reads,
            detect_drops,
            learned_entries,
            learned_invalid,
            learned_writes,
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

/// `metric`, registered on `registry`.
fn registered<M>(registry: &Registry, metric: M) -> prometheus::Result<M>
where
    M: prometheus::core::Collector + Clone + 'static,
{
    registry.register(Box::new(metric.clone()))?;
    Ok(metric)
}
