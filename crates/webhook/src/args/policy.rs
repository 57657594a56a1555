//! Flags of the decision: preferred arch, schedulable archs, OS, lookup errors, tolerations.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::duration;
use super::registry::non_empty;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PreferenceModeArg {
    /// noe's hard `nodeSelector` on the preferred arch.
    Required,
    /// Required affinity on all common archs plus a weighted preferred term.
    Preferred,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnLookupErrorArg {
    /// Decide with the images that could be resolved (noe).
    IgnoreImage,
    /// Leave the pod untouched when any lookup fails.
    AllowPod,
    /// Deny the pod when any lookup fails.
    Deny,
}

#[derive(Clone, Debug, Args)]
pub struct PolicyArgs {
    /// Cluster-wide preferred architecture; empty disables the preference.
    #[arg(long, env = "NOE_PREFERRED_ARCH", default_value = "amd64")]
    pub preferred_arch: String,

    /// Architectures schedulable in the cluster, comma separated; empty means all.
    #[arg(long, env = "NOE_CLUSTER_SCHEDULABLE_ARCHS", value_delimiter = ',')]
    pub cluster_schedulable_archs: Vec<String>,

    /// OS of pods that do not state one.
    #[arg(long, env = "NOE_SYSTEM_OS", default_value = "linux")]
    pub system_os: String,

    /// Pod label keys copied into the pod's nodeSelector, comma separated.
    #[arg(long, env = "NOE_MATCH_NODE_LABELS", value_delimiter = ',')]
    pub match_node_labels: Vec<String>,

    /// How the preferred architecture is written.
    #[arg(
        long,
        env = "NOE_PREFERENCE_MODE",
        value_enum,
        default_value = "required"
    )]
    pub preference_mode: PreferenceModeArg,

    /// Weight (1-100) of the soft preference in `preferred` mode.
    #[arg(long, env = "NOE_PREFERENCE_WEIGHT", default_value_t = 50)]
    pub preference_weight: i64,

    /// What one failed image lookup does.
    #[arg(
        long,
        env = "NOE_ON_LOOKUP_ERROR",
        value_enum,
        default_value = "ignore-image"
    )]
    pub on_lookup_error: OnLookupErrorArg,

    /// The whole admission answers within this (Go duration); keep it below the webhook's timeoutSeconds.
    #[arg(long, env = "NOE_ADMISSION_DEADLINE", default_value = "8s", value_parser = duration::parse)]
    pub admission_deadline: Duration,

    /// YAML map `arch -> [toleration]` added for the archs a pod may run on.
    #[arg(long, env = "NOE_ARCH_TOLERATIONS_FILE", value_parser = super::any_path)]
    pub arch_tolerations_file: Option<PathBuf>,
}

/// Per-architecture settings (tolerations and node labels).
pub type ArchTolerations = crate::decide::Architectures;

impl PolicyArgs {
    pub fn schedulable_archs(&self) -> Vec<String> {
        non_empty(&self.cluster_schedulable_archs)
    }

    pub fn match_node_labels(&self) -> Vec<String> {
        non_empty(&self.match_node_labels)
    }

    pub fn preferred_arch(&self) -> Option<String> {
        let arch = self.preferred_arch.trim();
        (!arch.is_empty()).then(|| arch.to_owned())
    }

    /// Reads `--arch-tolerations-file` (empty map when unset).
    pub fn arch_tolerations(&self) -> Result<ArchTolerations, String> {
        let Some(path) = self
            .arch_tolerations_file
            .as_ref()
            .filter(|p| !p.as_os_str().is_empty())
        else {
            return Ok(ArchTolerations::new());
        };
        let text = std::fs::read_to_string(path).map_err(|error| {
            format!(
                "cannot read --arch-tolerations-file {}: {error}",
                path.display()
            )
        })?;
        crate::decide::parse_architectures(&text).map_err(|error| {
            format!(
                "invalid --arch-tolerations-file {}: {error}",
                path.display()
            )
        })
    }

    /// The decision's policy (reads `--arch-tolerations-file`).
    pub fn to_policy(&self) -> Result<crate::decide::Policy, String> {
        let policy = crate::decide::Policy {
            preferred_arch: self.preferred_arch(),
            schedulable_archs: self.schedulable_archs().into_iter().collect(),
            system_os: self.system_os.trim().to_owned(),
            preference_mode: match self.preference_mode {
                PreferenceModeArg::Required => crate::decide::PreferenceMode::Required,
                PreferenceModeArg::Preferred => crate::decide::PreferenceMode::Preferred,
            },
            preference_weight: crate::decide::Weight::try_from(self.preference_weight)
                .map_err(|error| error.to_string())?,
            on_lookup_error: match self.on_lookup_error {
                OnLookupErrorArg::IgnoreImage => crate::decide::OnLookupError::IgnoreImage,
                OnLookupErrorArg::AllowPod => crate::decide::OnLookupError::AllowPod,
                OnLookupErrorArg::Deny => crate::decide::OnLookupError::Deny,
            },
            match_node_labels: self.match_node_labels(),
            architectures: self.arch_tolerations()?,
            ..crate::decide::Policy::default()
        };
        Ok(policy)
    }

    /// Contradictions clap cannot see, each as a one-line reason.
    pub fn validate(&self) -> Result<(), String> {
        let schedulable = self.schedulable_archs();
        if let Some(preferred) = self.preferred_arch() {
            if !schedulable.is_empty() && !schedulable.contains(&preferred) {
                return Err(format!(
                    "--preferred-arch {preferred} is not in --cluster-schedulable-archs {}",
                    schedulable.join(",")
                ));
            }
        }
        if !(1..=100).contains(&self.preference_weight) {
            return Err(format!(
                "--preference-weight {} is outside 1..=100",
                self.preference_weight
            ));
        }
        if self.admission_deadline.is_zero() {
            return Err("--admission-deadline must be above zero".into());
        }
        if self.system_os.trim().is_empty() {
            return Err("--system-os must not be empty".into());
        }
        self.to_policy()?
            .validate()
            .map_err(|error| error.to_string())
    }
}
