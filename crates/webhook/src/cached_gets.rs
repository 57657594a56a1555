//! The one cached GET of what admissions read from the API server — namespaces, nodes, pull
//! secrets: an answer is reused for a lifetime, a failure is remembered briefly (a broken API or
//! a missing object costs one call per key per few seconds, never one per admission),
//! concurrent misses of one key make one GET, and each cache holds at most [`MAX_ENTRIES`] keys.
//! Lifetimes are measured on a [`Clock`], so they are tested without waiting for them.

use std::future::Future;
use std::hash::Hash;
use std::time::{Duration, Instant};

use noe_core::clock::Clock;

/// Most keys remembered, answered and failed each.
pub const MAX_ENTRIES: u64 = 10_000;

/// Why a GET gave no object: logged, counted, and the fact or credential is then unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Failure {
    #[error("forbidden (is `get` on it granted to noe's ServiceAccount?)")]
    Forbidden,
    #[error("the Kubernetes API did not answer in time")]
    Timeout,
    #[error("the Kubernetes API failed")]
    Unavailable,
}

impl Failure {
    /// A bounded label value.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Forbidden => "forbidden",
            Self::Timeout => "timeout",
            Self::Unavailable => "unavailable",
        }
    }

    /// One GET of an object, bounded by `timeout`: the object, `None` when it does not exist.
    pub(crate) async fn get<K>(
        api: &kube::Api<K>,
        name: &str,
        timeout: Duration,
    ) -> Result<Option<K>, Self>
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        match tokio::time::timeout(timeout, api.get_opt(name)).await {
            Err(_) => Err(Self::Timeout),
            Ok(Err(kube::Error::Api(status))) if matches!(status.code, 401 | 403) => {
                Err(Self::Forbidden)
            }
            Ok(Err(_)) => Err(Self::Unavailable),
            Ok(Ok(object)) => Ok(object),
        }
    }
}

/// A failed [`CachedGets::get`]: a failure met now (to count and log once), or one remembered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Missed<E> {
    New(E),
    Remembered(E),
}

impl<E> Missed<E> {
    pub(crate) fn into_inner(self) -> E {
        match self {
            Self::New(e) | Self::Remembered(e) => e,
        }
    }
}

#[derive(Clone)]
struct Timed<T> {
    value: T,
    expires: Instant,
}

/// Answers (`V`) and failures (`E`) of GETs by key, each kept for its lifetime.
#[derive(Clone)]
pub(crate) struct CachedGets<K, V, E> {
    ok: moka::future::Cache<K, Timed<V>>,
    failed: moka::future::Cache<K, Timed<E>>,
    ttl: Duration,
    failure_ttl: Duration,
    clock: Clock,
}

impl<K, V, E> std::fmt::Debug for CachedGets<K, V, E>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
    E: Clone + Send + Sync + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedGets")
            .field("cached", &self.ok.entry_count())
            .field("ttl", &self.ttl)
            .field("failure_ttl", &self.failure_ttl)
            .finish_non_exhaustive()
    }
}

impl<K, V, E> CachedGets<K, V, E>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
    E: Clone + Send + Sync + 'static,
{
    /// Answers kept `ttl`, failures `failure_ttl`, on the system clock.
    pub(crate) fn new(ttl: Duration, failure_ttl: Duration) -> Self {
        // moka's own lifetimes only free memory; freshness is decided on `clock`.
        Self {
            ok: moka::future::Cache::builder()
                .max_capacity(MAX_ENTRIES)
                .time_to_live(ttl.max(Duration::from_millis(1)))
                .build(),
            failed: moka::future::Cache::builder()
                .max_capacity(MAX_ENTRIES)
                .time_to_live(failure_ttl.max(Duration::from_millis(1)))
                .build(),
            ttl,
            failure_ttl,
            clock: Clock::system(),
        }
    }

    /// Lifetimes measured on `clock`.
    pub(crate) fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The answer for `key`: cached while fresh, else `fetch`ed (once for concurrent callers).
    /// A failure is remembered for its lifetime and answered from memory meanwhile.
    pub(crate) async fn get(
        &self,
        key: K,
        fetch: impl Future<Output = Result<V, E>>,
    ) -> Result<V, Missed<E>> {
        let now = self.clock.now();
        if let Some(failed) = self.failed.get(&key).await {
            if failed.expires > now {
                return Err(Missed::Remembered(failed.value));
            }
            self.failed.invalidate(&key).await;
        }
        if let Some(ok) = self.ok.get(&key).await {
            if ok.expires > now {
                return Ok(ok.value);
            }
            self.ok.invalidate(&key).await;
        }
        let (clock, ttl) = (&self.clock, self.ttl);
        let load = async move {
            fetch.await.map(|value| Timed {
                value,
                expires: clock.expiry(ttl),
            })
        };
        match self.ok.try_get_with(key.clone(), load).await {
            Ok(timed) => Ok(timed.value),
            Err(error) => {
                let error = E::clone(&error);
                let expires = self.clock.expiry(self.failure_ttl);
                self.failed
                    .insert(
                        key,
                        Timed {
                            value: error.clone(),
                            expires,
                        },
                    )
                    .await;
                Err(Missed::New(error))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn cache(clock: &Clock) -> CachedGets<String, u32, Failure> {
        CachedGets::new(Duration::from_secs(60), Duration::from_secs(5)).with_clock(clock.clone())
    }

    #[tokio::test]
    async fn an_answer_is_reused_for_its_lifetime_then_fetched_again() {
        let clock = Clock::manual();
        let gets = cache(&clock);
        let fetched = AtomicUsize::new(0);
        let fetch = || async {
            Ok::<_, Failure>(u32::try_from(fetched.fetch_add(1, Ordering::SeqCst)).unwrap_or(0))
        };
        assert_eq!(gets.get("a".into(), fetch()).await, Ok(0));
        clock.advance(Duration::from_secs(59));
        assert_eq!(gets.get("a".into(), fetch()).await, Ok(0), "still fresh");
        clock.advance(Duration::from_secs(1));
        assert_eq!(gets.get("a".into(), fetch()).await, Ok(1), "expired");
        assert_eq!(fetched.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_failure_is_new_once_then_remembered_until_its_lifetime_ends() {
        let clock = Clock::manual();
        let gets = cache(&clock);
        let failing = || async { Err::<u32, _>(Failure::Forbidden) };
        assert_eq!(
            gets.get("a".into(), failing()).await,
            Err(Missed::New(Failure::Forbidden))
        );
        assert_eq!(
            gets.get("a".into(), async { Ok(7) }).await,
            Err(Missed::Remembered(Failure::Forbidden)),
            "not asked again while remembered"
        );
        clock.advance(Duration::from_secs(5));
        assert_eq!(gets.get("a".into(), async { Ok(7) }).await, Ok(7));
    }

    #[tokio::test]
    async fn concurrent_misses_of_one_key_fetch_once() {
        let gets = cache(&Clock::manual());
        let fetched = AtomicUsize::new(0);
        let (gate, opened) = tokio::sync::oneshot::channel::<()>();
        let first = gets.get("a".into(), async {
            fetched.fetch_add(1, Ordering::SeqCst);
            let _ = opened.await;
            Ok::<_, Failure>(1)
        });
        let second = gets.get("a".into(), async {
            fetched.fetch_add(1, Ordering::SeqCst);
            Ok(2)
        });
        let open = async {
            tokio::task::yield_now().await;
            let _ = gate.send(());
        };
        let (first, second, ()) = tokio::join!(first, second, open);
        assert_eq!((first, second), (Ok(1), Ok(1)));
        assert_eq!(fetched.load(Ordering::SeqCst), 1);
    }
}
