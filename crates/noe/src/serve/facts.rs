//! The admission's node facts ([`noe_webhook::facts::FactSource`]) answered by the controllers'
//! node reflector ([`noe_controller::NodeView`], `--watch-nodes`): the cluster's architectures
//! and the node a pod is bound to, read from memory (no API call on the admission path).

use std::sync::Arc;

use futures::future::BoxFuture;
use noe_controller::objects::NodeRecord;
use noe_controller::NodeView;
use noe_core::decide::{Facts, NodeFacts};
use noe_webhook::facts::{ClusterFacts, FactRequest, FactSource, NamespacePreferences, NodeGets};

use crate::config::FactSettings;

/// The facts the decision reads, as `settings` and a node reflector's view ask (`None`: none):
/// the server's admissions and gate controller, and `noe ungate`, decide with this one source.
/// Each part asked for needs the API: without it this fails rather than silently ignoring the
/// flag. `errors` counts the failed reads (`noe_hook_fact_errors_total`).
pub fn source(
    settings: FactSettings,
    client: Option<kube::Client>,
    errors: prometheus::IntCounterVec,
    nodes: Option<NodeView>,
) -> anyhow::Result<Option<Arc<dyn FactSource>>> {
    let cluster = cluster_facts(settings, client, errors)?;
    Ok(match (nodes, cluster) {
        (Some(nodes), Some(cluster)) => {
            Some(Arc::new(NodeViewFacts::over(nodes, Arc::new(cluster))))
        }
        (Some(nodes), None) => Some(Arc::new(NodeViewFacts::new(nodes))),
        (None, Some(cluster)) => Some(Arc::new(cluster)),
        (None, None) => None,
    })
}

/// Facts from the node reflector, over what another source knows (the namespace).
pub struct NodeViewFacts {
    nodes: NodeView,
    /// Asked for the rest; for the node only when the reflector does not know it.
    inner: Option<Arc<dyn FactSource>>,
}

impl NodeViewFacts {
    /// The reflector's facts alone.
    pub fn new(nodes: NodeView) -> Self {
        Self { nodes, inner: None }
    }

    /// The reflector's facts over `inner`'s: `inner` is asked for a node only when the
    /// reflector does not hold it (not listed yet, or just added).
    pub fn over(nodes: NodeView, inner: Arc<dyn FactSource>) -> Self {
        Self {
            nodes,
            inner: Some(inner),
        }
    }
}

/// The facts the admission reads from the cluster, `None` when none is asked for. Each asked for
/// needs the API: without it start-up fails rather than silently ignoring the flag.
fn cluster_facts(
    settings: FactSettings,
    client: Option<kube::Client>,
    errors: prometheus::IntCounterVec,
) -> anyhow::Result<Option<ClusterFacts>> {
    let FactSettings {
        namespace_preference,
        ephemeral_containers,
    } = settings;
    if !namespace_preference && !ephemeral_containers {
        return Ok(None);
    }
    let Some(client) = client else {
        anyhow::bail!(
            "--namespace-preference and --check-ephemeral-containers need Kubernetes API access (in a pod, or --kubeconfig)"
        );
    };
    let mut facts = ClusterFacts::new();
    if namespace_preference {
        facts = facts.with_namespaces(
            NamespacePreferences::new(client.clone()).with_error_counter(errors.clone()),
        );
    }
    if ephemeral_containers {
        facts = facts.with_nodes(Arc::new(NodeGets::new(client).with_error_counter(errors)));
    }
    Ok(Some(facts))
}

fn node_facts(node: &NodeRecord) -> NodeFacts {
    NodeFacts {
        arch: node.arch.clone(),
        os: node.os.clone(),
        windows_build: node.windows_build.clone(),
    }
}

impl FactSource for NodeViewFacts {
    fn knows_nodes(&self) -> bool {
        true
    }

    fn knows_namespaces(&self) -> bool {
        self.inner
            .as_ref()
            .is_some_and(|inner| inner.knows_namespaces())
    }

    fn knows_cluster(&self) -> bool {
        true
    }

    fn facts<'a>(&'a self, request: FactRequest<'a>) -> BoxFuture<'a, Facts> {
        let node = request
            .node_name
            .and_then(|name| self.nodes.node(name))
            .map(|node| node_facts(&node));
        let cluster_archs = self.nodes.archs();
        let Some(inner) = &self.inner else {
            return Box::pin(std::future::ready(Facts {
                node,
                cluster_archs,
                ..Facts::default()
            }));
        };
        let request = FactRequest {
            node_name: request.node_name.filter(|_| node.is_none()),
            ..request
        };
        if request.namespace.is_none() && request.node_name.is_none() {
            // Nothing the other source could add: answered from memory.
            return Box::pin(std::future::ready(Facts {
                node,
                cluster_archs,
                ..Facts::default()
            }));
        }
        Box::pin(async move {
            let mut facts = inner.facts(request).await;
            if node.is_some() {
                facts.node = node;
            }
            facts.cluster_archs = cluster_archs;
            facts
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Mutex;

    use super::*;

    /// Knows the namespace's preference and every node as `riscv64`; records what it is asked.
    #[derive(Default)]
    struct Scripted {
        asked: Mutex<Vec<Option<String>>>,
    }

    impl FactSource for Scripted {
        fn facts<'a>(&'a self, request: FactRequest<'a>) -> BoxFuture<'a, Facts> {
            self.asked
                .lock()
                .unwrap()
                .push(request.node_name.map(str::to_owned));
            Box::pin(std::future::ready(Facts {
                namespace_preferred_arch: Some("arm64".into()),
                node: request.node_name.map(|_| NodeFacts {
                    arch: Some("riscv64".into()),
                    ..NodeFacts::default()
                }),
                ..Facts::default()
            }))
        }
    }

    fn view() -> NodeView {
        NodeView::from_records(vec![
            NodeRecord::new("a1", Some("amd64"), Some("linux"), vec![]),
            NodeRecord::new("w1", Some("amd64"), Some("windows"), vec![]),
            NodeRecord::new("r1", Some("arm64"), None, vec![]),
        ])
    }

    fn request<'a>(node: Option<&'a str>) -> FactRequest<'a> {
        FactRequest {
            namespace: Some("team-a"),
            node_name: node,
        }
    }

    #[tokio::test]
    async fn the_reflector_answers_nodes_and_archs() {
        let facts = NodeViewFacts::new(view());
        let answer = facts.facts(request(Some("w1"))).await;
        assert_eq!(
            answer.node,
            Some(NodeFacts {
                arch: Some("amd64".into()),
                os: Some("windows".into()),
                windows_build: None,
            })
        );
        let archs: BTreeSet<String> = ["amd64".into(), "arm64".into()].into();
        assert_eq!(answer.cluster_archs.as_deref(), Some(&archs));
        assert_eq!(facts.facts(request(Some("gone"))).await.node, None);
        assert_eq!(
            facts.facts(request(None)).await.namespace_preferred_arch,
            None
        );
    }

    #[tokio::test]
    async fn another_source_is_asked_for_what_the_reflector_does_not_hold() {
        let inner = Arc::new(Scripted::default());
        let facts = NodeViewFacts::over(view(), inner.clone());
        let known = facts.facts(request(Some("r1"))).await;
        assert_eq!(known.node.unwrap().arch.as_deref(), Some("arm64"));
        assert_eq!(known.namespace_preferred_arch.as_deref(), Some("arm64"));
        assert!(known.cluster_archs.is_some());
        let unknown = facts.facts(request(Some("new-node"))).await;
        assert_eq!(unknown.node.unwrap().arch.as_deref(), Some("riscv64"));
        assert_eq!(
            *inner.asked.lock().unwrap(),
            [None, Some("new-node".to_owned())],
            "the node the reflector holds is not asked for"
        );
    }
}
