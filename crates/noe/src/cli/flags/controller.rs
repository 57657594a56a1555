//! Flags of the controllers (docs/configuration.md, "Controllers"): node awareness, pod
//! remediation, leader election (`ControllerArgs`, the server only), and the node taints by arch
//! (`TaintArgs`, also read by `noe explain`: the taints' tolerations are part of the decision).

use std::collections::BTreeSet;
use std::time::Duration;

use clap::{Args, ValueEnum};
use noe_controller::taints::{TAINT_EFFECT, TAINT_KEY};
use noe_controller::{
    Config, DetectConfig, GateConfig, LearnedConfig, LeaseConfig, Remediate, KUBE_SYSTEM,
};
use noe_core::decide::Policy;
use noe_core::names::is_object_name;
use noe_webhook::admission::gate::selector::Selector;
use noe_webhook::admission::gate::LookupMode;

use super::parse::{non_empty, ConfigError};
use crate::config::ControllerSettings;

/// `--remediate`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum RemediateMode {
    /// Pods are not looked at.
    #[default]
    Off,
    /// An Event on each pod whose images cannot run on its node, and a metric.
    Report,
    /// Report, then evict such pods that have a controller owner, through the Eviction API
    /// (PodDisruptionBudgets respected), at most `--remediate-rate` per minute.
    Evict,
}

impl From<RemediateMode> for Remediate {
    fn from(mode: RemediateMode) -> Self {
        match mode {
            RemediateMode::Off => Self::Off,
            RemediateMode::Report => Self::Report,
            RemediateMode::Evict => Self::Evict,
        }
    }
}

/// `--lookup-mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LookupModeArg {
    /// Every pod waits for its image lookups inside admission.
    #[default]
    Inline,
    /// Pods are gated at creation (scheduling gate `arch.noe.adevinta.com/platforms`) and
    /// released with their constraints by the gate controller.
    Gate,
    /// Inline when every image is known within `--hybrid-budget`, gated otherwise.
    Hybrid,
}

impl From<LookupModeArg> for LookupMode {
    fn from(mode: LookupModeArg) -> Self {
        match mode {
            LookupModeArg::Inline => Self::Inline,
            LookupModeArg::Gate => Self::Gate,
            LookupModeArg::Hybrid => Self::Hybrid,
        }
    }
}

/// The environment variable the chart fills with the pod's name (downward API).
pub const POD_NAME_ENV: &str = "POD_NAME";
/// The environment variable the chart fills with the pod's namespace (downward API).
pub const POD_NAMESPACE_ENV: &str = "POD_NAMESPACE";

#[derive(Clone, Debug, Args)]
#[command(next_help_heading = "Controllers")]
pub struct ControllerArgs {
    /// Keep a reflector of the cluster's Nodes: pods whose architectures no node has get a
    /// warning, debug containers are checked against their node without an API call, and
    /// `--cluster-schedulable-archs=auto` reads the nodes' architectures.
    #[arg(long)]
    pub watch_nodes: bool,

    /// Pods running on a node their images cannot run on: `off`, `report` (an Event and a
    /// metric) or `evict` (report, then evict those with a controller owner through the Eviction
    /// API, PodDisruptionBudgets respected).
    #[arg(long, value_enum, default_value = "off")]
    pub remediate: RemediateMode,

    /// Evictions per minute at most with `--remediate=evict`.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub remediate_rate: u32,

    /// Namespaces whose pods `--remediate=evict` reports but never evicts. Comma separated;
    /// default: kube-system and noe's own namespace ($POD_NAMESPACE). Empty: none is exempt.
    #[arg(long, value_delimiter = ',',
          num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub remediate_exempt_namespaces: Option<Vec<String>>,

    /// Exec format errors seen on nodes become knowledge: a container whose status or previous
    /// log says `exec format error` teaches noe that its image digest does not run on its node's
    /// platform. The correction is kept in the learned store (`--learned-store`), which every
    /// replica reads; the pod gets an Event, and with `--remediate=evict` it is
    /// evicted.
    #[arg(long)]
    pub detect_exec_format_errors: bool,

    /// With --detect-exec-format-errors: previous logs of containers that crashed at once read
    /// per second at most, across the cluster.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub log_reads_per_second: u32,

    /// The learned store: a ConfigMap in noe's namespace ($POD_NAMESPACE; `noe learned -n`)
    /// that holds the corrections learned from exec format errors and verification.
    #[arg(
        long,
        default_value = noe_controller::learned::DEFAULT_NAME
    )]
    pub learned_store: String,

    /// Corrections the learned store keeps at most; past it the oldest evidence goes first.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=5000))]
    pub learned_max_entries: u32,

    /// Run the writing controllers (remediation, taints, detection) only on the replica that
    /// holds a Lease; every replica serves admissions.
    #[arg(long)]
    pub leader_elect: bool,

    /// Name of the Lease (coordination.k8s.io/v1).
    #[arg(long, default_value = "noe")]
    pub leader_elect_resource_name: String,

    /// Namespace of the Lease; default: $POD_NAMESPACE.
    #[arg(long)]
    pub leader_elect_resource_namespace: Option<String>,

    /// This replica's identity in the Lease (unique among replicas); default: $POD_NAME.
    #[arg(long)]
    pub leader_elect_identity: Option<String>,

    /// How long the others wait after the leader's last renewal before taking the Lease.
    #[arg(long, default_value = "15s", value_parser = super::parse::positive_duration)]
    pub leader_elect_lease_duration: Duration,

    /// The leader stops writing when it could not renew for this long (below the lease duration).
    #[arg(long, default_value = "10s", value_parser = super::parse::positive_duration)]
    pub leader_elect_renew_deadline: Duration,

    /// Time between attempts to acquire or renew the Lease (below the renew deadline).
    #[arg(long, default_value = "2s", value_parser = super::parse::positive_duration)]
    pub leader_elect_retry_period: Duration,

    /// Where pods wait for their image lookups: `inline` (inside admission), `gate` (gated at
    /// creation, released by the gate controller) or `hybrid` (inline when every image is known
    /// within `--hybrid-budget`, else gated).
    #[arg(long, value_enum, default_value = "inline")]
    pub lookup_mode: LookupModeArg,

    /// With `--lookup-mode=hybrid`: how long an admission waits for its images (process cache,
    /// shared cache) before gating the pod.
    #[arg(long, default_value = "10ms", value_parser = super::parse::positive_duration)]
    pub hybrid_budget: Duration,

    /// Lookups of a gated pod tried (with exponential backoff, 1 s to 5 min) before
    /// `--on-lookup-error` decides its release.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub gate_max_attempts: u32,

    /// With `--lookup-mode=gate|hybrid` and `--verify-binaries=background`: a gated pod is
    /// held while a verification of one of its images is queued or running (each attempt of
    /// `--gate-max-attempts` waits for it), so it is released already constrained by what the
    /// verification proved.
    #[arg(long)]
    pub gate_verify: bool,

    /// With `--lookup-mode=gate|hybrid`: only pods whose labels match this label selector are
    /// gated, the others are decided inline (Kubernetes' selector syntax, as `kubectl -l`:
    /// `team in (shop),!example.com/no-gate`). Empty: every pod.
    #[arg(long, default_value = "", value_parser = parse_selector)]
    pub gate_object_selector: Selector,

    /// With `--lookup-mode=gate|hybrid`: only pods of the namespaces whose labels match this
    /// label selector are gated, the others are decided inline (`get namespaces`; a namespace
    /// that cannot be read is not gated). Empty: every namespace.
    #[arg(long, default_value = "", value_parser = parse_selector)]
    pub gate_namespace_selector: Selector,

    /// Image selection by compatibility artifacts (needs --watch-nodes): pods labelled
    /// `oci.image.compatibilities.selection/enabled: "true"` get the image variant their nodes
    /// can run (ocifit-k8s), and in namespaces labelled
    /// `arch.noe.adevinta.com/image-compatibility: enabled` the NFD artifacts attached to the
    /// images constrain the pods to the nodes that fit them.
    #[arg(long)]
    pub image_selection: bool,

    /// With --image-selection: look for NFD artifacts in every namespace, not only the
    /// labelled ones.
    #[arg(long)]
    pub image_compatibility_all_namespaces: bool,

    /// With --image-selection: watch node-feature-discovery's `NodeFeature` objects
    /// (`list/watch nodefeatures.nfd.k8s-sigs.io`), so the node features that never become
    /// labels are evaluated too (else they are unknown, and a set needing them fits no node).
    #[arg(long)]
    pub watch_node_features: bool,

    /// With --image-selection: how long the absence of an NFD artifact on an image is
    /// remembered (Go duration, at most 1h; 0s: not remembered). Shorter than the 60s an
    /// artifact found is kept, so one attached since is seen sooner.
    #[arg(long, default_value = "10s", value_parser = super::parse::duration)]
    pub image_compatibility_negative_ttl: Duration,
}

fn parse_selector(text: &str) -> Result<Selector, String> {
    text.parse()
        .map_err(|error| format!("not a label selector: {error}"))
}

#[derive(Clone, Debug, Args)]
#[command(next_help_heading = "Controllers")]
pub struct TaintArgs {
    /// Architectures whose nodes keep the taint `arch.noe.adevinta.com/arch=<arch>:NoSchedule`
    /// (`noe untaint` removes it); pods that may run on them get its toleration. Comma separated.
    #[arg(long, value_delimiter = ',')]
    pub taint_arches: Vec<String>,
}

/// A Kubernetes label value: at most 63 characters of `[A-Za-z0-9._-]`, alphanumeric at both
/// ends (node arch labels are label values).
fn is_label_value(text: &str) -> bool {
    noe_core::names::is_qualified_name(text, 63)
}

impl TaintArgs {
    /// The tainted arches; refuses one that is not a label value.
    pub fn arches(&self) -> Result<BTreeSet<String>, ConfigError> {
        let arches: BTreeSet<String> = non_empty(&self.taint_arches).into_iter().collect();
        if let Some(bad) = arches.iter().find(|arch| !is_label_value(arch)) {
            return Err(ConfigError::Contradiction(format!(
                "--taint-arches {bad:?} is not an architecture (a node label value)"
            )));
        }
        Ok(arches)
    }

    /// Adds the toleration of each tainted arch to the per-arch settings of the decision (the
    /// same path as `--arch-tolerations-file`), so pods that may run there tolerate the taint.
    pub fn tolerate(&self, policy: &mut Policy) -> Result<(), ConfigError> {
        for arch in self.arches()? {
            let toleration = serde_json::json!({
                "key": TAINT_KEY,
                "operator": "Equal",
                "value": arch,
                "effect": TAINT_EFFECT,
            });
            let settings = policy.architectures.entry(arch).or_default();
            if !settings.tolerations.contains(&toleration) {
                settings.tolerations.push(toleration);
            }
        }
        Ok(())
    }
}

impl ControllerArgs {
    /// The controllers' configuration. `env` reads the environment (`POD_NAME`,
    /// `POD_NAMESPACE`); `auto` says `--cluster-schedulable-archs=auto` was given. Refuses
    /// contradictions with one line naming the flags.
    pub fn settings(
        &self,
        taints: &TaintArgs,
        auto: bool,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ControllerSettings, ConfigError> {
        let contradiction = |text: &str| Err(ConfigError::Contradiction(text.to_owned()));
        if auto && !self.watch_nodes {
            return contradiction(
                "--cluster-schedulable-archs=auto needs --watch-nodes (the architectures are read from the nodes)",
            );
        }
        if self.image_selection && !self.watch_nodes {
            return contradiction(
                "--image-selection needs --watch-nodes (the nodes' labels decide the choice)",
            );
        }
        if self.image_compatibility_all_namespaces && !self.image_selection {
            return contradiction("--image-compatibility-all-namespaces needs --image-selection");
        }
        if self.watch_node_features && !self.image_selection {
            return contradiction("--watch-node-features needs --image-selection");
        }
        if self.image_compatibility_negative_ttl > noe_registry::artifacts::MAX_NEGATIVE_TTL {
            return contradiction("--image-compatibility-negative-ttl must be at most 1h");
        }
        let taint_arches = taints.arches()?;
        let remediate = Remediate::from(self.remediate);
        let lookup_mode = LookupMode::from(self.lookup_mode);
        if lookup_mode != LookupMode::Inline && self.hybrid_budget > Duration::from_secs(10) {
            return contradiction("--hybrid-budget must be at most 10s (admission waits for it)");
        }
        if self.gate_verify && lookup_mode == LookupMode::Inline {
            return contradiction("--gate-verify needs --lookup-mode=gate or hybrid");
        }
        let gate = (lookup_mode != LookupMode::Inline).then(|| GateConfig {
            max_attempts: self.gate_max_attempts,
            ..GateConfig::default()
        });
        let writes = remediate != Remediate::Off
            || !taint_arches.is_empty()
            || gate.is_some()
            || self.detect_exec_format_errors;
        let leader_election = if self.leader_elect && writes {
            Some(self.lease(env)?)
        } else {
            None
        };
        let own_namespace = env(POD_NAMESPACE_ENV).filter(|ns| !ns.is_empty());
        let evict_exempt_namespaces = match &self.remediate_exempt_namespaces {
            Some(given) => {
                let given: BTreeSet<String> = non_empty(given).into_iter().collect();
                if let Some(bad) = given.iter().find(|ns| !is_object_name(ns, 63)) {
                    return Err(ConfigError::Contradiction(format!(
                        "--remediate-exempt-namespaces {bad:?} is not a namespace name"
                    )));
                }
                given
            }
            None => [KUBE_SYSTEM.to_owned()]
                .into_iter()
                .chain(own_namespace.clone())
                .collect(),
        };
        let (detect, learned) = if self.detect_exec_format_errors {
            let Some(namespace) = own_namespace.clone() else {
                return contradiction(&format!(
                    "--detect-exec-format-errors needs noe's namespace, where the learned store is: set {POD_NAMESPACE_ENV} (the chart sets it)"
                ));
            };
            let name = self.learned_store.trim();
            if !is_object_name(name, 253) {
                return Err(ConfigError::Contradiction(format!(
                    "--learned-store {name:?} is not a ConfigMap name"
                )));
            }
            let detect = DetectConfig {
                log_reads_per_second: self.log_reads_per_second,
                ..DetectConfig::default()
            };
            let learned = LearnedConfig {
                namespace,
                name: name.to_owned(),
                max_entries: usize::try_from(self.learned_max_entries)
                    .unwrap_or(noe_controller::learned::DEFAULT_MAX_ENTRIES),
            };
            (Some(detect), Some(learned))
        } else {
            (None, None)
        };
        let config = Config {
            watch_nodes: self.watch_nodes,
            remediate,
            remediate_rate_per_minute: self.remediate_rate,
            evict_exempt_namespaces,
            taint_arches,
            leader_election,
            instance: env(POD_NAME_ENV).filter(|name| !name.is_empty()),
            gate,
            detect,
            learned,
            ..Config::default()
        };
        config
            .validate()
            .map_err(|error| ConfigError::Contradiction(error.to_string()))?;
        Ok(ControllerSettings {
            config,
            node_facts: self.watch_nodes,
            leader_elect: self.leader_elect,
            lookup_mode,
            hybrid_budget: self.hybrid_budget,
            own_namespace,
            gate_object_selector: self.gate_object_selector.clone(),
            gate_namespace_selector: self.gate_namespace_selector.clone(),
            image_selection: self
                .image_selection
                .then_some(crate::config::ImageSelection {
                    all_namespaces: self.image_compatibility_all_namespaces,
                    node_features: self.watch_node_features,
                    negative_ttl: self.image_compatibility_negative_ttl,
                }),
            gate_verify: self.gate_verify,
        })
    }

    /// The Lease: name, namespace (flag, else `POD_NAMESPACE`), identity (flag, else
    /// `POD_NAME`), timings.
    fn lease(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<LeaseConfig, ConfigError> {
        let given = |flag: &Option<String>, var: &str| {
            flag.clone()
                .or_else(|| env(var))
                .map(|value| value.trim().to_owned())
                .filter(|value| !value.is_empty())
        };
        let contradiction = |text: String| ConfigError::Contradiction(text);
        let name = self.leader_elect_resource_name.trim();
        if !is_object_name(name, 253) {
            return Err(contradiction(format!(
                "--leader-elect-resource-name {name:?} is not a Kubernetes object name"
            )));
        }
        let Some(namespace) = given(&self.leader_elect_resource_namespace, POD_NAMESPACE_ENV)
        else {
            return Err(contradiction(format!(
                "--leader-elect needs the Lease's namespace: set {POD_NAMESPACE_ENV} (the chart sets it) or --leader-elect-resource-namespace"
            )));
        };
        if !is_object_name(&namespace, 63) {
            return Err(contradiction(format!(
                "--leader-elect-resource-namespace {namespace:?} is not a namespace name"
            )));
        }
        let Some(identity) = given(&self.leader_elect_identity, POD_NAME_ENV) else {
            return Err(contradiction(format!(
                "--leader-elect needs this replica's identity: set {POD_NAME_ENV} (the chart sets it) or --leader-elect-identity"
            )));
        };
        if identity.len() > 253 || identity.chars().any(char::is_control) {
            return Err(contradiction(format!(
                "--leader-elect-identity must be at most 253 printable characters (got {} bytes)",
                identity.len()
            )));
        }
        let (duration, deadline, retry) = (
            self.leader_elect_lease_duration,
            self.leader_elect_renew_deadline,
            self.leader_elect_retry_period,
        );
        if !(duration > deadline && deadline > retry) || duration < Duration::from_secs(1) {
            return Err(contradiction(format!(
                "--leader-elect-lease-duration ({duration:?}) must be above --leader-elect-renew-deadline ({deadline:?}), itself above --leader-elect-retry-period ({retry:?}), and at least 1s"
            )));
        }
        Ok(LeaseConfig {
            lease_duration: duration,
            renew_deadline: deadline,
            retry_period: retry,
            ..LeaseConfig::new(name, &namespace, &identity)
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn label_values_and_object_names() {
        for good in ["arm64", "amd64", "ppc64le", "arm.v7", "a_b-c"] {
            assert!(is_label_value(good), "{good}");
        }
        let long = "a".repeat(64);
        for bad in ["", "-arm", "arm-", "arm64 ", "a/b", long.as_str(), "ärm"] {
            assert!(!is_label_value(bad), "{bad:?}");
        }
        for good in ["noe", "noe-system", "noe.controllers", "a1"] {
            assert!(is_object_name(good, 253), "{good}");
        }
        for bad in ["", "Noe", "noe_", "-noe", "noe-", "a b"] {
            assert!(!is_object_name(bad, 253), "{bad:?}");
        }
        assert!(!is_object_name(&"a".repeat(64), 63));
    }

    #[test]
    fn tolerations_of_the_taints_join_the_per_arch_settings() {
        let taints = TaintArgs {
            taint_arches: vec!["arm64".into(), " ".into(), "arm64".into()],
        };
        let mut policy = Policy::default();
        policy.architectures.insert(
            "arm64".into(),
            noe_core::decide::ArchSettings {
                tolerations: vec![serde_json::json!({"key": "pool", "operator": "Exists"})],
                ..Default::default()
            },
        );
        taints.tolerate(&mut policy).unwrap();
        taints.tolerate(&mut policy).unwrap();
        assert_eq!(
            policy.architectures["arm64"].tolerations,
            [
                serde_json::json!({"key": "pool", "operator": "Exists"}),
                serde_json::json!({"key": "arch.noe.adevinta.com/arch", "operator": "Equal",
                                   "value": "arm64", "effect": "NoSchedule"}),
            ]
        );
        assert_eq!(policy.architectures.len(), 1);
        let bad = TaintArgs {
            taint_arches: vec!["arm 64".into()],
        };
        assert_eq!(
            bad.tolerate(&mut policy).unwrap_err().to_string(),
            "--taint-arches \"arm 64\" is not an architecture (a node label value)"
        );
    }
}
