//! What `noe explain` knows of a pod's surroundings without a cluster: the Namespaces and Nodes
//! of the file itself. A Namespace gives its `arch.noe.adevinta.com/preferred` label to the
//! pods of that namespace (as `--namespace-preference` would read it); a Node gives its
//! platform to the debug containers of the pods bound to it (as `--check-ephemeral-containers`
//! would read it).

use std::collections::BTreeMap;

use std::future::Future;
use std::pin::Pin;

use noe_core::decide::{Facts, NodeFacts, PREFERRED_LABEL};
use noe_webhook::facts::nodes::node_facts_json;
use noe_webhook::facts::{FactRequest, FactSource};
use serde_json::Value;

/// The facts a file states.
#[derive(Clone, Debug, Default)]
pub struct FileFacts {
    /// Namespace → its preferred-arch label.
    namespaces: BTreeMap<String, String>,
    nodes: BTreeMap<String, NodeFacts>,
}

impl FileFacts {
    /// The Namespaces and Nodes among `objects`.
    pub fn of(objects: &[Value]) -> Self {
        let mut facts = Self::default();
        for object in objects {
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            match object.get("kind").and_then(Value::as_str) {
                Some("Namespace") => {
                    let label = object
                        .pointer("/metadata/labels")
                        .and_then(|l| l.get(PREFERRED_LABEL))
                        .and_then(Value::as_str);
                    if let Some(arch) = label.filter(|a| !a.is_empty()) {
                        facts.namespaces.insert(name, arch.to_owned());
                    }
                }
                Some("Node") => {
                    facts.nodes.insert(name, node_facts_json(object));
                }
                _ => {}
            }
        }
        facts
    }

    /// Whether the file has `node`.
    pub fn has_node(&self, node: &str) -> bool {
        self.nodes.contains_key(node)
    }
}

impl FactSource for FileFacts {
    fn facts<'a>(
        &'a self,
        request: FactRequest<'a>,
    ) -> Pin<Box<dyn Future<Output = Facts> + Send + 'a>> {
        Box::pin(async move {
            Facts {
                namespace_preferred_arch: request
                    .namespace
                    .and_then(|n| self.namespaces.get(n))
                    .cloned(),
                node: request.node_name.and_then(|n| self.nodes.get(n)).cloned(),
                // The file's Nodes stand for the cluster's when it has any.
                cluster_archs: (!self.nodes.is_empty()).then(|| {
                    std::sync::Arc::new(
                        self.nodes
                            .values()
                            .filter_map(|node| node.arch.clone())
                            .collect(),
                    )
                }),
                ..Facts::default()
            }
        })
    }

    fn knows_nodes(&self) -> bool {
        true
    }

    fn knows_cluster(&self) -> bool {
        !self.nodes.is_empty()
    }
}
