//! The crate's metrics; every label value comes from a bounded set (provider, step, result).

use prometheus::{IntCounterVec, Opts, Registry};

use crate::{Provider, Step};

/// Counters of token requests and cache use.
#[derive(Clone, Debug)]
pub struct Metrics {
    requests: IntCounterVec,
    cache: IntCounterVec,
}

impl Metrics {
    /// The metrics, registered on `registry` when one is given (tests and callers that export
    /// nothing pass `None`).
    pub fn new(registry: Option<&Registry>) -> Result<Self, prometheus::Error> {
        let requests = IntCounterVec::new(
            Opts::new(
                "noe_cloud_token_requests_total",
                "Requests made to obtain cloud registry credentials, by provider, step and result",
            ),
            &["provider", "step", "result"],
        )?;
        let cache = IntCounterVec::new(
            Opts::new(
                "noe_cloud_token_cache_total",
                "Cloud registry credential lookups answered from the cache (hit) or by a refresh (miss)",
            ),
            &["provider", "result"],
        )?;
        if let Some(registry) = registry {
            registry.register(Box::new(requests.clone()))?;
            registry.register(Box::new(cache.clone()))?;
        }
        Ok(Self { requests, cache })
    }

    pub(crate) fn request(&self, provider: Provider, step: Step, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.requests
            .with_label_values(&[provider.as_str(), step.label(), result])
            .inc();
    }

    pub(crate) fn cache(&self, provider: Provider, hit: bool) {
        let result = if hit { "hit" } else { "miss" };
        self.cache
            .with_label_values(&[provider.as_str(), result])
            .inc();
    }

    /// The count of requests with these labels (tests and `inspect`).
    pub fn requests(&self, provider: Provider, step: Step, ok: bool) -> u64 {
        let result = if ok { "ok" } else { "error" };
        self.requests
            .with_label_values(&[provider.as_str(), step.label(), result])
            .get()
    }
}
