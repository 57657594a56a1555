//! What the admission learns about a pod's surroundings besides its images' platforms: the
//! pod's namespace, the node it is bound to, the cluster's nodes. The decision takes the answer
//! ([`crate::decide::Facts`]) as input and stays pure; a [`FactSource`] does the I/O, each part
//! opt-in and bounded, and says "unknown" rather than wait.

use futures::future::BoxFuture;

use crate::decide::Facts;

/// What the admission asks about one pod.
#[derive(Clone, Copy, Debug)]
pub struct FactRequest<'a> {
    /// The pod's namespace.
    pub namespace: &'a str,
    /// The node the pod is bound to (`spec.nodeName`), for debug containers added to it.
    pub node_name: Option<&'a str>,
}

/// Finds the facts of a pod's surroundings. Implementations answer from caches or bounded API
/// calls; the admission also bounds the whole call by its deadline, and an unknown fact is
/// `None`.
pub trait FactSource: Send + Sync + 'static {
    fn facts<'a>(&'a self, request: FactRequest<'a>) -> BoxFuture<'a, Facts>;
}

/// Knows nothing: every fact unknown (the default, and `noe explain` without a cluster).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoFacts;

impl FactSource for NoFacts {
    fn facts<'a>(&'a self, _request: FactRequest<'a>) -> BoxFuture<'a, Facts> {
        Box::pin(async { Facts::default() })
    }
}
