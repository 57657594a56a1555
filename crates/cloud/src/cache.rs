//! Tokens cached until shortly before they expire, one refresh in flight per key.
//!
//! When a cached token must be refreshed is the pure function [`refresh_at`]: a lifetime the
//! service announces is clamped to [`MIN_LIFETIME`]..=[`MAX_LIFETIME`], so an `expiresAt` in the
//! past (a clock skewed between us and the cloud) is retried soon instead of on every lookup, and
//! one absurdly far away never pins a token for days. A failure is remembered for
//! [`FAILURE_TTL`], so a broken identity does not turn every admission into a request to STS.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use noe_core::clock::Clock;

use crate::metrics::Metrics;
use crate::{Error, Provider};

/// The shortest time a token is used, even when its expiry is already past by our clock.
pub const MIN_LIFETIME: Duration = Duration::from_secs(60);
/// The longest time a token is used, whatever its expiry says (ECR's tokens last 12 hours).
pub const MAX_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// How long before its expiry a token is refreshed (at most half its lifetime).
pub const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);
/// How long a failed refresh is remembered before the next attempt.
pub const FAILURE_TTL: Duration = Duration::from_secs(10);

/// The most keys one cache holds (ACR caches one token per registry, and registry hosts come
/// from pod specs).
const MAX_KEYS: usize = 256;

/// When a token fetched at `now` that expires at `expires_at` must be refreshed.
pub fn refresh_at(now: SystemTime, expires_at: SystemTime) -> SystemTime {
    let remaining = expires_at
        .duration_since(now)
        .unwrap_or(Duration::ZERO)
        .clamp(MIN_LIFETIME, MAX_LIFETIME);
    let margin = REFRESH_MARGIN.min(remaining / 2);
    now + (remaining - margin)
}

struct Entry<V> {
    value: Result<V, Error>,
    fetched: SystemTime,
    until: SystemTime,
}

type Slot<V> = Arc<tokio::sync::Mutex<Option<Entry<V>>>>;

/// A keyed token cache with single-flight refresh.
#[derive(derive_more::Debug)]
#[debug("Cache {{ provider: {provider:?}, .. }}")]
pub(crate) struct Cache<V> {
    provider: Provider,
    clock: Clock,
    metrics: Metrics,
    slots: Mutex<HashMap<String, Slot<V>>>,
}

impl<V: Clone> Cache<V> {
    pub(crate) fn new(provider: Provider, clock: Clock, metrics: Metrics) -> Self {
        Self {
            provider,
            clock,
            metrics,
            slots: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn now(&self) -> SystemTime {
        self.clock.wall()
    }

    /// The cached value for `key`, or the one `fetch` gets (with its expiry). Concurrent callers
    /// for one key wait for a single `fetch`.
    pub(crate) async fn get_or_fetch<F, Fut>(&self, key: &str, fetch: F) -> Result<V, Error>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(V, SystemTime), Error>>,
    {
        self.get_or_fetch_until(key, fetch)
            .await
            .map(|(value, _)| value)
    }

    /// [`Cache::get_or_fetch`], with the time the value will be refreshed.
    pub(crate) async fn get_or_fetch_until<F, Fut>(
        &self,
        key: &str,
        fetch: F,
    ) -> Result<(V, SystemTime), Error>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(V, SystemTime), Error>>,
    {
        self.get_or_renew(key, |_| false, fetch).await
    }

    /// [`Cache::get_or_fetch_until`], a cached value for which `refused` holds counting as
    /// expired: a registry refused it. Callers that were refused the same value while a
    /// renewal ran get the renewed one (the renewal runs once).
    pub(crate) async fn get_or_renew<F, Fut>(
        &self,
        key: &str,
        refused: impl Fn(&V) -> bool,
        fetch: F,
    ) -> Result<(V, SystemTime), Error>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(V, SystemTime), Error>>,
    {
        let slot = self.slot(key);
        let mut entry = slot.lock().await;
        let now = self.clock.wall();
        if let Some(cached) = entry.as_ref() {
            let refused = cached.value.as_ref().is_ok_and(&refused);
            // A clock that went backwards past the fetch makes the entry stale too.
            if now < cached.until && now >= cached.fetched && !refused {
                self.metrics.cache(self.provider, true);
                return cached.value.clone().map(|value| (value, cached.until));
            }
        }
        self.metrics.cache(self.provider, false);
        let result = fetch().await;
        let now = self.clock.wall();
        let (value, until) = match result {
            Ok((value, expires_at)) => (Ok(value), refresh_at(now, expires_at)),
            Err(error) => {
                // Once per failed refresh (callers in between get the remembered error).
                tracing::warn!(provider = %self.provider, %error, "cloud credential refresh failed");
                (Err(error), now + FAILURE_TTL)
            }
        };
        *entry = Some(Entry {
            value: value.clone(),
            fetched: now,
            until,
        });
        value.map(|value| (value, until))
    }

    /// The slot of `key`, created when missing. When the cache is full, idle slots go first; if
    /// every slot is busy, the caller gets a slot of its own that is not kept.
    fn slot(&self, key: &str) -> Slot<V> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = slots.get(key) {
            return slot.clone();
        }
        if slots.len() >= MAX_KEYS {
            slots.retain(|_, slot| Arc::strong_count(slot) > 1);
        }
        let slot: Slot<V> = Arc::default();
        if slots.len() < MAX_KEYS {
            slots.insert(key.to_owned(), slot.clone());
        }
        slot
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    #[test]
    fn refresh_times() {
        let cases = [
            // (expires in, refresh after)
            ("an hour", at(3600), at(3600 - 300)),
            ("12 hours (ECR)", at(12 * 3600), at(12 * 3600 - 300)),
            ("four minutes: refresh at half", at(240), at(120)),
            ("already past: skewed clock", at(0), at(30)),
            ("long past", SystemTime::UNIX_EPOCH, at(30)),
            ("absurdly far", at(10 * 365 * 86_400), at(12 * 3600 - 300)),
        ];
        for (name, expires, want) in cases {
            assert_eq!(refresh_at(at(0), expires), want, "{name}");
        }
    }

    fn cache(clock: &Clock) -> Cache<String> {
        let metrics = Metrics::new(None).unwrap_or_else(|e| panic!("metrics: {e}"));
        Cache::new(Provider::Gcp, clock.clone(), metrics)
    }

    #[tokio::test]
    async fn cached_until_refresh_then_fetched_again() {
        let clock = Clock::manual_at(at(0));
        let cache = cache(&clock);
        let fetches = AtomicUsize::new(0);
        let fetch = |token: &'static str| {
            let fetches = &fetches;
            let clock = clock.clone();
            move || async move {
                fetches.fetch_add(1, Ordering::SeqCst);
                Ok((token.to_owned(), clock.wall() + Duration::from_secs(3600)))
            }
        };
        assert_eq!(
            cache.get_or_fetch("k", fetch("one")).await,
            Ok("one".into())
        );
        clock.advance(Duration::from_secs(3000));
        assert_eq!(
            cache.get_or_fetch("k", fetch("two")).await,
            Ok("one".into())
        );
        clock.advance(Duration::from_secs(301));
        assert_eq!(
            cache.get_or_fetch("k", fetch("two")).await,
            Ok("two".into())
        );
        assert_eq!(fetches.load(Ordering::SeqCst), 2);
        // A clock that jumps back before the fetch refreshes rather than trusting the entry.
        clock.set_wall(at(0));
        assert_eq!(
            cache.get_or_fetch("k", fetch("three")).await,
            Ok("three".into())
        );
    }

    #[tokio::test]
    async fn failures_are_remembered_briefly() {
        let clock = Clock::manual_at(at(0));
        let cache = cache(&clock);
        let failing = || async {
            Err::<(String, SystemTime), _>(Error::NotConfigured {
                provider: Provider::Gcp,
                reason: "x".into(),
            })
        };
        assert!(cache.get_or_fetch("k", failing).await.is_err());
        let unused = || async { Ok(("ok".to_owned(), at(3600))) };
        assert!(cache.get_or_fetch("k", unused).await.is_err());
        clock.advance(FAILURE_TTL);
        let ok = || async { Ok(("ok".to_owned(), at(3600))) };
        assert_eq!(cache.get_or_fetch("k", ok).await, Ok("ok".into()));
    }

    #[tokio::test]
    async fn one_refresh_in_flight() {
        let clock = Clock::manual_at(at(0));
        let cache = Arc::new(cache(&clock));
        let fetches = Arc::new(AtomicUsize::new(0));
        let (release, released) = tokio::sync::watch::channel(false);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..16 {
            let (cache, fetches, mut released) = (cache.clone(), fetches.clone(), released.clone());
            tasks.spawn(async move {
                cache
                    .get_or_fetch("k", || async move {
                        fetches.fetch_add(1, Ordering::SeqCst);
                        let _ = released.wait_for(|r| *r).await;
                        Ok(("t".to_owned(), at(3600)))
                    })
                    .await
            });
        }
        // Let every task reach the slot before the fetch completes.
        for _ in 0..64 {
            tokio::task::yield_now().await;
        }
        let _ = release.send(true);
        while let Some(result) = tasks.join_next().await {
            assert_eq!(result.ok().and_then(Result::ok), Some("t".to_owned()));
        }
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_refused_value_is_renewed_once() {
        let clock = Clock::manual_at(at(0));
        let cache = cache(&clock);
        let fetches = AtomicUsize::new(0);
        let fetch = |token: &'static str| {
            let fetches = &fetches;
            move || async move {
                fetches.fetch_add(1, Ordering::SeqCst);
                Ok((token.to_owned(), at(3600)))
            }
        };
        let refused = |v: &String| v == "one";
        assert_eq!(
            cache.get_or_fetch("k", fetch("one")).await,
            Ok("one".into())
        );
        let renewed = cache.get_or_renew("k", refused, fetch("two")).await;
        assert_eq!(renewed.map(|(v, _)| v), Ok("two".into()));
        // A second caller refused "one" meanwhile gets "two" without another fetch.
        let again = cache.get_or_renew("k", refused, fetch("three")).await;
        assert_eq!(again.map(|(v, _)| v), Ok("two".into()));
        assert_eq!(fetches.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn keys_are_bounded() {
        let clock = Clock::manual_at(at(0));
        let cache = cache(&clock);
        for i in 0..(MAX_KEYS + 50) {
            let key = format!("r{i}");
            let got = cache
                .get_or_fetch(&key, || async { Ok(("t".to_owned(), at(3600))) })
                .await;
            assert!(got.is_ok());
        }
        assert!(cache.len() <= MAX_KEYS, "{}", cache.len());
    }
}
