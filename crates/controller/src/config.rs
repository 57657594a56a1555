//! Typed configuration of the controllers (the command line builds it; no clap here).

use std::collections::BTreeSet;
use std::time::Duration;

use crate::detect::DetectConfig;
use crate::learned::LearnedConfig;
use crate::Error;

/// What pod remediation does with a pod bound to a node its images cannot run on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Remediate {
    /// Pods are not looked at (no pod reflector).
    #[default]
    Off,
    /// An Event on the pod and a metric.
    Report,
    /// Report, then evict through the Eviction API (PodDisruptionBudgets respected) when the pod
    /// has a controller owner, at most `remediate_rate_per_minute` per minute.
    Evict,
}

/// Leader election on a `coordination.k8s.io/v1` Lease (client-go's timing model).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseConfig {
    /// Lease name.
    pub name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This replica's identity (its pod name; unique among replicas).
    pub identity: String,
    /// How long others wait after the last observed renewal before taking the lease.
    pub lease_duration: Duration,
    /// The leader stops writing when it could not renew for this long (< `lease_duration`).
    pub renew_deadline: Duration,
    /// Time between attempts to acquire or renew (< `renew_deadline`).
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry period.
    pub fn new(name: &str, namespace: &str, identity: &str) -> Self {
        Self {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            identity: identity.to_owned(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// When the controllers try again. The defaults suit clusters; tests shorten them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timings {
    /// Re-check a pod whose node is not in the reflector yet.
    pub node_wait: Duration,
    /// Re-check a pod whose image lookups failed.
    pub lookup_retry: Duration,
    /// Retry an eviction a PodDisruptionBudget refused (429).
    pub blocked_retry: Duration,
    /// Retry after an API error (remediation and taints).
    pub error_retry: Duration,
    /// Look at every node's taints at least this often, even without changes.
    pub taint_resync: Duration,
    /// Judge a pod again after this even if it did not change (a tag may have moved).
    pub recheck: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Self {
            node_wait: Duration::from_secs(30),
            lookup_retry: Duration::from_secs(300),
            blocked_retry: Duration::from_secs(30),
            error_retry: Duration::from_secs(30),
            taint_resync: Duration::from_secs(300),
            recheck: Duration::from_secs(3600),
        }
    }
}

/// The gate controller (`--lookup-mode=gate|hybrid`): releases the pods the admission gated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GateConfig {
    /// Lookups tried before `--on-lookup-error` decides the release.
    pub max_attempts: u32,
    /// The first retry delay (doubled each attempt, with jitter).
    pub backoff_min: Duration,
    /// The longest retry delay.
    pub backoff_max: Duration,
    /// Gated pods the work queue holds at most; a pod that finds it full is counted
    /// (`noe_gate_queue_full_total`) and queued by the next resync.
    pub queue_capacity: usize,
    /// How often gated pods the queue does not hold are queued again.
    pub resync: Duration,
}

impl Default for GateConfig {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            backoff_min: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
            queue_capacity: 100_000,
            resync: Duration::from_secs(60),
        }
    }
}

/// Which controllers run and how. Every part is off by default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Keep a Node reflector for the admission side ([`crate::NodeView`]). Remediation and
    /// taints turn it on too.
    pub watch_nodes: bool,
    /// Pod remediation.
    pub remediate: Remediate,
    /// Evictions per minute at most (a token bucket with this burst).
    pub remediate_rate_per_minute: u32,
    /// Namespaces whose pods are reported but never evicted (default `kube-system`; the
    /// command line adds noe's own namespace).
    pub evict_exempt_namespaces: BTreeSet<String>,
    /// Arches whose nodes carry `arch.noe.adevinta.com/arch=<arch>:NoSchedule`.
    pub taint_arches: BTreeSet<String>,
    /// `None`: this replica always writes (one replica). `Some`: only the Lease holder writes.
    pub leader_election: Option<LeaseConfig>,
    /// The `reportingController` of our Events and the field manager of our writes.
    pub controller_name: String,
    /// The `reportingInstance` of our Events (the pod name; defaults to the host name).
    pub instance: Option<String>,
    /// At most this many distinct `namespace` label values, then `_other`.
    pub metrics_max_namespaces: usize,
    /// Retry intervals.
    pub timings: Timings,
    /// The gate controller; `None`: off.
    pub gate: Option<GateConfig>,
    /// Exec-format-error detection on the pod watch (`--detect-exec-format-errors`); `None`:
    /// off. Needs `learned`.
    pub detect: Option<DetectConfig>,
    /// The learned store, read by every replica, written by the leader; `None`: not used.
    pub learned: Option<LearnedConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            watch_nodes: false,
            remediate: Remediate::Off,
            remediate_rate_per_minute: 10,
            evict_exempt_namespaces: [KUBE_SYSTEM.to_owned()].into(),
            taint_arches: BTreeSet::new(),
            leader_election: None,
            controller_name: "noe".to_owned(),
            instance: None,
            metrics_max_namespaces: 1000,
            timings: Timings::default(),
            gate: None,
            detect: None,
            learned: None,
        }
    }
}

/// The namespace of the cluster's own components, exempt from evictions by default.
pub const KUBE_SYSTEM: &str = "kube-system";

/// Lease timings below this are refused (the API stores whole seconds).
const MIN_LEASE: Duration = Duration::from_secs(1);
/// The longest retry interval accepted.
const MAX_TIMING: Duration = Duration::from_secs(24 * 3600);
/// The most previous logs read per second.
const MAX_LOG_READS: u32 = 100;
/// The longest deadline of one log read.
const MAX_LOG_DEADLINE: Duration = Duration::from_secs(60);
/// Arch names are label values: at most 63 characters.
const MAX_ARCH_LEN: usize = 63;

impl Config {
    /// Whether the Node reflector runs.
    pub fn needs_nodes(&self) -> bool {
        self.watch_nodes
            || self.remediate != Remediate::Off
            || !self.taint_arches.is_empty()
            || self.detect.is_some()
    }

    /// Whether the pod watch runs (remediation or detection).
    pub fn watches_pods(&self) -> bool {
        self.remediate != Remediate::Off || self.detect.is_some()
    }

    /// Whether anything runs at all.
    pub fn is_enabled(&self) -> bool {
        self.needs_nodes() || self.gate.is_some() || self.learned.is_some()
    }

    /// Refuses configurations that cannot work, naming the setting.
    pub fn validate(&self) -> Result<(), Error> {
        if self.remediate == Remediate::Evict && self.remediate_rate_per_minute == 0 {
            return Err(Error::Config(
                "remediate=evict needs a rate of at least 1 eviction per minute".into(),
            ));
        }
        for arch in &self.taint_arches {
            let valid = !arch.is_empty()
                && arch.len() <= MAX_ARCH_LEN
                && arch
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
            if !valid {
                return Err(Error::Config(format!(
                    "taint arch {arch:?} is not a valid label value"
                )));
            }
        }
        let Timings {
            node_wait,
            lookup_retry,
            blocked_retry,
            error_retry,
            taint_resync,
            recheck,
        } = self.timings;
        for timing in [
            node_wait,
            lookup_retry,
            blocked_retry,
            error_retry,
            taint_resync,
            recheck,
        ] {
            if timing.is_zero() || timing > MAX_TIMING {
                return Err(Error::Config(format!(
                    "retry intervals must be between 0 and 24 h (got {timing:?})"
                )));
            }
        }
        if let Some(gate) = &self.gate {
            if gate.max_attempts == 0
                || gate.backoff_min.is_zero()
                || gate.backoff_min > gate.backoff_max
                || gate.backoff_max > MAX_TIMING
            {
                return Err(Error::Config(format!(
                    "the gate controller needs at least 1 attempt and 0 < backoff min <= max <= 24 h (got {gate:?})"
                )));
            }
        }
        if let Some(detect) = &self.detect {
            if self.learned.is_none() {
                return Err(Error::Config(
                    "exec-format-error detection needs the learned store".into(),
                ));
            }
            if !(1..=MAX_LOG_READS).contains(&detect.log_reads_per_second)
                || detect.log_deadline.is_zero()
                || detect.log_deadline > MAX_LOG_DEADLINE
            {
                return Err(Error::Config(format!(
                    "exec-format-error detection needs 1 to {MAX_LOG_READS} log reads per second and a read deadline of at most 60 s (got {detect:?})"
                )));
            }
        }
        if let Some(learned) = &self.learned {
            let name_ok = |name: &str, max: usize| {
                !name.is_empty()
                    && name.len() <= max
                    && name.bytes().all(|b| {
                        b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'
                    })
            };
            if !name_ok(&learned.name, 253) || !name_ok(&learned.namespace, 63) {
                return Err(Error::Config(format!(
                    "the learned store needs a ConfigMap name and a namespace (got {:?} in {:?})",
                    learned.name, learned.namespace
                )));
            }
            if !(1..=crate::learned::MAX_ENTRIES).contains(&learned.max_entries) {
                return Err(Error::Config(format!(
                    "the learned store holds 1 to {} entries (got {})",
                    crate::learned::MAX_ENTRIES,
                    learned.max_entries
                )));
            }
        }
        if let Some(lease) = &self.leader_election {
            if lease.name.is_empty() || lease.namespace.is_empty() || lease.identity.is_empty() {
                return Err(Error::Config(
                    "leader election needs a lease name, a namespace and an identity".into(),
                ));
            }
            if lease.retry_period.is_zero()
                || lease.renew_deadline <= lease.retry_period
                || lease.lease_duration <= lease.renew_deadline
                || lease.lease_duration < MIN_LEASE
            {
                return Err(Error::Config(format!(
                    "leader election needs lease duration > renew deadline > retry period > 0 and a lease of at least 1 s (got {:?} > {:?} > {:?})",
                    lease.lease_duration, lease.renew_deadline, lease.retry_period
                )));
            }
        }
        Ok(())
    }
}
