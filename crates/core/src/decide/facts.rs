//! What the admission's I/O found out: the platforms of the pod's images ([`Lookups`]) and its
//! surroundings ([`Facts`]). The decision takes both as input, so it stays pure. Every fact is
//! optional: absent means unknown, and the decision then does what it does without that fact.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::outcome::LookupError;
use crate::truth::Correction;
use crate::Platform;

/// The platforms of each image (keyed by the reference as written in the pod), or why they could
/// not be found. An image of [`Plan::images`](super::Plan::images) missing from the map counts as
/// a failed lookup.
pub type Lookups = BTreeMap<String, Result<Arc<[Platform]>, LookupError>>;

/// Facts about the pod's surroundings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// The `arch.noe.adevinta.com/preferred` label of the pod's namespace (step 7: after the pod's
    /// own label, before `--preferred-arch`).
    pub namespace_preferred_arch: Option<String>,
    /// The node the pod is bound to (ephemeral containers, [`check_ephemeral`](super::check_ephemeral)).
    pub node: Option<NodeFacts>,
    /// The architectures (`kubernetes.io/arch`) of the cluster's nodes, once they are known
    /// (`--watch-nodes`): with `--cluster-schedulable-archs=auto` they are the schedulable
    /// archs, and a pod that may only run on archs no node has gets a warning.
    pub cluster_archs: Option<Arc<BTreeSet<String>>>,
    /// Platform truth: by image (as written in the pod), the corrections known for the digest
    /// it resolved to ([`crate::truth`]); the platforms they prove false are not used.
    pub corrections: BTreeMap<String, Vec<Correction>>,
}

/// A node's platform, from its labels.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeFacts {
    /// `kubernetes.io/arch`.
    pub arch: Option<String>,
    /// `kubernetes.io/os`.
    pub os: Option<String>,
    /// `node.kubernetes.io/windows-build` (`major.minor.build`).
    pub windows_build: Option<String>,
}
