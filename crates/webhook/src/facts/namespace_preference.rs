//! The namespace's preferred architecture (label `arch.noe.adevinta.com/preferred`, step 7 in
//! docs/architecture.md), read with a GET of the Namespace (RBAC `get namespaces`, no list, no
//! watch), cached: a namespace costs one API call per [`DEFAULT_TTL`], a failure is remembered
//! for [`DEFAULT_FAILURE_TTL`] so a broken API costs one call per namespace per few seconds,
//! never one per admission, and the cache holds at most [`MAX_ENTRIES`] namespaces.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;

use super::object_gets::{FactGets, ObjectGets, ObjectKind};
use crate::metrics::fact;
use noe_core::decide::PREFERRED_LABEL;

/// How long a namespace's label is reused.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// How long a failure is reused, the bound on one GET, and the most namespaces remembered
/// (each entry is a name and at most a short label value).
pub use super::object_gets::{DEFAULT_FAILURE_TTL, DEFAULT_TIMEOUT, MAX_ENTRIES};

/// Namespaces, read for their preferred architecture.
impl ObjectKind for Namespace {
    /// The namespace's label (`None`: no label, or no such namespace).
    type Value = Option<Arc<str>>;
    const FACT: &'static str = fact::NAMESPACE;
    const TTL: Duration = DEFAULT_TTL;
}

/// Reads namespaces' preferred architecture through the Kubernetes API. Cheap to clone.
pub type NamespacePreferences = FactGets<Namespace>;

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
