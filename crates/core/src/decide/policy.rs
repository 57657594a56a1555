//! The decision's configuration: what the flags of docs/configuration.md say about placement.

use std::collections::BTreeSet;

use super::architectures::Architectures;

/// `--preference-mode`: how the preferred architecture is written into the pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PreferenceMode {
    /// noe's behaviour: a hard `nodeSelector["kubernetes.io/arch"]` on the preferred arch.
    #[default]
    Required,
    /// Required affinity on all common archs plus a weighted preferred term for the preferred one.
    Preferred,
}

/// `--on-lookup-error`: what one failed image lookup does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnLookupError {
    /// noe's behaviour: decide over the images that were resolved; if none was, leave the pod alone.
    #[default]
    IgnoreImage,
    /// Any failure leaves the pod untouched.
    AllowPod,
    /// Any failure denies the pod.
    Deny,
    /// An image whose platforms cannot be found is taken to support only `--fallback-arch`.
    Fallback,
}

/// `--mode`: whether the decision is applied or only reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Mutate and deny as decided.
    #[default]
    Enforce,
    /// Decide the same way, change nothing but the `arch.noe.adevinta.com/audit` annotation, warn,
    /// and never deny.
    Audit,
}

/// `--on-contradiction`: what a pod whose own arch constraint its images cannot satisfy gets (and
/// a debug container that cannot run on its pod's node).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnContradiction {
    /// Allow it, with an admission warning naming the images.
    #[default]
    Warn,
    /// Deny it.
    Deny,
}

/// `--preference-weight`: the weight of the soft preference, 1 to 100 as the scheduler requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Weight(i32);

impl Weight {
    /// The flag's default.
    pub const DEFAULT: Weight = Weight(50);

    /// The weight as written into a preferred term.
    pub fn get(self) -> i32 {
        self.0
    }
}

impl Default for Weight {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl TryFrom<i64> for Weight {
    type Error = PolicyError;

    fn try_from(weight: i64) -> Result<Self, Self::Error> {
        match i32::try_from(weight) {
            Ok(w) if (1..=100).contains(&w) => Ok(Self(w)),
            _ => Err(PolicyError::Weight(weight)),
        }
    }
}

/// A configuration the decision refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The preferred arch is outside a non-empty schedulable list.
    #[error("preferred architecture {arch:?} is not one of the cluster schedulable architectures ({schedulable})")]
    PreferredNotSchedulable {
        /// The preferred arch.
        arch: String,
        /// The schedulable list, comma-separated.
        schedulable: String,
    },
    /// A preference weight outside 1..=100.
    #[error("preference weight {0} is outside 1..=100")]
    Weight(i64),
    /// An empty system OS.
    #[error("system OS must not be empty")]
    EmptySystemOs,
    /// `fallback` without a fallback arch.
    #[error("on-lookup-error fallback needs a fallback architecture")]
    MissingFallbackArch,
    /// A fallback arch outside a non-empty schedulable list.
    #[error("fallback architecture {arch:?} is not one of the cluster schedulable architectures ({schedulable})")]
    FallbackNotSchedulable {
        /// The fallback arch.
        arch: String,
        /// The schedulable list, comma-separated.
        schedulable: String,
    },
}

impl PolicyError {
    /// A bounded label for the error.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::PreferredNotSchedulable { .. } => "preferred_not_schedulable",
            Self::Weight(_) => "weight",
            Self::EmptySystemOs => "empty_system_os",
            Self::MissingFallbackArch => "missing_fallback_arch",
            Self::FallbackNotSchedulable { .. } => "fallback_not_schedulable",
        }
    }
}

/// Everything the decision needs from the configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// `--preferred-arch`; `None` or empty = no cluster-wide preference.
    pub preferred_arch: Option<String>,
    /// `--cluster-schedulable-archs`; empty = every architecture is schedulable. With
    /// [`Policy::schedulable_from_nodes`], the archs added to the nodes' (pools at zero).
    pub schedulable_archs: BTreeSet<String>,
    /// `--cluster-schedulable-archs=auto`: the schedulable archs are those of the cluster's nodes
    /// ([`Facts::cluster_archs`](super::Facts::cluster_archs)) plus `schedulable_archs`; every
    /// arch is while the nodes are not known.
    pub schedulable_from_nodes: bool,
    /// `--system-os`: the OS of pods that do not state one.
    pub system_os: String,
    /// `--preference-mode`.
    pub preference_mode: PreferenceMode,
    /// `--preference-weight`, used for the soft preference.
    pub preference_weight: Weight,
    /// `--on-lookup-error`.
    pub on_lookup_error: OnLookupError,
    /// `--fallback-arch`: with [`OnLookupError::Fallback`], the arch an image whose platforms
    /// cannot be found is taken to support.
    pub fallback_arch: Option<String>,
    /// `--on-contradiction`.
    pub on_contradiction: OnContradiction,
    /// `--mode`.
    pub mode: Mode,
    /// `--match-node-labels`: pod label keys copied into `nodeSelector`.
    pub match_node_labels: Vec<String>,
    /// `--arch-tolerations-file`: per architecture, the tolerations and node labels of step 9.
    pub architectures: Architectures,
}

impl Default for Policy {
    /// The flag defaults of docs/configuration.md.
    fn default() -> Self {
        Self {
            preferred_arch: Some("amd64".to_owned()),
            schedulable_archs: BTreeSet::new(),
            schedulable_from_nodes: false,
            system_os: "linux".to_owned(),
            preference_mode: PreferenceMode::Required,
            preference_weight: Weight::DEFAULT,
            on_lookup_error: OnLookupError::IgnoreImage,
            fallback_arch: None,
            on_contradiction: OnContradiction::Warn,
            mode: Mode::Enforce,
            match_node_labels: Vec::new(),
            architectures: Architectures::new(),
        }
    }
}

impl Policy {
    /// Refuses contradictory settings. With `schedulable_from_nodes` the schedulable archs are
    /// not known yet, so the preferred and fallback archs are not checked against them.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let schedulable = || {
            self.schedulable_archs
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(",")
        };
        if let Some(arch) = self.preferred() {
            if !self.is_schedulable(arch) {
                return Err(PolicyError::PreferredNotSchedulable {
                    arch: arch.to_owned(),
                    schedulable: schedulable(),
                });
            }
        }
        if self.system_os.is_empty() {
            return Err(PolicyError::EmptySystemOs);
        }
        if self.on_lookup_error == OnLookupError::Fallback {
            let Some(arch) = self.fallback() else {
                return Err(PolicyError::MissingFallbackArch);
            };
            if !self.is_schedulable(arch) {
                return Err(PolicyError::FallbackNotSchedulable {
                    arch: arch.to_owned(),
                    schedulable: schedulable(),
                });
            }
        }
        Ok(())
    }

    /// The cluster-wide preferred architecture, `None` when unset or empty.
    pub fn preferred(&self) -> Option<&str> {
        self.preferred_arch.as_deref().filter(|a| !a.is_empty())
    }

    /// The fallback architecture, `None` when unset or empty.
    pub fn fallback(&self) -> Option<&str> {
        self.fallback_arch.as_deref().filter(|a| !a.is_empty())
    }

    /// Whether `arch` is schedulable (an empty list means every arch is; so does
    /// `schedulable_from_nodes` until the decision knows the nodes).
    pub fn is_schedulable(&self, arch: &str) -> bool {
        self.schedulable_from_nodes
            || self.schedulable_archs.is_empty()
            || self.schedulable_archs.contains(arch)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn weights_outside_1_to_100_are_refused() {
        for bad in [0, 101, -1, i64::from(i32::MAX) + 1, i64::MIN] {
            assert_eq!(Weight::try_from(bad), Err(PolicyError::Weight(bad)));
        }
        assert_eq!(Weight::try_from(1).unwrap().get(), 1);
        assert_eq!(Weight::try_from(100).unwrap().get(), 100);
        assert_eq!(Weight::default(), Weight::DEFAULT);
    }

    #[test]
    fn validation() {
        assert_eq!(Policy::default().validate(), Ok(()));
        let arm_only = Policy {
            schedulable_archs: BTreeSet::from(["arm64".to_owned()]),
            ..Policy::default()
        };
        let error = arm_only.validate().unwrap_err();
        assert_eq!(error.kind(), "preferred_not_schedulable");
        assert_eq!(
            error.to_string(),
            "preferred architecture \"amd64\" is not one of the cluster schedulable architectures (arm64)"
        );
        let no_preference = Policy {
            preferred_arch: Some(String::new()),
            ..arm_only.clone()
        };
        assert_eq!(no_preference.validate(), Ok(()));
        let fallback = Policy {
            on_lookup_error: OnLookupError::Fallback,
            ..no_preference.clone()
        };
        assert_eq!(fallback.validate(), Err(PolicyError::MissingFallbackArch));
        let amd_fallback = Policy {
            fallback_arch: Some("amd64".to_owned()),
            ..fallback.clone()
        };
        assert_eq!(
            amd_fallback.validate().unwrap_err().kind(),
            "fallback_not_schedulable"
        );
        let arm_fallback = Policy {
            fallback_arch: Some("arm64".to_owned()),
            ..fallback
        };
        assert_eq!(arm_fallback.validate(), Ok(()));
        let no_os = Policy {
            system_os: String::new(),
            ..Policy::default()
        };
        assert_eq!(no_os.validate(), Err(PolicyError::EmptySystemOs));
        // `auto`: the nodes' archs are not known at start, so the preferred and fallback archs
        // are not checked against the extra ones.
        let auto = Policy {
            schedulable_from_nodes: true,
            schedulable_archs: BTreeSet::from(["arm64".to_owned()]),
            on_lookup_error: OnLookupError::Fallback,
            fallback_arch: Some("s390x".to_owned()),
            ..Policy::default()
        };
        assert_eq!(auto.validate(), Ok(()));
        assert!(auto.is_schedulable("amd64"));
    }
}
