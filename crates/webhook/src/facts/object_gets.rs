//! The facts read from cluster-scoped objects (namespaces, nodes) through the one cached GET
//! ([`crate::cached_gets`]), each new failure counted in `noe_hook_fact_errors_total`.

use std::time::Duration;

use kube::Api;
use noe_core::clock::Clock;

use super::Failure;
use crate::cached_gets::{self, Missed};

pub use crate::cached_gets::MAX_ENTRIES;

/// How long a failure to read an object is reused.
pub const DEFAULT_FAILURE_TTL: Duration = Duration::from_secs(5);
/// Bound on one GET.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// A kind of cluster-scoped object (implemented on its k8s-openapi type) read for a fact: the
/// `fact` label value of its failures, what an answer keeps of the object, and the default
/// lifetimes of answers and failures.
pub trait ObjectKind: Send + Sync + 'static {
    /// What an answer keeps (of the object, or of its absence).
    type Value: Clone + Send + Sync + 'static;
    /// A [`crate::metrics::fact`] value.
    const FACT: &'static str;
    const TTL: Duration;
    const FAILURE_TTL: Duration = DEFAULT_FAILURE_TTL;
    const TIMEOUT: Duration = DEFAULT_TIMEOUT;
}

/// A fact read with one cached GET of each object of kind `K` (namespaces, nodes). Cheap to
/// clone.
#[derive(derive_more::Debug)]
#[debug("FactGets {{ gets: {gets:?} }}")]
pub struct FactGets<K: ObjectKind> {
    pub(crate) gets: ObjectGets<K::Value>,
}

impl<K: ObjectKind> Clone for FactGets<K> {
    fn clone(&self) -> Self {
        Self {
            gets: self.gets.clone(),
        }
    }
}

impl<K: ObjectKind> FactGets<K> {
    /// With the kind's default lifetimes and timeout.
    pub fn new(client: kube::Client) -> Self {
        Self::with_limits(client, K::TTL, K::FAILURE_TTL, K::TIMEOUT)
    }

    pub fn with_limits(
        client: kube::Client,
        ttl: Duration,
        failure_ttl: Duration,
        timeout: Duration,
    ) -> Self {
        Self {
            gets: ObjectGets::new(client, K::FACT, ttl, failure_ttl, timeout),
        }
    }

    /// Counts failed reads in `errors` (`noe_hook_fact_errors_total`), once per failure
    /// remembered (not once per admission answered from it).
    pub fn with_error_counter(mut self, errors: prometheus::IntCounterVec) -> Self {
        self.gets = self.gets.with_error_counter(errors);
        self
    }

    /// Lifetimes measured on `clock` (tests move a manual one).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.gets = self.gets.with_clock(clock);
        self
    }
}

/// Cached GETs of cluster-scoped objects, each answer turned into a `V` once.
#[derive(Clone, derive_more::Debug)]
#[debug("ObjectGets {{ fact: {fact:?}, cache: {cache:?}, timeout: {timeout:?}, .. }}")]
pub(crate) struct ObjectGets<V: Clone + Send + Sync + 'static> {
    client: kube::Client,
    cache: cached_gets::CachedGets<String, V, Failure>,
    timeout: Duration,
    /// `noe_hook_fact_errors_total`, when counted, and this fact's `fact` label value.
    errors: Option<prometheus::IntCounterVec>,
    fact: &'static str,
}

impl<V: Clone + Send + Sync + 'static> ObjectGets<V> {
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
            cache: cached_gets::CachedGets::new(ttl, failure_ttl),
            timeout,
            errors: None,
            fact,
        }
    }

    /// Lifetimes measured on `clock`.
    pub(crate) fn with_clock(mut self, clock: Clock) -> Self {
        self.cache = self.cache.with_clock(clock);
        self
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
        let fetch = async {
            let api: Api<K> = Api::all(self.client.clone());
            Failure::get(&api, name, self.timeout).await.map(convert)
        };
        match self.cache.get(name.to_owned(), fetch).await {
            Ok(value) => Some(value),
            Err(Missed::Remembered(_)) => None,
            Err(Missed::New(failure)) => {
                failed(failure);
                if let Some(errors) = &self.errors {
                    errors.with_label_values(&[self.fact, failure.kind()]).inc();
                }
                None
            }
        }
    }
}
