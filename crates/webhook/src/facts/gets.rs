//! One cached, bounded GET per object name, for the facts read from cluster-scoped objects
//! (namespaces, nodes): answers are reused for a lifetime, a failure is remembered briefly so a
//! broken API costs one call per name per few seconds (never one per admission), concurrent
//! misses of one name make one GET, and both caches hold at most [`MAX_ENTRIES`] names.

use std::time::Duration;

use kube::Api;

use super::Failure;

/// Most names remembered, answered and failed each.
pub const MAX_ENTRIES: u64 = 10_000;

/// Cached GETs of objects of kind `K`, each answer turned into a `V` once.
#[derive(Clone)]
pub(crate) struct CachedGets<V: Clone + Send + Sync + 'static> {
    client: kube::Client,
    ok: moka::future::Cache<String, V>,
    failed: moka::future::Cache<String, ()>,
    timeout: Duration,
    /// `noe_hook_fact_errors_total`, when counted, and this fact's `fact` label value.
    errors: Option<prometheus::IntCounterVec>,
    fact: &'static str,
}

impl<V: Clone + Send + Sync + 'static> std::fmt::Debug for CachedGets<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedGets")
            .field("fact", &self.fact)
            .field("cached", &self.ok.entry_count())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl<V: Clone + Send + Sync + 'static> CachedGets<V> {
    /// Gets of the `fact` (a [`crate::metrics::fact`] value): answers kept `ttl`, failures
    /// `failure_ttl`, each GET bounded by `timeout`.
    pub(crate) fn new(
        client: kube::Client,
        fact: &'static str,
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
            fact,
        }
    }

    /// Counts failed reads in `errors` (`noe_hook_fact_errors_total`), once per failure
    /// remembered (not once per admission answered from it).
    pub(crate) fn with_error_counter(mut self, errors: prometheus::IntCounterVec) -> Self {
        self.errors = Some(errors);
        self
    }

    /// The answer for the object `name` (`convert` of the object, or of `None` when it does not
    /// exist); `None` while a failure to read it is remembered. A new failure is counted, handed
    /// to `failed` (to log it) and remembered.
    pub(crate) async fn get<K>(
        &self,
        name: &str,
        convert: impl FnOnce(Option<K>) -> V,
        failed: impl FnOnce(Failure),
    ) -> Option<V>
    where
        K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let key = name.to_owned();
        if self.failed.contains_key(&key) {
            return None;
        }
        let fetch = async {
            let api: Api<K> = Api::all(self.client.clone());
            Failure::get(&api, name, self.timeout).await.map(convert)
        };
        match self.ok.try_get_with(key.clone(), fetch).await {
            Ok(value) => Some(value),
            Err(failure) => {
                failed(*failure);
                if let Some(errors) = &self.errors {
                    errors.with_label_values(&[self.fact, failure.kind()]).inc();
                }
                self.failed.insert(key, ()).await;
                None
            }
        }
    }
}
