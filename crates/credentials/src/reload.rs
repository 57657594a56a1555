//! A value loaded from disk and reloaded in the background: readers get the last good value at
//! once and never wait for a reload, so a configuration file that blocks on read (a FIFO, a hung
//! mount) never sits on the admission path. Only the very first read of a value waits for its
//! load, and at most `first_wait` (then it gets the empty value; the load goes on and later
//! readers see its result).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use noe_core::clock::Clock;
use tokio::sync::watch;

/// How often configuration files are read again by default.
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(10);

type Loaded<T> = Option<(Instant, Arc<T>)>;

pub struct Reloading<T> {
    current: watch::Sender<Loaded<T>>,
    /// A load is running (at most one at a time).
    loading: Arc<AtomicBool>,
    /// A reader has already waited for the first load: later ones do not.
    waited: AtomicBool,
    every: Duration,
    first_wait: Duration,
    /// What the interval is measured on (tests move a manual one).
    clock: Clock,
}

/// Clears the `loading` flag when a load ends, however it ends.
struct LoadingFlag(Arc<AtomicBool>);

impl Drop for LoadingFlag {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl<T: Default + Send + Sync + 'static> Reloading<T> {
    /// Reloads at most every `every`; a first read waits at most `first_wait`.
    pub fn new(every: Duration, first_wait: Duration) -> Self {
        Self {
            current: watch::Sender::new(None),
            loading: Arc::new(AtomicBool::new(false)),
            waited: AtomicBool::new(false),
            every,
            first_wait,
            clock: Clock::system(),
        }
    }

    /// A new, empty one like this, its interval measured on `clock`.
    #[must_use]
    pub fn on_clock(&self, clock: Clock) -> Self {
        Self {
            clock,
            ..Self::new(self.every, self.first_wait)
        }
    }

    /// How long ago `at` was, by this clock.
    fn age(&self, at: Instant) -> Duration {
        self.clock.now().saturating_duration_since(at)
    }

    /// Starts with `value`, loaded now (read at start-up, where a file must be valid); the
    /// first reload is due after `every`.
    pub fn with_value(value: T, every: Duration) -> Self {
        let reloading = Self::new(every, Duration::ZERO);
        reloading
            .current
            .send_replace(Some((reloading.clock.now(), Arc::new(value))));
        reloading.waited.store(true, Ordering::Release);
        reloading
    }

    /// The current value. When it is older than the interval, a reload with `load` starts in the
    /// background (unless one is running) and the current value is returned. When there is none
    /// yet, the load starts and the first readers wait for it at most `first_wait`; after that,
    /// readers get the empty value at once until a load ends.
    ///
    /// `load` gets the current value, if any: what it cannot read again it keeps from there.
    pub async fn get<F, Fut>(&self, load: F) -> Arc<T>
    where
        F: FnOnce(Option<Arc<T>>) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
    {
        let current = self.current.borrow().clone();
        match current {
            Some((at, value)) => {
                if self.age(at) >= self.every {
                    self.reload(load);
                }
                value
            }
            None => {
                let mut updates = self.current.subscribe();
                self.reload(load);
                if self.waited.load(Ordering::Acquire) {
                    return Arc::new(T::default());
                }
                let first =
                    tokio::time::timeout(self.first_wait, updates.wait_for(Option::is_some)).await;
                self.waited.store(true, Ordering::Release);
                match first {
                    Ok(Ok(loaded)) => loaded
                        .as_ref()
                        .map_or_else(|| Arc::new(T::default()), |(_, v)| Arc::clone(v)),
                    _ => Arc::new(T::default()),
                }
            }
        }
    }

    /// The current value without waiting: as [`Reloading::get`] when a value is loaded (a
    /// reload starts in the background when it is due), `None` before the first load ended.
    pub fn now<F, Fut>(&self, load: F) -> Option<Arc<T>>
    where
        F: FnOnce(Option<Arc<T>>) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
    {
        let (at, value) = self.current.borrow().clone()?;
        if self.age(at) >= self.every {
            self.reload(load);
        }
        Some(value)
    }

    /// Starts a load in the background unless one is running (or there is no runtime to run
    /// it on: a later read starts it).
    fn reload<F, Fut>(&self, load: F)
    where
        F: FnOnce(Option<Arc<T>>) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
    {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.loading.swap(true, Ordering::AcqRel) {
            return;
        }
        let flag = LoadingFlag(Arc::clone(&self.loading));
        let current = self.current.clone();
        let previous = current.borrow().as_ref().map(|(_, v)| Arc::clone(v));
        let future = load(previous);
        let clock = self.clock.clone();
        runtime.spawn(async move {
            let _flag = flag;
            let value = future.await;
            current.send_replace(Some((clock.now(), Arc::new(value))));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[tokio::test(start_paused = true)]
    async fn reloads_in_the_background_once_per_interval() {
        let loads = Arc::new(AtomicUsize::new(0));
        let clock = Clock::manual();
        let value =
            Reloading::new(Duration::from_secs(10), Duration::from_secs(1)).on_clock(clock.clone());
        let load = |_previous| {
            let loads = Arc::clone(&loads);
            async move { loads.fetch_add(1, Ordering::SeqCst) + 1 }
        };
        assert_eq!(
            *value.get(load).await,
            1,
            "the first read waits for its load"
        );
        assert_eq!(*value.get(load).await, 1);
        clock.advance(Duration::from_secs(11));
        // Stale: the old value at once, the reload in the background.
        assert_eq!(*value.get(load).await, 1);
        tokio::task::yield_now().await;
        assert_eq!(*value.get(load).await, 2);
        assert_eq!(loads.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn now_never_waits_and_reloads_when_due() {
        let clock = Clock::manual();
        let value =
            Reloading::new(Duration::from_secs(10), Duration::from_secs(1)).on_clock(clock.clone());
        let loads = Arc::new(AtomicUsize::new(0));
        let load = |_previous| {
            let loads = Arc::clone(&loads);
            async move { loads.fetch_add(1, Ordering::SeqCst) + 1 }
        };
        assert!(value.now(load).is_none(), "nothing loaded yet");
        assert_eq!(
            loads.load(Ordering::SeqCst),
            0,
            "now() starts no first load"
        );
        assert_eq!(*value.get(load).await, 1);
        assert_eq!(value.now(load).as_deref(), Some(&1));
        clock.advance(Duration::from_secs(11));
        assert_eq!(
            value.now(load).as_deref(),
            Some(&1),
            "stale: the old value at once"
        );
        tokio::task::yield_now().await;
        assert_eq!(value.now(load).as_deref(), Some(&2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_load_that_never_ends_costs_readers_nothing_but_the_first_wait() {
        let value: Reloading<Vec<u8>> =
            Reloading::new(Duration::from_secs(10), Duration::from_secs(2));
        let started = Arc::new(AtomicUsize::new(0));
        let hang = |_previous| {
            let started = Arc::clone(&started);
            async move {
                started.fetch_add(1, Ordering::SeqCst);
                std::future::pending::<Vec<u8>>().await
            }
        };
        assert!(
            value.get(hang).await.is_empty(),
            "empty after the first wait"
        );
        // Later readers do not wait, and no second load starts while the first runs.
        for _ in 0..3 {
            let read = tokio::time::timeout(Duration::from_millis(1), value.get(hang)).await;
            assert!(read.is_ok_and(|v| v.is_empty()));
        }
        assert_eq!(started.load(Ordering::SeqCst), 1);
    }
}
