//! The namespace's preferred architecture (label `arch.noe.adevinta.com/preferred`, step 7 in
//! docs/architecture.md), read with a GET of the Namespace (RBAC `get namespaces`, no list, no
//! watch), cached: a namespace costs one API call per [`DEFAULT_TTL`], a failure is remembered
//! for [`DEFAULT_FAILURE_TTL`] so a broken API costs one call per namespace per few seconds,
//! never one per admission, and the cache holds at most [`MAX_ENTRIES`] namespaces.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;

use super::object_gets::ObjectGets;
use crate::metrics::fact;
use noe_core::decide::PREFERRED_LABEL;

/// How long a namespace's label is reused.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// How long a failure to read a namespace is reused.
pub const DEFAULT_FAILURE_TTL: Duration = Duration::from_secs(5);
/// Bound on one GET.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);
/// Most namespaces remembered (each entry is a name and at most a short label value).
pub use super::object_gets::MAX_ENTRIES;

/// Reads namespaces' preferred architecture through the Kubernetes API. Cheap to clone.
#[derive(Clone, Debug)]
pub struct NamespacePreferences {
    /// Namespace → its label (`None`: no label, or no such namespace).
    gets: ObjectGets<Option<Arc<str>>>,
}

/// Cached GETs of Namespaces with the default lifetimes and timeout, each answer turned into a
/// `V`: the preferred architecture's, and image selection's opt-in (`crate::selection::opt_in`).
pub(crate) fn gets<V: Clone + Send + Sync + 'static>(client: kube::Client) -> ObjectGets<V> {
    ObjectGets::new(
        client,
        fact::NAMESPACE,
        DEFAULT_TTL,
        DEFAULT_FAILURE_TTL,
        DEFAULT_TIMEOUT,
    )
}

impl NamespacePreferences {
    /// With the default lifetimes and timeout.
    pub fn new(client: kube::Client) -> Self {
        Self { gets: gets(client) }
    }

    pub fn with_limits(
        client: kube::Client,
        ttl: Duration,
        failure_ttl: Duration,
        timeout: Duration,
    ) -> Self {
        Self {
            gets: ObjectGets::new(client, fact::NAMESPACE, ttl, failure_ttl, timeout),
        }
    }

    /// Counts failed reads in `errors` (`noe_hook_fact_errors_total`), once per failure
    /// remembered (not once per admission answered from it).
    pub fn with_error_counter(mut self, errors: prometheus::IntCounterVec) -> Self {
        self.gets = self.gets.with_error_counter(errors);
        self
    }

    /// Lifetimes measured on `clock` (tests move a manual one).
    pub fn with_clock(mut self, clock: noe_core::clock::Clock) -> Self {
        self.gets = self.gets.with_clock(clock);
        self
    }

    /// The label `arch.noe.adevinta.com/preferred` of `namespace`; `None` when it has none, does
    /// not exist, is not a valid namespace name, carries a value that is not a plausible
    /// architecture, or cannot be read now. Concurrent misses of one namespace make one GET.
    pub async fn preferred_arch(&self, namespace: &str) -> Option<String> {
        if !super::is_dns_label(namespace) {
            return None;
        }
        let label = self
            .gets
            .get(namespace, preferred_label, |failure| {
                tracing::warn!(
                    namespace,
                    reason = failure.kind(),
                    error = %failure,
                    "Namespace not read: its preferred architecture is unknown"
                );
            })
            .await?;
        label.as_deref().map(str::to_owned)
    }
}

/// The namespace's `arch.noe.adevinta.com/preferred` label, when it is a plausible value.
fn preferred_label(namespace: Option<Namespace>) -> Option<Arc<str>> {
    let labels = namespace?.metadata.labels?;
    super::label_value(labels.get(PREFERRED_LABEL)).map(Arc::from)
}
