//! The decision's configuration: what the flags (docs/configuration.md) say about placement.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// How the preferred architecture is written into the pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum PreferenceMode {
    /// noe's behaviour: a hard `nodeSelector["kubernetes.io/arch"]` on the preferred arch.
    #[default]
    Required,
    /// A required `In [common]` term plus a `preferredDuringScheduling` term for the preferred arch.
    Preferred,
}

impl PreferenceMode {
    /// The flag spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Required => "required",
            Self::Preferred => "preferred",
        }
    }
}

/// What one failed image lookup does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OnLookupError {
    /// noe's behaviour: decide over the images that were resolved; if none was, leave the pod alone.
    #[default]
    IgnoreImage,
    /// Any failure leaves the pod untouched.
    AllowPod,
    /// Any failure denies the pod.
    Deny,
}

impl OnLookupError {
    /// The flag spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::IgnoreImage => "ignore-image",
            Self::AllowPod => "allow-pod",
            Self::Deny => "deny",
        }
    }
}

/// Everything the decision needs from the configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// `--preferred-arch`; `None` or empty = no cluster-wide preference.
    pub preferred_arch: Option<String>,
    /// `--cluster-schedulable-archs`; empty = every architecture is schedulable.
    pub schedulable_archs: BTreeSet<String>,
    /// `--system-os`: the OS of pods that do not state one.
    pub system_os: String,
    /// `--preference-mode`.
    pub preference_mode: PreferenceMode,
    /// `--preference-weight` (1..=100), used in `preferred` mode.
    pub preference_weight: i32,
    /// `--on-lookup-error`.
    pub on_lookup_error: OnLookupError,
    /// `--match-node-labels`: pod label keys copied into `nodeSelector`.
    pub match_node_labels: Vec<String>,
    /// `--arch-tolerations-file`: arch → tolerations added when the pod may run on that arch.
    pub arch_tolerations: BTreeMap<String, Vec<Value>>,
}

impl Default for Policy {
    /// The flag defaults (docs/configuration.md).
    fn default() -> Self {
        Self {
            preferred_arch: Some("amd64".to_owned()),
            schedulable_archs: BTreeSet::new(),
            system_os: "linux".to_owned(),
            preference_mode: PreferenceMode::Required,
            preference_weight: 50,
            on_lookup_error: OnLookupError::IgnoreImage,
            match_node_labels: Vec::new(),
            arch_tolerations: BTreeMap::new(),
        }
    }
}

/// A configuration the decision cannot work with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    #[error("the preferred architecture {arch} is not one of the schedulable architectures {}", schedulable.join(","))]
    PreferredNotSchedulable {
        arch: String,
        schedulable: Vec<String>,
    },
    #[error("the preference weight {0} is outside 1..=100")]
    Weight(i32),
    #[error("the system OS must not be empty")]
    EmptySystemOs,
    #[error("the architecture tolerations are not a map of architecture to a list: {0}")]
    TolerationsNotAMap(String),
    #[error("invalid toleration for architecture {arch:?}: {reason}")]
    Toleration { arch: String, reason: String },
}

/// Parses architecture tolerations: a YAML (or JSON) map `arch → [toleration]`, e.g.
/// `arm64: [{key: arch, value: arm64, effect: NoSchedule}]`. An empty text is an empty map.
/// Each toleration must be a valid Kubernetes `Toleration`; it is kept as written.
pub fn parse_arch_tolerations(text: &str) -> Result<BTreeMap<String, Vec<Value>>, PolicyError> {
    if text.trim().is_empty() {
        return Ok(BTreeMap::new());
    }
    let map: Option<BTreeMap<String, Option<Vec<Value>>>> =
        serde_yaml::from_str(text).map_err(|e| PolicyError::TolerationsNotAMap(e.to_string()))?;
    let mut out = BTreeMap::new();
    for (arch, tolerations) in map.unwrap_or_default() {
        let tolerations = tolerations.unwrap_or_default();
        for toleration in &tolerations {
            check_toleration(&arch, toleration)?;
        }
        out.insert(arch, tolerations);
    }
    Ok(out)
}

fn check_toleration(arch: &str, toleration: &Value) -> Result<(), PolicyError> {
    let invalid = |reason: String| PolicyError::Toleration {
        arch: arch.to_owned(),
        reason,
    };
    if !toleration.is_object() {
        return Err(invalid("not an object".to_owned()));
    }
    serde_json::from_value::<k8s_openapi::api::core::v1::Toleration>(toleration.clone())
        .map(drop)
        .map_err(|e| invalid(e.to_string()))
}

impl Policy {
    /// Refuses contradictory settings.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if let Some(arch) = self.preferred() {
            if !self.is_schedulable(arch) {
                return Err(PolicyError::PreferredNotSchedulable {
                    arch: arch.to_owned(),
                    schedulable: self.schedulable_archs.iter().cloned().collect(),
                });
            }
        }
        if !(1..=100).contains(&self.preference_weight) {
            return Err(PolicyError::Weight(self.preference_weight));
        }
        if self.system_os.is_empty() {
            return Err(PolicyError::EmptySystemOs);
        }
        for (arch, tolerations) in &self.arch_tolerations {
            for toleration in tolerations {
                check_toleration(arch, toleration)?;
            }
        }
        Ok(())
    }

    /// The cluster-wide preferred architecture, `None` when unset or empty.
    pub fn preferred(&self) -> Option<&str> {
        self.preferred_arch.as_deref().filter(|a| !a.is_empty())
    }

    /// Whether `arch` is schedulable (an empty list means every arch is).
    pub fn is_schedulable(&self, arch: &str) -> bool {
        self.schedulable_archs.is_empty() || self.schedulable_archs.contains(arch)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_arch_tolerations() {
        let text = "arm64:\n  - key: arch\n    value: arm64\n    effect: NoSchedule\n  - operator: Exists\n    key: x\namd64: []\nriscv64:\n";
        let map = parse_arch_tolerations(text).unwrap();
        assert_eq!(
            map["arm64"],
            vec![
                json!({"key": "arch", "value": "arm64", "effect": "NoSchedule"}),
                json!({"operator": "Exists", "key": "x"})
            ]
        );
        assert!(map["amd64"].is_empty());
        assert!(map["riscv64"].is_empty());
        assert!(parse_arch_tolerations("  \n").unwrap().is_empty());
        assert!(parse_arch_tolerations("{\"arm64\": [{\"key\": \"a\"}]}").is_ok());
    }

    #[test]
    fn rejects_bad_tolerations() {
        for bad in [
            "- a\n- b\n",
            "arm64: x\n",
            "arm64: [1]\n",
            "arm64: [{tolerationSeconds: soon}]\n",
        ] {
            assert!(parse_arch_tolerations(bad).is_err(), "{bad:?}");
        }
    }
}
