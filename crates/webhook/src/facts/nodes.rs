//! A node's platform (`kubernetes.io/arch`, `kubernetes.io/os`,
//! `node.kubernetes.io/windows-build`), for debug containers added to a pod bound to it (step 3
//! in docs/architecture.md).
//!
//! [`NodeLookup`] is the seam: [`NodeGets`] answers with a cached GET of the Node (RBAC
//! `get nodes`); a node reflector's view (the controller's `NodeView`) can answer instead, from
//! memory, when the process watches nodes anyway.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;

use super::object_gets::{FactGets, ObjectKind};
use crate::metrics::fact;
use noe_core::decide::{NodeFacts, ARCH_LABEL, OS_LABEL, WINDOWS_BUILD_LABEL};

/// How long a node's platform is reused (node labels of the platform do not change while the
/// node lives; a replaced node of the same name is seen within this).
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);
/// How long a failure is reused, the bound on one GET, and the most nodes remembered.
pub use super::object_gets::{DEFAULT_FAILURE_TTL, DEFAULT_TIMEOUT, MAX_ENTRIES};

/// Finds the platform of a node by name. An unknown node (absent, unreadable, not yet seen) is
/// `None`: the debug containers of its pods are then allowed unchecked.
pub trait NodeLookup: Send + Sync + 'static {
    fn node<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Option<NodeFacts>>;
}

/// The platform labels of a Node, each kept only when it is a plausible label value.
pub fn node_facts(node: &Node) -> NodeFacts {
    let labels = node.metadata.labels.as_ref();
    let label = |key: &str| super::label_value(labels.and_then(|l| l.get(key)));
    NodeFacts {
        arch: label(ARCH_LABEL),
        os: label(OS_LABEL),
        windows_build: label(WINDOWS_BUILD_LABEL),
    }
}

/// The platform labels of a Node as raw JSON (a Node in a file, `noe explain`).
pub fn node_facts_json(node: &serde_json::Value) -> NodeFacts {
    let label = |key: &str| {
        let value = node
            .pointer("/metadata/labels")
            .and_then(|labels| labels.get(key))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned);
        super::label_value(value.as_ref())
    };
    NodeFacts {
        arch: label(ARCH_LABEL),
        os: label(OS_LABEL),
        windows_build: label(WINDOWS_BUILD_LABEL),
    }
}

/// Nodes, read for their platform.
impl ObjectKind for Node {
    /// The node's platform (`None`: no such node).
    type Value = Option<Arc<NodeFacts>>;
    const FACT: &'static str = fact::NODE;
    const TTL: Duration = DEFAULT_TTL;
}

/// Nodes read with one GET each, cached. Cheap to clone.
pub type NodeGets = FactGets<Node>;

impl NodeLookup for NodeGets {
    fn node<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Option<NodeFacts>> {
        Box::pin(async move {
            if !super::is_dns_subdomain(name) {
                return None;
            }
            let convert = |node: Option<Node>| node.map(|node| Arc::new(node_facts(&node)));
            let facts = self
                .gets
                .get(name, convert, |failure| {
                    tracing::warn!(
                        node = name,
                        reason = failure.kind(),
                        error = %failure,
                        "Node not read: debug containers on it are not checked"
                    );
                })
                .await?;
            facts.as_deref().cloned()
        })
    }
}
