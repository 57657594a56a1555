//! The platform cache: bounded in entries and in bytes, TTL per flag (digest references are
//! immutable and live longer), keyed by the reference after proxies plus a fingerprint of the
//! ordered credential candidates; concurrent misses for one key make one upstream lookup;
//! failures are remembered briefly.
//!
//! Successful lookups live in a [`quick_cache`] cache (S3-FIFO eviction, entries held inline in
//! a slab: about 40 bytes of bookkeeping per entry, where moka spends about 400, which kept
//! 100k entries above the 64 MiB of docs/benchmarks.md, Memory), weighed so that both bounds
//! hold ([`CACHE_MAX_BYTES`]). Its placeholders give the single flight; the expiry instant is
//! stored in the entry and checked on read. Failures, few and short-lived, stay in a moka cache
//! with a TTL, bounded by their bytes.

use std::future::Future;
use std::time::{Duration, Instant};

mod entry;

pub use entry::Entry;
use entry::Interner;

use crate::metrics::Metrics;
use crate::{Config, Error, Resolution};

/// How long a failed lookup is answered from the cache (prevents 401 storms).
pub const FAILURE_TTL: Duration = Duration::from_secs(5);
/// Bound on the bytes of successful lookups held, besides the bound on their number: an entry
/// weighs `CACHE_MAX_BYTES / cache_max_entries` units per started share of its bytes, at least
/// one, so the cache never holds more than `cache_max_entries` entries nor (about) this many
/// bytes. A typical entry (platform set shared) weighs one unit at the default 100k entries.
pub const CACHE_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Bound on the bytes of remembered failures (their messages quote references and hosts).
pub const FAILURE_MAX_BYTES: u64 = 8 * 1024 * 1024;
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

/// A cached resolution, when it stops being served, and its weight in cache units.
#[derive(Clone, Debug)]
struct Cached {
    entry: Entry,
    expires: Instant,
    units: u64,
}

/// Weighs a cached entry by the units computed when it was stored.
#[derive(Clone, Copy, Debug)]
struct Units;

impl quick_cache::Weighter<Key, Cached> for Units {
    fn weight(&self, _key: &Key, cached: &Cached) -> u64 {
        cached.units
    }
}

/// Successful lookups and recent failures.
pub struct PlatformCache {
    ok: quick_cache::sync::Cache<Key, Cached, Units>,
    /// Bytes one weight unit stands for.
    unit_bytes: u64,
    ttl: Duration,
    digest_ttl: Duration,
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
            .field("entries", &self.ok.len())
            .finish_non_exhaustive()
    }
}

impl PlatformCache {
    pub fn new(config: &Config, metrics: Metrics) -> Self {
        let max = config.cache_max_entries.max(1);
        Self {
            ok: quick_cache::sync::Cache::with_weighter(
                usize::try_from(max).unwrap_or(usize::MAX),
                max,
                Units,
            ),
            unit_bytes: (CACHE_MAX_BYTES / max).max(1),
            ttl: config.cache_ttl,
            digest_ttl: config.cache_ttl.max(DIGEST_TTL),
            failures: moka::future::Cache::builder()
                .max_capacity(FAILURE_MAX_BYTES)
                .weigher(|_key: &Key, error: &Error| {
                    let bytes =
                        std::mem::size_of::<Error>().saturating_add(error.to_string().len());
                    u32::try_from(bytes).unwrap_or(u32::MAX)
                })
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

    /// The cached entry under `key`, or the compact form of the result of `load` (run once for
    /// concurrent callers; `resolved` is the reference it fetches). The entry gives the platforms
    /// as they are ([`Entry::platforms`]) or the whole [`Resolution`] rebuilt
    /// ([`Entry::resolution`]).
    pub async fn get_or_load<F>(&self, key: Key, resolved: &str, load: F) -> Result<Entry, Error>
    where
        F: Future<Output = Result<Resolution, Error>>,
    {
        self.metrics.cache_requests.inc();
        let guard = loop {
            match self.ok.get_value_or_guard_async(&key).await {
                Ok(cached) if cached.expires > Instant::now() => {
                    self.outcomes.hit.inc();
                    return Ok(cached.entry);
                }
                // Expired: drop it and take the loader's place (or wait for whoever did).
                Ok(_) => {
                    self.ok
                        .remove_if(&key, |cached| cached.expires <= Instant::now());
                }
                Err(guard) => break guard,
            }
        };
        // This caller loads. A load that failed just before (this caller may have waited for
        // it) is answered from the failure cache, so N waiters make one upstream lookup.
        if let Some(error) = self.failures.get(&key).await {
            self.outcomes.failure_hit.inc();
            return Err(error);
        }
        self.outcomes.miss.inc();
        match load.await {
            Ok(resolution) => {
                let entry = self.interner.entry(resolution, resolved);
                let ttl = if key.immutable {
                    self.digest_ttl
                } else {
                    self.ttl
                };
                let bytes = u64::try_from(entry.weight()).unwrap_or(u64::MAX);
                let now = Instant::now();
                let cached = Cached {
                    entry: entry.clone(),
                    expires: expiry(now, ttl),
                    units: bytes.div_ceil(self.unit_bytes).max(1),
                };
                // Refused only when the entry alone exceeds the capacity: it is still answered.
                let _ = guard.insert(cached);
                self.metrics
                    .cache_entries
                    .set(i64::try_from(self.ok.len()).unwrap_or(i64::MAX));
                Ok(entry)
            }
            Err(error) => {
                // Recorded before the guard is released to the next waiter.
                self.failures.insert(key, error.clone()).await;
                drop(guard);
                Err(error)
            }
        }
    }

    /// Counts `n` answers reused by a caller's own short-lived memo as requests and hits.
    pub fn count_hits(&self, n: u64) {
        self.metrics.cache_requests.inc_by(n);
        self.outcomes.hit.inc_by(n);
    }

    /// Entries currently held (expired ones included until they are evicted or read).
    pub fn entries(&self) -> u64 {
        u64::try_from(self.ok.len()).unwrap_or(u64::MAX)
    }
}

/// `now + ttl`; a TTL too large for the clock means a year (the entry is evicted long before).
fn expiry(now: Instant, ttl: Duration) -> Instant {
    const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);
    now.checked_add(ttl)
        .or_else(|| now.checked_add(YEAR))
        .unwrap_or(now)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Platform;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn cache(ttl: Duration, max: u64) -> PlatformCache {
        let config = Config {
            cache_ttl: ttl,
            cache_max_entries: max,
            ..Config::default()
        };
        let metrics = Metrics::new(&prometheus::Registry::new(), &config).unwrap();
        PlatformCache::new(&config, metrics)
    }

    fn resolution(image: &str) -> Resolution {
        Resolution {
            image: image.into(),
            resolved: image.into(),
            digest: format!("sha256:{}", "ab".repeat(32)),
            media_type: crate::manifest::OCI_INDEX.into(),
            credential_source: None,
            platforms: vec![Platform::new("linux", "arm64", None)],
        }
    }

    async fn load(
        cache: &PlatformCache,
        key: Key,
        image: &str,
        loads: &AtomicUsize,
        result: Result<Resolution, Error>,
    ) -> Result<Entry, Error> {
        cache
            .get_or_load(key, image, async {
                loads.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                result
            })
            .await
    }

    #[tokio::test]
    async fn concurrent_misses_load_once_and_hits_do_not_load() {
        let cache = cache(Duration::from_secs(60), 10);
        let image = "example.com/app:v1";
        let key = Key::new(image, 0, false);
        let loads = AtomicUsize::new(0);
        let results = futures::future::join_all(
            (0..16).map(|_| load(&cache, key, image, &loads, Ok(resolution(image)))),
        )
        .await;
        assert!(results.iter().all(Result::is_ok));
        assert_eq!(loads.load(Ordering::SeqCst), 1);
        let again = load(&cache, key, image, &loads, Ok(resolution(image))).await;
        assert_eq!(again.unwrap().platforms()[0].architecture, "arm64");
        assert_eq!(loads.load(Ordering::SeqCst), 1);
        assert_eq!(cache.entries(), 1);
    }

    #[tokio::test]
    async fn concurrent_misses_that_fail_load_once() {
        let cache = cache(Duration::from_secs(60), 10);
        let image = "example.com/broken:v1";
        let key = Key::new(image, 0, false);
        let loads = AtomicUsize::new(0);
        let error = Error::Status {
            reference: image.into(),
            registry: "example.com".into(),
            status: 500,
        };
        let results = futures::future::join_all(
            (0..16).map(|_| load(&cache, key, image, &loads, Err(error.clone()))),
        )
        .await;
        assert!(results.iter().all(Result::is_err));
        assert_eq!(loads.load(Ordering::SeqCst), 1);
        assert_eq!(cache.entries(), 0);
    }

    #[tokio::test]
    async fn an_expired_entry_is_loaded_again() {
        let cache = cache(Duration::from_millis(1), 10);
        let image = "example.com/app:v1";
        let key = Key::new(image, 0, false);
        let loads = AtomicUsize::new(0);
        load(&cache, key, image, &loads, Ok(resolution(image)))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        load(&cache, key, image, &loads, Ok(resolution(image)))
            .await
            .unwrap();
        assert_eq!(loads.load(Ordering::SeqCst), 2);
        // A digest reference lives at least DIGEST_TTL whatever the flag says.
        let pinned = Key::new(image, 0, true);
        load(&cache, pinned, image, &loads, Ok(resolution(image)))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        load(&cache, pinned, image, &loads, Ok(resolution(image)))
            .await
            .unwrap();
        assert_eq!(loads.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn the_cache_stays_bounded() {
        let cache = cache(Duration::from_secs(60), 100);
        let loads = AtomicUsize::new(0);
        for i in 0..1000 {
            let image = format!("example.com/app{i}:v1");
            let key = Key::new(&image, 0, false);
            cache
                .get_or_load(key, &image, async {
                    loads.fetch_add(1, Ordering::SeqCst);
                    Ok(resolution(&image))
                })
                .await
                .unwrap();
        }
        assert!(cache.entries() <= 100, "{} entries", cache.entries());
        assert_eq!(loads.load(Ordering::SeqCst), 1000);
    }

    #[tokio::test]
    async fn the_cache_stays_bounded_in_bytes() {
        // At the default entry bound, entries of the largest valid size (64 platforms, every
        // field at its length limit) are bounded by their bytes long before their number.
        let cache = cache(Duration::from_secs(60), 100_000);
        let field = "a".repeat(crate::platform::MAX_FIELD_LEN - 8);
        let version = "1".repeat(crate::platform::MAX_OS_VERSION_LEN);
        let inserted = 6_000u32;
        let mut set_bytes = 0;
        for i in 0..inserted {
            let image = format!("example.com/big{i}:v1");
            let mut big = resolution(&image);
            big.platforms = (0..64)
                .map(|j| {
                    Platform::new(
                        format!("{field}{i:08}"),
                        format!("{field}{j:08}"),
                        Some(&field),
                    )
                    .with_os_version(Some(&version))
                })
                .collect();
            set_bytes = big.platforms.iter().map(Platform::weight).sum::<usize>();
            cache
                .get_or_load(Key::new(&image, 0, false), &image, async { Ok(big) })
                .await
                .unwrap();
        }
        let held = cache.entries();
        assert!(held < u64::from(inserted), "{held} entries: no byte bound");
        // The interner holds at most 4 MiB of sets (those entries weigh little here).
        let bound = (CACHE_MAX_BYTES + 4 * 1024 * 1024) / set_bytes as u64 + 1;
        assert!(
            held <= bound,
            "{held} entries of {set_bytes} bytes (bound {bound})"
        );
    }
}
