//! The platform cache: bounded, TTL per flag (digest references are immutable and live longer),
//! keyed by the reference after proxies plus a fingerprint of the ordered credential candidates;
//! concurrent misses for one key make one upstream lookup; failures are remembered briefly.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod entry;

use entry::{Entry, Interner};

use crate::metrics::Metrics;
use crate::{Config, Error, Resolution};

/// How long a failed lookup is answered from the cache (prevents 401 storms).
pub const FAILURE_TTL: Duration = Duration::from_secs(5);
/// Digest references are immutable: at least this long, or `cache_ttl` if longer.
pub const DIGEST_TTL: Duration = Duration::from_secs(24 * 3600);

/// A cache key: a 128-bit keyed hash of the normalized reference after proxies and the
/// credential fingerprint. It holds no secret and no string (memory: 100k entries must stay
/// small); with a per-process random key, collisions are out of reach (about 2^-90 for 100k
/// entries) even for someone choosing image names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    hash: u128,
    immutable: bool,
}

impl Key {
    /// The key of `reference` (normalized, after proxies) looked up with credentials whose
    /// `credential::fingerprint` is `credentials`; `immutable` for digest references.
    pub fn new(reference: &str, credentials: u64, immutable: bool) -> Self {
        use std::hash::{Hash, Hasher};
        use std::sync::OnceLock;
        static KEYS: OnceLock<[(u64, u64); 2]> = OnceLock::new();
        let keys = KEYS.get_or_init(|| {
            [
                (rand::random(), rand::random()),
                (rand::random(), rand::random()),
            ]
        });
        let [low, high] = keys.map(|(k0, k1)| {
            // SipHash prefixed with a secret per-process seed (as `credential::fingerprint`).
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            k0.hash(&mut hasher);
            k1.hash(&mut hasher);
            reference.hash(&mut hasher);
            credentials.hash(&mut hasher);
            hasher.finish()
        });
        Self {
            hash: (u128::from(high) << 64) | u128::from(low),
            immutable,
        }
    }
}

struct PerKeyExpiry {
    ttl: Duration,
    digest_ttl: Duration,
}

impl moka::Expiry<Key, Entry> for PerKeyExpiry {
    fn expire_after_create(&self, key: &Key, _: &Entry, _: Instant) -> Option<Duration> {
        Some(if key.immutable {
            self.digest_ttl
        } else {
            self.ttl
        })
    }
}

/// Successful lookups and recent failures.
pub struct PlatformCache {
    ok: moka::future::Cache<Key, Entry>,
    interner: Interner,
    failures: moka::future::Cache<Key, Error>,
    outcomes: Outcomes,
    metrics: Metrics,
}

/// `noe_registry_cache_responses_total{cache}` children, resolved once.
struct Outcomes {
    hit: prometheus::IntCounter,
    miss: prometheus::IntCounter,
    failure_hit: prometheus::IntCounter,
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
            interner: Interner::default(),
            outcomes: Outcomes {
                hit: metrics.cache_responses.with_label_values(&["hit"]),
                miss: metrics.cache_responses.with_label_values(&["miss"]),
                failure_hit: metrics.cache_responses.with_label_values(&["failure_hit"]),
            },
            metrics,
        }
    }

    /// The cached resolution of `image` (fetched as `resolved`), or the result of `load` (run
    /// once for concurrent callers).
    pub async fn get_or_load<F>(
        &self,
        key: Key,
        image: &str,
        resolved: &str,
        load: F,
    ) -> Result<Arc<Resolution>, Error>
    where
        F: Future<Output = Result<Resolution, Error>>,
    {
        self.metrics.cache_requests.inc();
        // Fast path: a hit touches one map and allocates only the returned resolution.
        if let Some(entry) = self.ok.get(&key).await {
            self.outcomes.hit.inc();
            return Ok(Arc::new(entry.resolution(image, resolved)));
        }
        if let Some(error) = self.failures.get(&key).await {
            self.outcomes.failure_hit.inc();
            return Err(error);
        }
        let mut loaded = false;
        let result = self
            .ok
            .try_get_with(key, async {
                loaded = true;
                load.await
                    .map(|resolution| self.interner.entry(resolution, resolved))
            })
            .await;
        if loaded {
            self.outcomes.miss.inc();
            // moka counts lazily; settle so the gauge and `entries()` are exact after a load.
            self.ok.run_pending_tasks().await;
            self.metrics
                .cache_entries
                .set(i64::try_from(self.ok.entry_count()).unwrap_or(i64::MAX));
        } else {
            // Another caller's load, which this one waited for.
            self.outcomes.hit.inc();
        }
        match result {
            Ok(entry) => Ok(Arc::new(entry.resolution(image, resolved))),
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
}
