//! The namespaces opted in to discovered selection (label
//! `arch.noe.adevinta.com/image-compatibility: enabled`), read with a cached GET of the
//! Namespace as the namespace's preferred arch is (`crate::facts::namespace_preference`).

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Namespace;
use noe_core::selection::{DISCOVERY_ENABLED, DISCOVERY_KEY};

use super::NamespaceOptIn;
use crate::facts::namespace_preference;
use crate::facts::object_gets::ObjectGets;

/// Reads the opt-in label through the Kubernetes API. Cheap to clone.
#[derive(Clone, Debug)]
pub struct LabelledNamespaces {
    gets: ObjectGets<bool>,
}

impl LabelledNamespaces {
    /// With the namespace facts' lifetimes and timeout.
    pub fn new(client: kube::Client) -> Self {
        Self {
            gets: namespace_preference::gets(client),
        }
    }
}

fn opted_in(namespace: Option<Namespace>) -> bool {
    namespace
        .and_then(|n| n.metadata.labels)
        .and_then(|l| l.get(DISCOVERY_KEY).cloned())
        .is_some_and(|v| v == DISCOVERY_ENABLED)
}

impl NamespaceOptIn for LabelledNamespaces {
    fn enabled<'a>(&'a self, namespace: &'a str) -> BoxFuture<'a, Option<bool>> {
        Box::pin(async move {
            if !crate::facts::is_dns_label(namespace) {
                return Some(false);
            }
            self.gets
                .get(namespace, opted_in, |failure| {
                    tracing::warn!(namespace, reason = failure.kind(), error = %failure, "Namespace not read: image compatibility not checked");
                })
                .await
        })
    }
}
