//! The platform cache: bounded, TTL per flag (digest references are immutable and live longer),
//! keyed by the reference after proxies plus a fingerprint of the ordered credential candidates;
//! concurrent misses for one key make one upstream lookup; failures are remembered briefly.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::metrics::Metrics;
use crate::{Config, Error, Resolution};

/// How long a failed lookup is answered from the cache (prevents 401 storms).
pub const FAILURE_TTL: Duration = Duration::from_secs(5);
/// Digest references are immutable: at least this long, or `cache_ttl` if longer.
pub const DIGEST_TTL: Duration = Duration::from_secs(24 * 3600);

/// A cache key. It never holds a secret: credentials are a keyed fingerprint.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// The normalized reference after proxies.
    pub reference: String,
    /// `credential::fingerprint` of the ordered candidates.
    pub credentials: u64,
    /// True for digest references.
    pub immutable: bool,
}

struct PerKeyExpiry {
    ttl: Duration,
    digest_ttl: Duration,
}

impl moka::Expiry<Key, Arc<Resolution>> for PerKeyExpiry {
    fn expire_after_create(&self, key: &Key, _: &Arc<Resolution>, _: Instant) -> Option<Duration> {
        Some(if key.immutable {
            self.digest_ttl
        } else {
            self.ttl
        })
    }
}

/// Successful lookups and recent failures.
pub struct PlatformCache {
    ok: moka::future::Cache<Key, Arc<Resolution>>,
    failures: moka::future::Cache<Key, Error>,
    metrics: Metrics,
}

impl std::fmt::Debug for PlatformCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlatformCache")
            .field("entries", &self.ok.entry_count())
            .finish_non_exhaustive()
    }
}

impl PlatformCache {
    pub fn new(config: &Config, metrics: Metrics) -> Self {
        let max = config.cache_max_entries.max(1);
        Self {
            ok: moka::future::Cache::builder()
                .max_capacity(max)
                .expire_after(PerKeyExpiry {
                    ttl: config.cache_ttl,
                    digest_ttl: config.cache_ttl.max(DIGEST_TTL),
                })
                .build(),
            failures: moka::future::Cache::builder()
                .max_capacity(max)
                .time_to_live(FAILURE_TTL.min(config.cache_ttl.max(Duration::from_millis(1))))
                .build(),
            metrics,
        }
    }

    /// The cached resolution, or the result of `load` (run once for concurrent callers).
    pub async fn get_or_load<F>(&self, key: Key, load: F) -> Result<Arc<Resolution>, Error>
    where
        F: Future<Output = Result<Resolution, Error>>,
    {
        self.metrics.cache_requests.inc();
        if let Some(error) = self.failures.get(&key).await {
            self.outcome("failure_hit");
            return Err(error);
        }
        let mut loaded = false;
        let result = self
            .ok
            .try_get_with(key.clone(), async {
                loaded = true;
                load.await.map(Arc::new)
            })
            .await;
        self.outcome(if loaded { "miss" } else { "hit" });
        if loaded {
            // moka counts lazily; settle so the gauge and `entries()` are exact after a load.
            self.ok.run_pending_tasks().await;
            self.metrics
                .cache_entries
                .set(i64::try_from(self.ok.entry_count()).unwrap_or(i64::MAX));
        }
        match result {
            Ok(resolution) => Ok(resolution),
            Err(error) => {
                let error = (*error).clone();
                if loaded {
                    self.failures.insert(key, error.clone()).await;
                }
                Err(error)
            }
        }
    }

    /// Entries currently held (moka's estimate).
    pub fn entries(&self) -> u64 {
        self.ok.entry_count()
    }

    fn outcome(&self, outcome: &str) {
        self.metrics
            .cache_responses
            .with_label_values(&[outcome])
            .inc();
    }
}
