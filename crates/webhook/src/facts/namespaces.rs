//! The namespace's preferred architecture (label `arch.noe.adevinta.com/preferred`, step 7 in
//! docs/architecture.md), read with a GET of the Namespace (RBAC `get namespaces`, no list, no
//! watch), cached: a namespace costs one API call per [`DEFAULT_TTL`], a failure is remembered
//! for [`DEFAULT_FAILURE_TTL`] so a broken API costs one call per namespace per few seconds,
//! never one per admission, and the cache holds at most [`MAX_ENTRIES`] namespaces.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;

use super::Failure;
use crate::decide::PREFERRED_LABEL;
use crate::metrics::fact;

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
    /// `noe_hook_fact_errors_total`, when counted.
    errors: Option<prometheus::IntCounterVec>,
}

impl std::fmt::Debug for NamespacePreferences {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespacePreferences")
            .field("cached", &self.ok.entry_count())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
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
            errors: None,
        }
    }

    /// Counts failed reads in `errors` (`noe_hook_fact_errors_total`), once per failure
    /// remembered (not once per admission answered from it).
    pub fn with_error_counter(mut self, errors: prometheus::IntCounterVec) -> Self {
        self.errors = Some(errors);
        self
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
                super::count(self.errors.as_ref(), fact::NAMESPACE, *failure);
                self.failed.insert(key, ()).await;
                None
            }
        }
    }

    async fn fetch(&self, name: &str) -> Result<Option<Arc<str>>, Failure> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let Some(namespace) = Failure::get(&api, name, self.timeout).await? else {
            return Ok(None);
        };
        let value = namespace
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| super::label_value(labels.get(PREFERRED_LABEL)));
        Ok(value.map(Arc::from))
    }
}
