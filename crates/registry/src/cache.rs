//! The in-process platform cache: the first level of the hierarchy (in-process, then the shared
//! cache of [`crate::shared`], then the registry; docs/architecture.md, Caches).
//!
//! An entry is keyed by the image **as the caller wrote it** and a credential [`Scope`]: a warm
//! lookup is one keyed hash and one table read, with no reference parsing and no credential
//! matching (those happen only on a miss). Answers any pod may use (found anonymously or with
//! the node's own credentials) live under no scope; answers that needed a credential only some
//! pods have (a pod's pull secret, [`crate::CredentialCandidate::scoped`]) live under the scope
//! the caller named, so they are never served to another one.
//!
//! An entry holds the tag's manifest digest and that digest's platforms. A tag entry is fresh for
//! `--cache-ttl`; once expired it is kept (until evicted) so the next lookup revalidates it with
//! a HEAD and reuses its platforms when the digest did not move. Digest references are immutable
//! and fresh for at least [`DIGEST_TTL`].
//!
//! Successful lookups live in a [`quick_cache`] cache (S3-FIFO eviction, entries held inline in
//! a slab: about 40 bytes of bookkeeping per entry, where moka spends about 400, which kept
//! 100k entries above the 64 MiB of docs/benchmarks.md, Memory), weighed so that both bounds
//! hold ([`CACHE_MAX_BYTES`]). Its placeholders give the single flight; the expiry instant is
//! stored in the entry and checked on read. Failures, few and short-lived, stay in a moka cache
//! with a TTL, bounded by their bytes.

use std::future::Future;
use std::hash::{Hash, Hasher};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

mod entry;

use entry::Interner;
pub use entry::{Digest, Entry};

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

/// A keyed 128-bit hash under a per-process random key (SipHash-1-3 with its 128-bit output,
/// one pass over the value): no string is stored, and with a secret key collisions are out of
/// reach (about 2^-94 for 100k entries) even for someone choosing image names. The `siphasher`
/// crate for the 128-bit output: the standard library's SipHash gives 64 bits, and two of them
/// (what this did before) read every image name twice on the warm path. The webhook keys its
/// remembered answers with it too.
pub fn keyed_hash(value: &(impl Hash + ?Sized)) -> u128 {
    use siphasher::sip128::{Hasher128 as _, SipHasher13};
    static KEY: OnceLock<(u64, u64)> = OnceLock::new();
    let (k0, k1) = *KEY.get_or_init(|| (rand::random(), rand::random()));
    let mut hasher = SipHasher13::new_with_keys(k0, k1);
    value.hash(&mut hasher);
    hasher.finish128().into()
}

/// The credentials a lookup may use beyond the node's own, as an opaque identity: callers give
/// the same scope to lookups that may share answers found with
/// [`scoped`](crate::CredentialCandidate::scoped) credentials (the webhook: the pod's namespace
/// and the contents of its pull secrets). It holds no secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Scope(u128);

impl Scope {
    /// The scope identified by `value` (hashed under a per-process key).
    pub fn of(value: &(impl Hash + ?Sized)) -> Self {
        Self(keyed_hash(&("scope", value)))
    }
}

/// A cache key: the image as written and the scope it is looked up in (none: answers any
/// caller may use).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    hash: u128,
}

impl Key {
    pub fn new(image: &str, scope: Option<Scope>) -> Self {
        Self {
            hash: keyed_hash(&(image, scope)),
        }
    }
}

/// How an answer was found (`noe inspect` prints it as `answeredBy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Answered {
    /// A fresh entry of this process.
    Cache,
    /// The shared cache knew the tag's digest and its platforms for this credential scope.
    SharedCache,
    /// A HEAD of the manifest gave a digest whose platforms were known: no GET.
    Head,
    /// The manifest was fetched.
    Get,
    /// An entry of `--platform-overrides` answered: no registry was asked.
    Override,
}

impl Answered {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cache => "cache",
            Self::SharedCache => "shared-cache",
            Self::Head => "head",
            Self::Get => "get",
            Self::Override => "override",
        }
    }
}

/// What a load found: the entry to keep, whether it needed a scoped credential, and how.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub entry: Entry,
    /// Found with a credential only the caller's scope has: kept under that scope.
    pub scoped: bool,
    pub answered: Answered,
    /// Fresh for less than the cache's TTL (what the shared cache had left of it).
    pub fresh_for: Option<Duration>,
}

/// A cached resolution, when it stops being fresh, and its weight in cache units.
#[derive(Clone, Debug)]
struct Cached {
    entry: Entry,
    expires: Instant,
    units: u64,
    /// The node-level credentials' generation it was found in, when it was found with one of
    /// them: it is fresh only while the generation is the same.
    generation: Option<u64>,
}

/// The table's hash of a [`Key`]: the key is already a keyed hash, so its bits are used as they
/// are rather than hashed again.
#[derive(Clone, Copy, Debug, Default)]
struct KeyHashing;

impl std::hash::BuildHasher for KeyHashing {
    type Hasher = KeyHasher;

    fn build_hasher(&self) -> KeyHasher {
        KeyHasher(0)
    }
}

/// See [`KeyHashing`]: folds what it is given (a `u128`) into 64 bits.
#[derive(Clone, Copy, Debug)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word.iter_mut().zip(chunk).for_each(|(w, b)| *w = *b);
            self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(word);
        }
    }

    fn write_u128(&mut self, value: u128) {
        // The high half xored in: both halves are uniform and secret.
        self.0 = self.0.rotate_left(5) ^ (value as u64) ^ ((value >> 64) as u64);
    }
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
#[derive(derive_more::Debug)]
#[debug("PlatformCache {{ entries: {:?}, .. }}", ok.len())]
pub struct PlatformCache {
    ok: quick_cache::sync::Cache<Key, Cached, Units, KeyHashing>,
    /// Bytes one weight unit stands for.
    unit_bytes: u64,
    ttl: Duration,
    digest_ttl: Duration,
    interner: Interner,
    failures: moka::future::Cache<Key, Error>,
    outcomes: Outcomes,
    metrics: Metrics,
    /// The node-level credentials' generation (`Config::credentials_generation`).
    generation: Option<noe_credentials::Generation>,
    clock: noe_core::clock::Clock,
    /// Counts the changes of `ok` (bumped after each one): a [`Stamp`] of answers found at one
    /// count holds while it does not move.
    changes: std::sync::atomic::AtomicU64,
}

/// What many answers read together ([`Probe`]) depended on: the table as it was, the node-level
/// credentials, and the earliest instant one of them stops being fresh. While
/// [`PlatformCache::holds`] says so, a new probe of the same images finds the same answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    changes: u64,
    generation: u64,
    until: Option<Instant>,
}

impl Stamp {
    /// A stamp of `changes` changes of a table, credentials of `generation`, answers fresh
    /// `until` (another source of answers than the platform cache, or a test's).
    pub fn new(changes: u64, generation: u64, until: Option<Instant>) -> Self {
        Self {
            changes,
            generation,
            until,
        }
    }
}

/// See [`PlatformCache::probe`].
pub struct Probe<'a> {
    cache: &'a PlatformCache,
    now: Instant,
    hits: u64,
    /// Read before any entry is.
    stamp: Stamp,
}

impl Probe<'_> {
    /// The fresh entry of `image` under no scope, else under `scope` (the scoped key is hashed
    /// only when the global one has no fresh answer).
    pub fn fresh(&mut self, image: &str, scope: Option<Scope>) -> Option<Entry> {
        let cache = self.cache;
        let now = self.now;
        let get = |key: Key| cache.ok.get(&key).filter(|c| cache.is_fresh(c, now));
        let found = get(Key::new(image, None))
            .or_else(|| scope.and_then(|s| get(Key::new(image, Some(s)))))?;
        self.hits = self.hits.saturating_add(1);
        self.stamp.until = Some(
            self.stamp
                .until
                .map_or(found.expires, |until| until.min(found.expires)),
        );
        Some(found.entry)
    }

    /// What the answers found so far depend on (see [`Stamp`]).
    pub fn stamp(&self) -> Stamp {
        self.stamp
    }
}

impl Drop for Probe<'_> {
    fn drop(&mut self) {
        if self.hits > 0 {
            self.cache.metrics.cache_requests.inc_by(self.hits);
            self.cache.outcomes.hit.inc_by(self.hits);
        }
    }
}

/// `noe_registry_cache_responses_total{cache}` children, resolved once.
struct Outcomes {
    hit: prometheus::IntCounter,
    miss: prometheus::IntCounter,
    failure_hit: prometheus::IntCounter,
}

impl PlatformCache {
    pub fn new(config: &Config, metrics: Metrics) -> Self {
        let max = config.cache_max_entries.max(1);
        Self {
            ok: quick_cache::sync::Cache::with(
                usize::try_from(max).unwrap_or(usize::MAX),
                max,
                Units,
                KeyHashing,
                quick_cache::sync::DefaultLifecycle::default(),
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
            generation: config.credentials_generation.clone(),
            clock: config.clock.clone(),
            changes: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Notes a change of `ok`, after it is made (a probe that read the count before it sees a
    /// new count afterwards).
    fn changed(&self) {
        self.changes
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// Whether answers found together under `stamp` are still what a probe would find now: no
    /// entry changed since, the node-level credentials are the same, and none has expired.
    pub fn holds(&self, stamp: &Stamp) -> bool {
        self.changes.load(std::sync::atomic::Ordering::Acquire) == stamp.changes
            && self.generation() == stamp.generation
            && stamp.until.is_some_and(|until| self.clock.now() < until)
    }

    /// The node-level credentials' generation now (0 without one).
    fn generation(&self) -> u64 {
        self.generation
            .as_ref()
            .map_or(0, noe_credentials::Generation::current)
    }

    /// Whether `cached` may be served at `now`: before its expiry, and, when it was found with
    /// a node-level credential, while those credentials are unchanged.
    fn is_fresh(&self, cached: &Cached, now: Instant) -> bool {
        cached.expires > now && cached.generation.is_none_or(|g| g == self.generation())
    }

    /// The compact form of `resolution`, fetched as `target` (the reference after proxies).
    pub fn compact(&self, resolution: Resolution, target: &str) -> Entry {
        self.interner.entry(resolution, target)
    }

    /// `entry` found again by a revalidation, with `credential_source` (`None`: anonymously),
    /// at the mirror `host[:port]` or (`None`) the registry's server.
    pub fn found_again(
        &self,
        entry: &Entry,
        credential_source: Option<&str>,
        mirror: Option<&str>,
    ) -> Entry {
        entry.found_again(
            credential_source.map(|s| self.interner.source(s)),
            mirror.map(|m| self.interner.source(m)),
        )
    }

    /// The fresh entry of `image` under no scope, else under `scope`; counted as a request and a
    /// hit when found (a miss is counted by [`PlatformCache::get_or_load`]).
    pub fn fresh(&self, image: &str, scope: Option<Scope>) -> Option<Entry> {
        self.probe().fresh(image, scope)
    }

    /// A probe of many images at one instant, for a caller asking for many at once (the lookup
    /// endpoint: up to 256 keys per request): the clock is read once, and the hits are counted
    /// when the probe is dropped, with one increment of each counter (both are shared by every
    /// worker thread).
    pub fn probe(&self) -> Probe<'_> {
        let stamp = Stamp {
            changes: self.changes.load(std::sync::atomic::Ordering::Acquire),
            generation: self.generation(),
            until: None,
        };
        Probe {
            cache: self,
            now: self.clock.now(),
            hits: 0,
            stamp,
        }
    }

    /// The fresh entry of `image` in `scope`, or what `load` finds (run once for concurrent
    /// callers in the same scope). `load` is given the expired entry of the image, if one is
    /// still held, to revalidate. What it finds is kept under `scope` when it needed a scoped
    /// credential, else under no scope; `immutable` (a digest reference) keeps it fresh longer.
    pub async fn get_or_load<F, Fut>(
        &self,
        image: &str,
        scope: Option<Scope>,
        immutable: bool,
        load: F,
    ) -> Result<(Entry, Answered), Error>
    where
        F: FnOnce(Option<Entry>) -> Fut,
        Fut: Future<Output = Result<Loaded, Error>>,
    {
        self.metrics.cache_requests.inc();
        let key = Key::new(image, scope);
        let global = Key::new(image, None);
        let mut stale = None;
        let guard = loop {
            if scope.is_some() {
                // Another caller may have found an answer any scope may use meanwhile.
                if let Some(cached) = self.ok.get(&global) {
                    if self.is_fresh(&cached, self.clock.now()) {
                        self.outcomes.hit.inc();
                        return Ok((cached.entry, Answered::Cache));
                    }
                    stale = Some(cached.entry);
                }
            }
            match self.ok.get_value_or_guard_async(&key).await {
                Ok(cached) if self.is_fresh(&cached, self.clock.now()) => {
                    self.outcomes.hit.inc();
                    return Ok((cached.entry, Answered::Cache));
                }
                // Expired: revalidate it, unless it failed just now.
                Ok(cached) => {
                    if let Some(error) = self.failures.get(&key).await {
                        self.outcomes.failure_hit.inc();
                        return Err(error);
                    }
                    let expires = cached.expires;
                    self.ok.remove_if(&key, |c| c.expires == expires);
                    self.changed();
                    stale = Some(cached.entry);
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
        // Read before the load: a change during it makes the answer stale at once.
        let generation = self.generation();
        match load(stale.clone()).await {
            Ok(Loaded {
                entry,
                scoped,
                answered,
                fresh_for,
            }) => {
                let ttl = if immutable { self.digest_ttl } else { self.ttl };
                let ttl = fresh_for.map_or(ttl, |fresh| fresh.min(ttl));
                let generation = (entry.found_with_credential() && !scoped).then_some(generation);
                let cached = self.cached(entry.clone(), ttl, generation);
                if scoped || scope.is_none() {
                    // Refused only when the entry alone exceeds the capacity: still answered.
                    let _ = guard.insert(cached);
                } else {
                    self.ok.insert(global, cached);
                    drop(guard);
                }
                self.changed();
                self.metrics
                    .cache_entries
                    .set(i64::try_from(self.ok.len()).unwrap_or(i64::MAX));
                Ok((entry, answered))
            }
            Err(error) => {
                // Recorded before the guard is released to the next waiter; the expired entry
                // stays for the next revalidation.
                self.failures.insert(key, error.clone()).await;
                match stale {
                    Some(entry) if scope.is_none() => {
                        let _ = guard.insert(self.cached(entry, Duration::ZERO, None));
                        self.changed();
                    }
                    _ => drop(guard),
                }
                Err(error)
            }
        }
    }

    fn cached(&self, entry: Entry, ttl: Duration, generation: Option<u64>) -> Cached {
        let bytes = u64::try_from(entry.weight()).unwrap_or(u64::MAX);
        Cached {
            entry,
            expires: self.clock.expiry(ttl),
            units: bytes.div_ceil(self.unit_bytes).max(1),
            generation,
        }
    }

    /// How long a tag (or, `immutable`, a digest reference) stays fresh.
    pub fn ttl(&self, immutable: bool) -> Duration {
        if immutable {
            self.digest_ttl
        } else {
            self.ttl
        }
    }

    /// Entries currently held (expired ones included until they are evicted or revalidated).
    pub fn entries(&self) -> u64 {
        u64::try_from(self.ok.len()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "cache/tests.rs"]
mod tests;
