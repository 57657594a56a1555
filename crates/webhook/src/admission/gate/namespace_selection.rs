//! `--gate-namespace-selector`: whether a namespace's labels match, read with a GET of the
//! Namespace (RBAC `get namespaces`) through the facts' cached GETs: one API call per namespace
//! per [`TTL`], a failure remembered for [`FAILURE_TTL`], at most
//! [`crate::facts::namespace_preference::MAX_ENTRIES`] namespaces, each remembered as one boolean (never
//! its labels). A namespace that cannot be read is not known to match: its pods are not gated.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;

use super::selector::Selector;
use crate::facts::object_gets::ObjectGets;
use crate::metrics::fact;

/// How long a namespace's answer is reused.
pub const TTL: Duration = Duration::from_secs(30);
/// How long a failure to read a namespace is reused.
pub const FAILURE_TTL: Duration = Duration::from_secs(5);
/// Bound on one GET.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// Which namespaces `--gate-namespace-selector` selects. Cheap to clone.
#[derive(Clone, Debug)]
pub struct NamespaceSelection {
    selector: Selector,
    gets: ObjectGets<bool>,
}

impl NamespaceSelection {
    /// Reads namespaces with `client` and matches them against `selector`.
    pub fn new(client: kube::Client, selector: Selector) -> Self {
        Self {
            selector,
            gets: ObjectGets::new(client, fact::NAMESPACE, TTL, FAILURE_TTL, TIMEOUT),
        }
    }

    /// Counts failed reads in `errors` (`noe_hook_fact_errors_total`).
    pub fn with_error_counter(mut self, errors: prometheus::IntCounterVec) -> Self {
        self.gets = self.gets.with_error_counter(errors);
        self
    }

    /// Whether `namespace`'s labels match (a namespace that does not exist has none); `None`
    /// when it cannot be read now. The empty selector matches without a read.
    pub async fn selects(&self, namespace: &str) -> Option<bool> {
        if self.selector.is_empty() {
            return Some(true);
        }
        if !crate::facts::is_dns_label(namespace) {
            return None;
        }
        let selector = &self.selector;
        self.gets
            .get(
                namespace,
                |found: Option<Namespace>| {
                    let labels = found.and_then(|n| n.metadata.labels).unwrap_or_default();
                    selector.matches(|key| labels.get(key).map(String::as_str))
                },
                |failure| {
                    tracing::warn!(
                        namespace,
                        reason = failure.kind(),
                        error = %failure,
                        "Namespace not read: its pods are not gated (--gate-namespace-selector)"
                    );
                },
            )
            .await
    }
}
