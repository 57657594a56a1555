//! Flags of the decision: preferred arch, schedulable archs, OS, lookup errors, tolerations.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use noe_core::decide::{
    Mode, OnContradiction, OnLookupError, Policy, PolicyError, PreferenceMode, Weight,
};

use super::parse::{non_empty, non_empty_path, ConfigError};
use crate::config::{parse_architectures, Decision};

#[derive(Clone, Debug, Args)]
#[command(next_help_heading = "Decision")]
pub struct PolicyArgs {
    /// Cluster-wide preferred architecture; empty disables the preference.
    #[arg(long, default_value = "amd64")]
    pub preferred_arch: String,

    /// Architectures schedulable in the cluster, comma separated; empty means all. `auto`
    /// (with --watch-nodes) takes the architectures of the cluster's nodes, plus the others
    /// listed (pools scaled to zero).
    #[arg(long, value_delimiter = ',')]
    pub cluster_schedulable_archs: Vec<String>,

    /// OS of pods that do not state one.
    #[arg(long, default_value = "linux",
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub system_os: String,

    /// Pod label keys copied into the pod's nodeSelector, comma separated.
    #[arg(long, value_delimiter = ',')]
    pub match_node_labels: Vec<String>,

    /// How the preferred architecture is written.
    #[arg(long, value_enum, default_value = "required")]
    pub preference_mode: PreferenceModeFlag,

    /// Weight (1-100) of the soft preference in `preferred` mode.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(i64).range(1..=100))]
    pub preference_weight: i64,

    /// What one failed image lookup does.
    #[arg(long, value_enum, default_value = "ignore-image")]
    pub on_lookup_error: OnLookupErrorFlag,

    /// With `--on-lookup-error=fallback`: an image whose platforms cannot be found is taken to
    /// support only this architecture.
    #[arg(long, default_value = "")]
    pub fallback_arch: String,

    /// `enforce` mutates and denies; `audit` decides the same way but only annotates and warns.
    #[arg(long, value_enum, default_value = "enforce")]
    pub mode: ModeFlag,

    /// A pod whose own arch constraint its images cannot satisfy (or a debug container that
    /// cannot run on its pod's node): `warn` or `deny`.
    #[arg(long, value_enum, default_value = "warn")]
    pub on_contradiction: OnContradictionFlag,

    /// The whole admission answers within this (Go duration); keep it below the webhook's timeoutSeconds.
    #[arg(long, default_value = "8s", value_parser = super::parse::positive_duration)]
    pub admission_deadline: Duration,

    /// YAML map `arch -> {tolerations: [...], nodeLabels: {...}}` (or `arch -> [toleration]`):
    /// what a pod that may run on that arch gets.
    #[arg(long, value_parser = super::parse::any_path)]
    pub arch_tolerations_file: Option<PathBuf>,
}

/// `--preference-mode` ([`PreferenceMode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PreferenceModeFlag {
    /// noe's behaviour: a hard `nodeSelector["kubernetes.io/arch"]` on the preferred arch.
    Required,
    /// Required affinity on all common archs plus a weighted preferred term for the preferred one.
    Preferred,
}

impl From<PreferenceModeFlag> for PreferenceMode {
    fn from(flag: PreferenceModeFlag) -> Self {
        match flag {
            PreferenceModeFlag::Required => Self::Required,
            PreferenceModeFlag::Preferred => Self::Preferred,
        }
    }
}

/// `--on-lookup-error` ([`OnLookupError`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnLookupErrorFlag {
    /// noe's behaviour: decide over the images that were resolved; if none was, leave the pod alone.
    IgnoreImage,
    /// Any failure leaves the pod untouched.
    AllowPod,
    /// Any failure denies the pod.
    Deny,
    /// An image whose platforms cannot be found is taken to support only `--fallback-arch`.
    Fallback,
}

impl From<OnLookupErrorFlag> for OnLookupError {
    fn from(flag: OnLookupErrorFlag) -> Self {
        match flag {
            OnLookupErrorFlag::IgnoreImage => Self::IgnoreImage,
            OnLookupErrorFlag::AllowPod => Self::AllowPod,
            OnLookupErrorFlag::Deny => Self::Deny,
            OnLookupErrorFlag::Fallback => Self::Fallback,
        }
    }
}

/// `--mode` ([`Mode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeFlag {
    /// Mutate and deny as decided.
    Enforce,
    /// Decide the same way, change nothing but the `arch.noe.adevinta.com/audit` annotation, warn,
    /// and never deny.
    Audit,
}

impl From<ModeFlag> for Mode {
    fn from(flag: ModeFlag) -> Self {
        match flag {
            ModeFlag::Enforce => Self::Enforce,
            ModeFlag::Audit => Self::Audit,
        }
    }
}

/// `--on-contradiction` ([`OnContradiction`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnContradictionFlag {
    /// Allow it, with an admission warning naming the images.
    Warn,
    /// Deny it.
    Deny,
}

impl From<OnContradictionFlag> for OnContradiction {
    fn from(flag: OnContradictionFlag) -> Self {
        match flag {
            OnContradictionFlag::Warn => Self::Warn,
            OnContradictionFlag::Deny => Self::Deny,
        }
    }
}

const TOLERATIONS_FLAG: &str = "arch-tolerations-file";
/// `--cluster-schedulable-archs=auto`.
const AUTO: &str = "auto";

impl PolicyArgs {
    /// The listed architectures (without `auto`).
    pub fn schedulable_archs(&self) -> Vec<String> {
        non_empty(&self.cluster_schedulable_archs)
            .into_iter()
            .filter(|arch| arch != AUTO)
            .collect()
    }

    /// `--cluster-schedulable-archs` has `auto`: the nodes' architectures are schedulable.
    pub fn schedulable_from_nodes(&self) -> bool {
        self.cluster_schedulable_archs
            .iter()
            .any(|arch| arch.trim() == AUTO)
    }

    pub fn preferred_arch(&self) -> Option<String> {
        let arch = self.preferred_arch.trim();
        (!arch.is_empty()).then(|| arch.to_owned())
    }

    /// The decision's configuration.
    pub fn decision(&self) -> Result<Decision, ConfigError> {
        Ok(Decision {
            policy: self.policy()?,
            admission_deadline: self.admission_deadline,
        })
    }

    /// The decision's policy: reads `--arch-tolerations-file` (once) and refuses contradictions,
    /// naming the flags.
    pub fn policy(&self) -> Result<Policy, ConfigError> {
        let mut architectures = Default::default();
        if let Some(path) = non_empty_path(&self.arch_tolerations_file) {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                flag: TOLERATIONS_FLAG,
                path: path.clone(),
                source,
            })?;
            architectures = parse_architectures(&text).map_err(|error| ConfigError::Invalid {
                flag: TOLERATIONS_FLAG,
                path: path.clone(),
                reason: error.to_string(),
            })?;
        }
        let policy = Policy {
            preferred_arch: self.preferred_arch(),
            schedulable_archs: self.schedulable_archs().into_iter().collect(),
            schedulable_from_nodes: self.schedulable_from_nodes(),
            system_os: self.system_os.trim().to_owned(),
            preference_mode: self.preference_mode.into(),
            preference_weight: Weight::try_from(self.preference_weight)
                .map_err(|error| ConfigError::Contradiction(flag_message(error)))?,
            on_lookup_error: self.on_lookup_error.into(),
            fallback_arch: Some(self.fallback_arch.trim().to_owned()).filter(|a| !a.is_empty()),
            on_contradiction: self.on_contradiction.into(),
            mode: self.mode.into(),
            match_node_labels: non_empty(&self.match_node_labels),
            architectures,
        };
        policy
            .validate()
            .map_err(|error| ConfigError::Contradiction(flag_message(error)))?;
        Ok(policy)
    }
}

/// A policy error worded with the flags that cause it.
fn flag_message(error: PolicyError) -> String {
    match error {
        PolicyError::PreferredNotSchedulable { arch, schedulable } => {
            format!("--preferred-arch {arch} is not in --cluster-schedulable-archs {schedulable}")
        }
        PolicyError::Weight(weight) => format!("--preference-weight {weight} is outside 1..=100"),
        PolicyError::EmptySystemOs => "--system-os must not be empty".to_owned(),
        PolicyError::MissingFallbackArch => {
            "--on-lookup-error=fallback needs --fallback-arch".to_owned()
        }
        PolicyError::FallbackNotSchedulable { arch, schedulable } => {
            format!("--fallback-arch {arch} is not in --cluster-schedulable-archs {schedulable}")
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    fn names<T: ValueEnum>() -> Vec<String> {
        T::value_variants()
            .iter()
            .filter_map(|v| v.to_possible_value())
            .map(|v| v.get_name().to_owned())
            .collect()
    }

    #[test]
    fn flag_spellings() {
        assert_eq!(names::<PreferenceModeFlag>(), ["required", "preferred"]);
        assert_eq!(
            names::<OnLookupErrorFlag>(),
            ["ignore-image", "allow-pod", "deny", "fallback"]
        );
        assert_eq!(names::<ModeFlag>(), ["enforce", "audit"]);
        assert_eq!(names::<OnContradictionFlag>(), ["warn", "deny"]);
        assert_eq!(
            OnLookupErrorFlag::from_str("allow-pod", false),
            Ok(OnLookupErrorFlag::AllowPod)
        );
        assert!(PreferenceModeFlag::from_str("Required", false).is_err());
    }
}
