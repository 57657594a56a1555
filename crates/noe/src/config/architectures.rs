//! The per-architecture settings file (`--arch-tolerations-file`, chart value `architectures`):
//! YAML (or JSON) parsed into the decision's [`Architectures`].

use std::collections::BTreeMap;

use noe_core::decide::{ArchSettings, Architectures};
use serde::Deserialize;
use serde_json::Value;

/// A settings file that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArchitecturesError {
    /// Not YAML, or not a map of architecture to settings.
    #[error("not a map of architecture to settings: {0}")]
    Format(String),
    /// An architecture's entry is neither a list of tolerations nor `{tolerations, nodeLabels}`.
    #[error("settings of architecture {arch:?}: {reason}")]
    Settings {
        /// The architecture.
        arch: String,
        /// What is wrong.
        reason: String,
    },
    /// A toleration that is not a valid Kubernetes `Toleration` object.
    #[error("invalid toleration for architecture {arch:?}: {reason}")]
    Toleration {
        /// The architecture.
        arch: String,
        /// What is wrong.
        reason: String,
    },
    /// An empty architecture name or node label key.
    #[error("empty {what} in the architecture settings")]
    Empty {
        /// `architecture` or `node label key`.
        what: &'static str,
    },
}

impl ArchitecturesError {
    /// A bounded label for the error.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Format(_) => "format",
            Self::Settings { .. } => "settings",
            Self::Toleration { .. } => "toleration",
            Self::Empty { .. } => "empty",
        }
    }
}

/// The long form of one architecture's entry.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Entry {
    #[serde(default)]
    tolerations: Option<Vec<Value>>,
    #[serde(default)]
    node_labels: Option<BTreeMap<String, String>>,
}

/// Parses the settings file: a YAML (or JSON) map from architecture to either its settings
/// `{tolerations: [...], nodeLabels: {key: value}}` or, the earlier format still accepted, just its
/// list of tolerations. An empty file or entry is empty. Each toleration must be a valid
/// Kubernetes `Toleration` object.
pub fn parse_architectures(text: &str) -> Result<Architectures, ArchitecturesError> {
    if text.trim().is_empty() {
        return Ok(Architectures::new());
    }
    let map: Option<BTreeMap<String, yaml_serde::Value>> =
        yaml_serde::from_str(text).map_err(|e| ArchitecturesError::Format(e.to_string()))?;
    let mut out = Architectures::new();
    for (arch, entry) in map.unwrap_or_default() {
        if arch.is_empty() {
            return Err(ArchitecturesError::Empty {
                what: "architecture",
            });
        }
        let settings_error = |reason: String| ArchitecturesError::Settings {
            arch: arch.clone(),
            reason,
        };
        let (tolerations, node_labels) = match entry {
            yaml_serde::Value::Null => (Vec::new(), BTreeMap::new()),
            list @ yaml_serde::Value::Sequence(_) => (
                yaml_serde::from_value(list).map_err(|e| settings_error(e.to_string()))?,
                BTreeMap::new(),
            ),
            map @ yaml_serde::Value::Mapping(_) => {
                let entry: Entry =
                    yaml_serde::from_value(map).map_err(|e| settings_error(e.to_string()))?;
                (
                    entry.tolerations.unwrap_or_default(),
                    entry.node_labels.unwrap_or_default(),
                )
            }
            _ => {
                return Err(settings_error(
                    "expected a list of tolerations or {tolerations, nodeLabels}".to_owned(),
                ))
            }
        };
        for toleration in &tolerations {
            let toleration_error = |reason: String| ArchitecturesError::Toleration {
                arch: arch.clone(),
                reason,
            };
            if !toleration.is_object() {
                return Err(toleration_error("not an object".to_owned()));
            }
            serde_json::from_value::<k8s_openapi::api::core::v1::Toleration>(toleration.clone())
                .map_err(|e| toleration_error(e.to_string()))?;
        }
        if node_labels.keys().any(String::is_empty) {
            return Err(ArchitecturesError::Empty {
                what: "node label key",
            });
        }
        out.insert(
            arch,
            ArchSettings {
                tolerations,
                node_labels,
            },
        );
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_the_list_format() {
        let text = "arm64:\n  - key: arch\n    value: arm64\n    effect: NoSchedule\n  - operator: Exists\n    key: x\namd64: []\nriscv64:\n";
        let map = parse_architectures(text).unwrap();
        assert_eq!(
            map["arm64"].tolerations,
            vec![
                json!({"key": "arch", "value": "arm64", "effect": "NoSchedule"}),
                json!({"operator": "Exists", "key": "x"})
            ]
        );
        assert_eq!(map["amd64"], ArchSettings::default());
        assert_eq!(map["riscv64"], ArchSettings::default());
        assert!(parse_architectures("  \n").unwrap().is_empty());
        assert!(parse_architectures("{\"arm64\": [{\"key\": \"a\"}]}").is_ok());
    }

    #[test]
    fn parses_the_settings_format() {
        let text = "arm64:\n  tolerations: [{key: arch, value: arm64, effect: NoSchedule}]\n  nodeLabels:\n    node.example.com/pool: graviton\namd64:\n  nodeLabels: {zone: a}\ns390x: {}\n";
        let map = parse_architectures(text).unwrap();
        assert_eq!(map["arm64"].tolerations.len(), 1);
        assert_eq!(
            map["arm64"].node_label_expressions().collect::<Vec<_>>(),
            [json!({"key": "node.example.com/pool", "operator": "In", "values": ["graviton"]})]
        );
        assert!(map["amd64"].tolerations.is_empty());
        assert_eq!(map["amd64"].node_labels["zone"], "a");
        assert_eq!(map["s390x"], ArchSettings::default());
    }

    #[test]
    fn rejects_bad_settings() {
        for (bad, kind) in [
            ("- a\n- b\n", "format"),
            ("arm64: x\n", "settings"),
            ("arm64: [1]\n", "toleration"),
            ("arm64: [{tolerationSeconds: soon}]\n", "toleration"),
            ("arm64: {tolerations: [], nodeLables: {a: b}}\n", "settings"),
            ("arm64: {nodeLabels: {a: [b]}}\n", "settings"),
            ("arm64: {nodeLabels: {'': b}}\n", "empty"),
            ("'': []\n", "empty"),
        ] {
            assert_eq!(
                parse_architectures(bad).map_err(|e| e.kind()),
                Err(kind),
                "{bad:?}"
            );
        }
    }
}
