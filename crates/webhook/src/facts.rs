//! What the admission learns about a pod's surroundings besides its images' platforms: the
//! pod's namespace, the node it is bound to, the cluster's nodes. The decision takes the answer
//! ([`noe_core::decide::Facts`]) as input and stays pure; a [`FactSource`] does the I/O, each part
//! opt-in and bounded, and says "unknown" rather than wait.
//!
//! The server's source is [`ClusterFacts`]: the namespace's `arch.noe.adevinta.com/preferred`
//! label through [`namespace_preference::NamespacePreferences`] (a cached GET of the Namespace), and a
//! node's platform through any [`nodes::NodeLookup`] (a cached GET of the Node,
//! [`nodes::NodeGets`], or a view of a node reflector).

pub mod namespace_preference;
pub mod nodes;
pub(crate) mod object_gets;

use std::sync::Arc;

use futures::future::BoxFuture;

pub use namespace_preference::NamespacePreferences;
pub use nodes::{NodeGets, NodeLookup};
use noe_core::decide::Facts;
pub use object_gets::{FactGets, ObjectKind};

/// Why a namespace or node could not be read: logged, counted in `noe_hook_fact_errors_total`
/// (the `reason` label), and the fact is then unknown.
pub use crate::cached_gets::Failure;

/// What the admission asks about one pod. A part that is `None` is not wanted.
#[derive(Clone, Copy, Debug, Default)]
pub struct FactRequest<'a> {
    /// The pod's namespace, when its preferred-arch label may decide (a pod whose arch
    /// constraint the decision writes, without a preference of its own).
    pub namespace: Option<&'a str>,
    /// The node the pod is bound to (`spec.nodeName`), for debug containers added to it.
    pub node_name: Option<&'a str>,
}

/// Finds the facts of a pod's surroundings. Implementations answer from caches or bounded API
/// calls; the admission also bounds the whole call by its deadline, and an unknown fact is
/// `None`.
pub trait FactSource: Send + Sync + 'static {
    fn facts<'a>(&'a self, request: FactRequest<'a>) -> BoxFuture<'a, Facts>;

    /// Whether this source can tell a node's platform at all. When it cannot, debug containers
    /// are not checked (and their images not looked up).
    fn knows_nodes(&self) -> bool {
        false
    }

    /// Whether this source can tell a namespace's preferred arch at all. When it cannot, pod
    /// creations do not ask for it (no timer, no allocation on the warm path).
    fn knows_namespaces(&self) -> bool {
        true
    }

    /// Whether this source knows the cluster's nodes (their architectures), which every pod
    /// creation's decision may use: it is then asked for every pod creation.
    fn knows_cluster(&self) -> bool {
        false
    }
}

/// Knows nothing: every fact unknown (the default, and `noe explain` without a cluster).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoFacts;

impl FactSource for NoFacts {
    fn facts<'a>(&'a self, _request: FactRequest<'a>) -> BoxFuture<'a, Facts> {
        Box::pin(async { Facts::default() })
    }

    fn knows_namespaces(&self) -> bool {
        false
    }
}

/// The server's facts: each part present only when its flag turned it on (each needs its own
/// RBAC: `get namespaces`, `get nodes`). Both parts are asked concurrently.
#[derive(Clone, Default)]
pub struct ClusterFacts {
    namespaces: Option<NamespacePreferences>,
    nodes: Option<Arc<dyn NodeLookup>>,
}

impl std::fmt::Debug for ClusterFacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterFacts")
            .field("namespaces", &self.namespaces)
            .field("nodes", &self.nodes.is_some())
            .finish()
    }
}

impl ClusterFacts {
    /// Knowing nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads the namespace's preferred-arch label through `namespaces`.
    #[must_use]
    pub fn with_namespaces(mut self, namespaces: NamespacePreferences) -> Self {
        self.namespaces = Some(namespaces);
        self
    }

    /// Reads the platform of a pod's node through `nodes`.
    #[must_use]
    pub fn with_nodes(mut self, nodes: Arc<dyn NodeLookup>) -> Self {
        self.nodes = Some(nodes);
        self
    }

    /// Whether any part is on.
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_none() && self.nodes.is_none()
    }
}

impl FactSource for ClusterFacts {
    fn facts<'a>(&'a self, request: FactRequest<'a>) -> BoxFuture<'a, Facts> {
        Box::pin(async move {
            let namespace = async {
                match (&self.namespaces, request.namespace) {
                    (Some(namespaces), Some(name)) => namespaces.preferred_arch(name).await,
                    _ => None,
                }
            };
            let node = async {
                match (&self.nodes, request.node_name) {
                    (Some(nodes), Some(name)) => nodes.node(name).await,
                    _ => None,
                }
            };
            let (namespace_preferred_arch, node) = futures::future::join(namespace, node).await;
            Facts {
                namespace_preferred_arch,
                node,
                ..Facts::default()
            }
        })
    }

    fn knows_nodes(&self) -> bool {
        self.nodes.is_some()
    }

    fn knows_namespaces(&self) -> bool {
        self.namespaces.is_some()
    }
}

/// Whether `name` is a DNS-1123 label (a namespace name): at most 63 lower-case alphanumerics
/// or `-`, starting and ending with an alphanumeric. Names that are not are never sent to the
/// API (the review's namespace comes from whoever reached the webhook port).
pub(crate) fn is_dns_label(name: &str) -> bool {
    name.len() <= 63 && is_dns_part(name)
}

/// Whether `name` is a DNS-1123 subdomain (a node name): at most 253 characters of labels
/// joined by `.`.
pub(crate) fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns_part)
}

fn is_dns_part(part: &str) -> bool {
    let bytes = part.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            alnum(first)
                && alnum(last)
                && bytes.iter().all(|b| alnum(b) || *b == b'-')
                && part.len() <= 63
        }
        _ => false,
    }
}

/// A label value kept as a fact (an architecture, an OS, a Windows build): at most 63
/// characters of `[A-Za-z0-9._-]` (what Kubernetes allows in a label value), else `None`.
pub(crate) fn label_value(value: Option<&String>) -> Option<String> {
    let value = value?;
    let valid = !value.is_empty()
        && value.len() <= 63
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    valid.then(|| value.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sent_to_the_api() {
        for good in ["a", "team-a", "x1", &"a".repeat(63)] {
            assert!(is_dns_label(good), "{good}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "A",
            "a.b",
            "a/b",
            "a b",
            &"a".repeat(64),
            "ä",
        ] {
            assert!(!is_dns_label(bad), "{bad}");
        }
        for good in ["node-1", "ip-10-0-1-2.eu-west-1.compute.internal"] {
            assert!(is_dns_subdomain(good), "{good}");
        }
        for bad in ["", "a..b", ".a", "a/b", "../x", &"a.".repeat(127)] {
            assert!(!is_dns_subdomain(bad), "{bad}");
        }
    }

    #[test]
    fn label_values_are_bounded() {
        let v = |s: &str| label_value(Some(&s.to_owned()));
        assert_eq!(v("arm64"), Some("arm64".to_owned()));
        assert_eq!(v("10.0.20348"), Some("10.0.20348".to_owned()));
        assert_eq!(v(""), None);
        assert_eq!(v("a b"), None);
        assert_eq!(v(&"a".repeat(64)), None);
        assert_eq!(label_value(None), None);
    }
}
