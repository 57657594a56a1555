//! A Node as the node reflector stores it: name, arch/OS/Windows-build labels, taints, Ready.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

use super::meta::{bounded, nullable, RawObject};
use super::{ARCH_LABEL, OS_LABEL, WINDOWS_BUILD_LABEL};
use crate::Platform;

/// At most this many taints are kept per node (more are dropped; ours are looked for first).
const MAX_TAINTS: usize = 64;
/// At most this many labels are kept per node (image selection reads them; NFD labels a node
/// with a few dozen).
const MAX_LABELS: usize = 256;

/// A node taint.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Taint {
    /// Key.
    #[serde(default, deserialize_with = "nullable")]
    pub key: String,
    /// Value (empty when unset).
    #[serde(default, deserialize_with = "nullable")]
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    #[serde(default, deserialize_with = "nullable")]
    pub effect: String,
}

/// What the controllers and the admission side know of a node.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(from = "RawNode")]
pub struct NodeRecord {
    metadata: ObjectMeta,
    /// `kubernetes.io/arch`.
    pub arch: Option<String>,
    /// `kubernetes.io/os`.
    pub os: Option<String>,
    /// `node.kubernetes.io/windows-build`.
    pub windows_build: Option<String>,
    /// `spec.taints` (bounded).
    pub taints: Vec<Taint>,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// `metadata.labels` (at most [`MAX_LABELS`], values bounded), for image selection; shared
    /// with the nodes selection evaluates, so an admission copies none of them.
    pub labels: std::sync::Arc<std::collections::BTreeMap<String, String>>,
}

impl NodeRecord {
    /// The node's name.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// `os/arch` from the labels (OS `linux` when the label is missing, as the kubelet sets it).
    pub fn platform(&self) -> Option<Platform> {
        let arch = self.arch.as_deref()?;
        Some(Platform::new(
            self.os.as_deref().unwrap_or("linux"),
            arch,
            None,
        ))
    }

    /// A record built in code (tests, benches).
    pub fn new(name: &str, arch: Option<&str>, os: Option<&str>, taints: Vec<Taint>) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            arch: arch.map(str::to_owned),
            os: os.map(str::to_owned),
            windows_build: None,
            taints,
            ready: true,
            unschedulable: false,
            labels: std::sync::Arc::new(
                [(ARCH_LABEL, arch), (OS_LABEL, os)]
                    .into_iter()
                    .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
                    .collect(),
            ),
        }
    }
}

type RawNode = RawObject<RawSpec, RawStatus>;

#[derive(Default, Deserialize)]
struct RawSpec {
    #[serde(default, deserialize_with = "nullable")]
    taints: Vec<Taint>,
    #[serde(default, deserialize_with = "nullable")]
    unschedulable: bool,
}

#[derive(Default, Deserialize)]
struct RawStatus {
    #[serde(default, deserialize_with = "nullable")]
    conditions: Vec<RawCondition>,
}

#[derive(Default, Deserialize)]
struct RawCondition {
    #[serde(default, rename = "type", deserialize_with = "nullable")]
    kind: String,
    #[serde(default, deserialize_with = "nullable")]
    status: String,
}

impl From<RawNode> for NodeRecord {
    fn from(raw: RawNode) -> Self {
        let label = |key: &str| raw.metadata.labels.get(key).map(|value| bounded(value));
        let mut taints = raw.spec.taints;
        if taints.len() > MAX_TAINTS {
            // Keep ours whatever their position, then the first others.
            taints.sort_by_key(|taint| taint.key != crate::taints::TAINT_KEY);
            taints.truncate(MAX_TAINTS);
        }
        for taint in &mut taints {
            taint.key = bounded(&taint.key);
            taint.value = bounded(&taint.value);
            taint.effect = bounded(&taint.effect);
        }
        Self {
            arch: label(ARCH_LABEL),
            os: label(OS_LABEL),
            windows_build: label(WINDOWS_BUILD_LABEL),
            ready: raw
                .status
                .conditions
                .iter()
                .any(|c| c.kind == "Ready" && c.status == "True"),
            unschedulable: raw.spec.unschedulable,
            labels: std::sync::Arc::new(
                raw.metadata
                    .labels
                    .iter()
                    .take(MAX_LABELS)
                    .map(|(k, v)| (bounded(k), bounded(v)))
                    .collect(),
            ),
            metadata: raw.metadata.identity(),
            taints,
        }
    }
}

super::resource!(NodeRecord, "Node", "nodes", ClusterResourceScope);
