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
mod tests;
