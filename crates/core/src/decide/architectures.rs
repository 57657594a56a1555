//! The per-architecture settings (`--arch-tolerations-file`, chart value `architectures`): for
//! each architecture, the tolerations a pod that may run there gets, and the node labels it then
//! requires (step 9 in docs/architecture.md). The file is parsed by the `noe` crate's config.

use std::collections::BTreeMap;

use serde_json::{json, Value};

/// What one architecture adds to the pods that may run on it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ArchSettings {
    /// Kubernetes `Toleration` objects, kept as written (fields newer than our types survive).
    pub tolerations: Vec<Value>,
    /// Node labels required on nodes of this architecture (`key In [value]`), like
    /// kube-arch-webhook's `requireNodeLabels`.
    pub node_labels: BTreeMap<String, String>,
}

impl ArchSettings {
    /// The required expressions of [`ArchSettings::node_labels`], in key order.
    pub fn node_label_expressions(&self) -> impl Iterator<Item = Value> + '_ {
        self.node_labels
            .iter()
            .map(|(key, value)| json!({"key": key, "operator": "In", "values": [value]}))
    }
}

/// Architecture → settings.
pub type Architectures = BTreeMap<String, ArchSettings>;
