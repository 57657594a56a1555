//! The namespace's preferred architecture (label `arch.noe.adevinta.com/preferred`, step 7 in
//! docs/architecture.md), read with a GET of the Namespace (RBAC `get namespaces`, no list, no
//! watch), cached: a namespace costs one API call per [`DEFAULT_TTL`], a failure is remembered
//! for [`DEFAULT_FAILURE_TTL`] so a broken API costs one call per namespace per few seconds,
//! never one per admission, and the cache holds at most [`MAX_ENTRIES`] namespaces.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;

use crate::decide::PREFERRED_LABEL;

/// How long a namespace's label is reused.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// How long a failure to read a namespace is reused.
pub const DEFAULT_FAILURE_TTL: Duration = Duration::from_secs(5);
/// Bound on one GET.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);
/// Most namespaces remembered (each entry is a name and at most a short label value).
pub const MAX_ENTRIES: u64 = 10_000;

/// Reads namespaces' preferred architecture through the Kubernetes API. Cheap to clone.
#[derive(Clone)]
pub struct NamespacePreferences {
    client: kube::Client,
    /// Namespace → its label (`None`: no label, or no such namespace).
    ok: moka::future::Cache<String, Option<Arc<str>>>,
    failed: moka::future::Cache<String, ()>,
    timeout: Duration,
}

impl std::fmt::Debug for NamespacePreferences {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespacePreferences")
            .field("cached", &self.ok.entry_count())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Why a namespace could not be read (logged; the fact is then unknown).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Failure {
    #[error("forbidden (is `get namespaces` granted?)")]
    Forbidden,
    #[error("the Kubernetes API did not answer in time")]
    Timeout,
    #[error("the Kubernetes API failed")]
    Unavailable,
}

impl Failure {
    /// A bounded label value.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Forbidden => "forbidden",
            Self::Timeout => "timeout",
            Self::Unavailable => "unavailable",
        }
    }
}

impl NamespacePreferences {
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
        }
    }

    /// The label `arch.noe.adevinta.com/preferred` of `namespace`; `None` when it has none, does
    /// not exist, is not a valid namespace name, carries a value that is not a plausible
    /// architecture, or cannot be read now. Concurrent misses of one namespace make one GET.
    pub async fn preferred_arch(&self, namespace: &str) -> Option<String> {
        if !super::is_dns_label(namespace) {
            return None;
        }
        let key = namespace.to_owned();
        if self.failed.contains_key(&key) {
            return None;
        }
        match self
            .ok
            .try_get_with(key.clone(), self.fetch(namespace))
            .await
        {
            Ok(label) => label.as_deref().map(str::to_owned),
            Err(failure) => {
                tracing::warn!(
                    namespace,
                    reason = failure.kind(),
                    error = %failure,
                    "Namespace not read: its preferred architecture is unknown"
                );
                self.failed.insert(key, ()).await;
                None
            }
        }
    }

    async fn fetch(&self, name: &str) -> Result<Option<Arc<str>>, Failure> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let namespace = match tokio::time::timeout(self.timeout, api.get_opt(name)).await {
            Err(_) => return Err(Failure::Timeout),
            Ok(Err(kube::Error::Api(status))) if matches!(status.code, 401 | 403) => {
                return Err(Failure::Forbidden)
            }
            Ok(Err(_)) => return Err(Failure::Unavailable),
            Ok(Ok(None)) => return Ok(None),
            Ok(Ok(Some(namespace))) => namespace,
        };
        let value = namespace
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| super::label_value(labels.get(PREFERRED_LABEL)));
        Ok(value.map(Arc::from))
    }
}
