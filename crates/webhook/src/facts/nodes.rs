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
use kube::Api;

use super::Failure;
use crate::decide::{NodeFacts, ARCH_LABEL, OS_LABEL, WINDOWS_BUILD_LABEL};
use crate::metrics::fact;

/// How long a node's platform is reused (node labels of the platform do not change while the
/// node lives; a replaced node of the same name is seen within this).
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);
/// How long a failure to read a node is reused.
pub const DEFAULT_FAILURE_TTL: Duration = Duration::from_secs(5);
/// Bound on one GET.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);
/// Most nodes remembered.
pub const MAX_ENTRIES: u64 = 10_000;

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

/// Nodes read with one GET each, cached. Cheap to clone.
#[derive(Clone)]
pub struct NodeGets {
    client: kube::Client,
    /// Node → its platform (`None`: no such node).
    ok: moka::future::Cache<String, Option<Arc<NodeFacts>>>,
    failed: moka::future::Cache<String, ()>,
    timeout: Duration,
    /// `noe_hook_fact_errors_total`, when counted.
    errors: Option<prometheus::IntCounterVec>,
}

impl std::fmt::Debug for NodeGets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeGets")
            .field("cached", &self.ok.entry_count())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl NodeGets {
    /// With the default lifetimes and timeout.
    pub fn new(client: kube::Client) -> Self {
        Self::with_limits(client, DEFAULT_TTL, DEFAULT_FAILURE_TTL, DEFAULT_TIMEOUT)
    }

    pub fn with_limits(
        client: kube::Client,
        ttl: Duration,
        failure_ttl: Duration,
        timeout: Duration,
    ) -> Self {
        Self {
            client,
            ok: moka::future::Cache::builder()
                .max_capacity(MAX_ENTRIES)
                .time_to_live(ttl)
                .build(),
            failed: moka::future::Cache::builder()
                .max_capacity(MAX_ENTRIES)
                .time_to_live(failure_ttl)
                .build(),
            timeout,
            errors: None,
        }
    }

    /// Counts failed reads in `errors` (`noe_hook_fact_errors_total`), once per failure
    /// remembered (not once per admission answered from it).
    pub fn with_error_counter(mut self, errors: prometheus::IntCounterVec) -> Self {
        self.errors = Some(errors);
        self
    }

    async fn fetch(&self, name: &str) -> Result<Option<Arc<NodeFacts>>, Failure> {
        let api: Api<Node> = Api::all(self.client.clone());
        let node = Failure::get(&api, name, self.timeout).await?;
        Ok(node.map(|node| Arc::new(node_facts(&node))))
    }
}

impl NodeLookup for NodeGets {
    fn node<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Option<NodeFacts>> {
        Box::pin(async move {
            if !super::is_dns_subdomain(name) {
                return None;
            }
            let key = name.to_owned();
            if self.failed.contains_key(&key) {
                return None;
            }
            match self.ok.try_get_with(key.clone(), self.fetch(name)).await {
                Ok(facts) => facts.as_deref().cloned(),
                Err(failure) => {
                    tracing::warn!(
                        node = name,
                        reason = failure.kind(),
                        error = %failure,
                        "Node not read: debug containers on it are not checked"
                    );
                    super::count(self.errors.as_ref(), fact::NODE, *failure);
                    self.failed.insert(key, ()).await;
                    None
                }
            }
        })
    }
}
