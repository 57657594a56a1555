//! A value re-read from disk at most once per interval: readers share the current value without
//! waiting; one caller reloads when it is stale.

use std::future::Future;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// How often configuration files are read again by default.
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(10);

pub struct Reloading<T> {
    current: RwLock<Option<(Instant, Arc<T>)>>,
    reloading: tokio::sync::Mutex<()>,
    every: Duration,
}

impl<T> Reloading<T> {
    pub fn new(every: Duration) -> Self {
        Self {
            current: RwLock::new(None),
            reloading: tokio::sync::Mutex::new(()),
            every,
        }
    }

    fn fresh(&self) -> Option<Arc<T>> {
        let current = self
            .current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        current
            .as_ref()
            .filter(|(at, _)| at.elapsed() < self.every)
            .map(|(_, value)| Arc::clone(value))
    }

    /// The current value, loading it with `load` when absent or older than the interval.
    pub async fn get<F, Fut>(&self, load: F) -> Arc<T>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        if let Some(value) = self.fresh() {
            return value;
        }
        let _reloading = self.reloading.lock().await;
        if let Some(value) = self.fresh() {
            return value;
        }
        let value = Arc::new(load().await);
        *self
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) =
            Some((Instant::now(), Arc::clone(&value)));
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn loads_once_per_interval() {
        let loads = AtomicUsize::new(0);
        let value = Reloading::new(Duration::from_millis(200));
        let load = || async {
            loads.fetch_add(1, Ordering::SeqCst);
            loads.load(Ordering::SeqCst)
        };
        assert_eq!(*value.get(load).await, 1);
        assert_eq!(*value.get(load).await, 1);
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(*value.get(load).await, 2);
    }
}
