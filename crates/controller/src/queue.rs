//! A bounded, de-duplicating work queue keyed by object, for controllers that run their own
//! workers (client-go's workqueue): a key waits at most once; a key being worked on is never
//! handed to a second worker, and adding it meanwhile runs it once more after it is done;
//! retries wait in the same queue until they are due (an add brings them forward).
//!
//! A key added is handed to a waiting worker at once. kube-runtime's `Controller` passes every
//! trigger through a timer queue of millisecond ticks before its reconcile runs; the gate
//! controller's release latency is counted in API round trips, so it has this queue instead.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// What [`WorkQueue::add`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Added {
    /// The key waits for a worker (or runs again once its worker is done).
    Queued,
    /// The key was waiting already.
    Already,
    /// The queue holds its capacity of keys: not added.
    Full,
}

/// The queue; share it behind an `Arc`.
#[derive(Debug)]
pub(crate) struct WorkQueue<K> {
    state: Mutex<Inner<K>>,
    wake: Notify,
    capacity: usize,
}

#[derive(Debug)]
struct Inner<K> {
    /// Keys ready, in arrival order.
    ready: VecDeque<K>,
    /// The keys of `ready`, with when each was added.
    waiting: HashMap<K, Instant>,
    /// Keys a worker holds.
    running: HashSet<K>,
    /// Running keys added again, with when: queued once their worker is done.
    again: HashMap<K, Instant>,
    /// Retries by due time (and a sequence number: keys due at the same instant).
    later: BTreeMap<(Instant, u64), K>,
    /// The keys of `later`, with their place in it.
    due: HashMap<K, (Instant, u64)>,
    sequence: u64,
    closed: bool,
}

impl<K: Clone + Eq + Hash> Inner<K> {
    /// Distinct keys held.
    fn keys(&self) -> usize {
        let waiting_or_running = self.waiting.len().saturating_add(self.running.len());
        // A running key may also be due later; counted twice at most, which only errs early.
        waiting_or_running.saturating_add(self.due.len())
    }

    fn knows(&self, key: &K) -> bool {
        self.waiting.contains_key(key) || self.running.contains(key) || self.due.contains_key(key)
    }

    fn unschedule(&mut self, key: &K) {
        if let Some(place) = self.due.remove(key) {
            self.later.remove(&place);
        }
    }

    fn push(&mut self, key: K, since: Instant) {
        self.ready.push_back(key.clone());
        self.waiting.insert(key, since);
    }

    /// Moves the retries due at `now` to `ready`; returns when the next one is due.
    fn promote(&mut self, now: Instant) -> Option<Instant> {
        while let Some(entry) = self.later.first_entry() {
            let (at, _) = *entry.key();
            if at > now {
                return Some(at);
            }
            let key = entry.remove();
            self.due.remove(&key);
            if self.running.contains(&key) {
                self.again.entry(key).or_insert(at);
            } else if !self.waiting.contains_key(&key) {
                self.push(key, at);
            }
        }
        None
    }
}

impl<K: Clone + Eq + Hash> WorkQueue<K> {
    /// An empty queue holding at most `capacity` keys.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            state: Mutex::new(Inner {
                ready: VecDeque::new(),
                waiting: HashMap::new(),
                running: HashSet::new(),
                again: HashMap::new(),
                later: BTreeMap::new(),
                due: HashMap::new(),
                sequence: 0,
                closed: false,
            }),
            wake: Notify::new(),
            capacity,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<K>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `key` now (a retry waiting for its time is brought forward).
    pub(crate) fn add(&self, key: K) -> Added {
        let added = {
            let mut inner = self.lock();
            if inner.closed || inner.waiting.contains_key(&key) {
                return Added::Already;
            }
            if !inner.knows(&key) && inner.keys() >= self.capacity {
                return Added::Full;
            }
            inner.unschedule(&key);
            let now = Instant::now();
            if inner.running.contains(&key) {
                inner.again.entry(key).or_insert(now);
                // Its worker queues it when done: nobody to wake.
                return Added::Queued;
            }
            inner.push(key, now);
            Added::Queued
        };
        self.wake.notify_one();
        added
    }

    /// Queues `key` unless the queue holds it already in any form (waiting, running, or due
    /// later): the periodic resync, which must not bring retries forward.
    pub(crate) fn add_if_absent(&self, key: K) -> Added {
        if self.lock().knows(&key) {
            return Added::Already;
        }
        self.add(key)
    }

    /// Queues `key` after `delay` (an earlier retry already scheduled stands).
    pub(crate) fn add_after(&self, key: K, delay: Duration) -> Added {
        if delay.is_zero() {
            return self.add(key);
        }
        {
            let mut inner = self.lock();
            if inner.closed || inner.waiting.contains_key(&key) {
                return Added::Already;
            }
            if !inner.knows(&key) && inner.keys() >= self.capacity {
                return Added::Full;
            }
            let at = Instant::now() + delay;
            if inner.due.get(&key).is_some_and(|(due, _)| *due <= at) {
                return Added::Already;
            }
            inner.unschedule(&key);
            let sequence = inner.sequence;
            inner.sequence = sequence.wrapping_add(1);
            inner.later.insert((at, sequence), key.clone());
            inner.due.insert(key, (at, sequence));
        }
        // A worker waiting for a later retry waits for this one instead.
        self.wake.notify_one();
        Added::Queued
    }

    /// Forgets `key` wherever it waits (its object is gone); a running key is not run again.
    pub(crate) fn forget(&self, key: &K) {
        let mut inner = self.lock();
        inner.unschedule(key);
        inner.again.remove(key);
        if inner.waiting.remove(key).is_some() {
            inner.ready.retain(|k| k != key);
        }
    }

    /// The next key for a worker, and how long it waited since it was added (or due); `None`
    /// once the queue is closed. The caller owns the key until [`WorkQueue::done`].
    pub(crate) async fn next(&self) -> Option<(K, Duration)> {
        loop {
            let notified = self.wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let next_due = {
                let mut inner = self.lock();
                if inner.closed {
                    return None;
                }
                let now = Instant::now();
                let next_due = inner.promote(now);
                if let Some(key) = inner.ready.pop_front() {
                    let since = inner.waiting.remove(&key).unwrap_or(now);
                    inner.running.insert(key.clone());
                    let more = !inner.ready.is_empty();
                    drop(inner);
                    if more {
                        // Keys promoted together: another worker takes the next one.
                        self.wake.notify_one();
                    }
                    return Some((key, now.saturating_duration_since(since)));
                }
                next_due
            };
            match next_due {
                Some(at) => {
                    tokio::select! {
                        () = &mut notified => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// The worker is done with `key`: queued again if it was added meanwhile.
    pub(crate) fn done(&self, key: &K) {
        let queued = {
            let mut inner = self.lock();
            inner.running.remove(key);
            match inner.again.remove(key) {
                Some(since) if !inner.closed && !inner.waiting.contains_key(key) => {
                    inner.unschedule(key);
                    inner.push(key.clone(), since);
                    true
                }
                _ => false,
            }
        };
        if queued {
            self.wake.notify_one();
        }
    }

    /// Distinct keys held (waiting, running or due later): what the capacity bounds.
    pub(crate) fn len(&self) -> usize {
        self.lock().keys()
    }

    /// Wakes every worker with `None`; adds are ignored from now on.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_waiters();
    }

    /// Keys waiting now (ready or due later), not counting the running ones.
    #[cfg(test)]
    fn pending(&self) -> usize {
        let inner = self.lock();
        inner.waiting.len().saturating_add(inner.due.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    async fn take(queue: &WorkQueue<&'static str>) -> &'static str {
        tokio::time::timeout(Duration::from_secs(3600), queue.next())
            .await
            .ok()
            .flatten()
            .map(|(key, _)| key)
            .unwrap_or("nothing")
    }

    /// Whether a worker would get a key within `within` (virtual time).
    async fn idle(queue: &WorkQueue<&'static str>, within: Duration) -> bool {
        tokio::time::timeout(within, queue.next()).await.is_err()
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_waits_once_and_is_handed_out_in_order() {
        let queue = WorkQueue::new(10);
        assert_eq!(queue.add("a"), Added::Queued);
        assert_eq!(queue.add("b"), Added::Queued);
        assert_eq!(queue.add("a"), Added::Already);
        assert_eq!(take(&queue).await, "a");
        assert_eq!(take(&queue).await, "b");
        assert!(idle(&queue, Duration::from_secs(60)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_running_key_is_not_handed_out_twice_and_an_add_meanwhile_runs_it_once_more() {
        let queue = WorkQueue::new(10);
        queue.add("a");
        assert_eq!(take(&queue).await, "a");
        assert_eq!(queue.add("a"), Added::Queued);
        assert_eq!(queue.add("a"), Added::Queued);
        assert!(idle(&queue, Duration::from_secs(60)).await, "a is running");
        queue.done(&"a");
        assert_eq!(take(&queue).await, "a");
        queue.done(&"a");
        assert!(
            idle(&queue, Duration::from_secs(60)).await,
            "once more only"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_waits_until_due_and_an_add_brings_it_forward() {
        let queue = WorkQueue::new(10);
        let started = Instant::now();
        assert_eq!(queue.add_after("a", Duration::from_secs(5)), Added::Queued);
        assert_eq!(queue.add_after("a", Duration::from_secs(9)), Added::Already);
        assert_eq!(take(&queue).await, "a");
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        queue.done(&"a");
        queue.add_after("b", Duration::from_secs(5));
        queue.add("b");
        let started = Instant::now();
        assert_eq!(take(&queue).await, "b");
        assert_eq!(started.elapsed(), Duration::ZERO);
        queue.done(&"b");
        assert!(idle(&queue, Duration::from_secs(60)).await, "not run again");
    }

    #[tokio::test(start_paused = true)]
    async fn an_earlier_retry_replaces_a_later_one_for_a_waiting_worker() {
        let queue = Arc::new(WorkQueue::new(10));
        queue.add_after("slow", Duration::from_secs(60));
        let worker = tokio::spawn({
            let queue = queue.clone();
            async move { queue.next().await.map(|(key, _)| (key, Instant::now())) }
        });
        tokio::task::yield_now().await;
        let started = Instant::now();
        queue.add_after("fast", Duration::from_secs(1));
        let (key, at) = worker.await.ok().flatten().unwrap_or(("nothing", started));
        assert_eq!(key, "fast");
        assert_eq!(at - started, Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn the_resync_does_not_bring_a_retry_forward() {
        let queue = WorkQueue::new(10);
        queue.add_after("a", Duration::from_secs(5));
        assert_eq!(queue.add_if_absent("a"), Added::Already);
        let started = Instant::now();
        assert_eq!(take(&queue).await, "a");
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        assert_eq!(queue.add_if_absent("a"), Added::Already, "running");
        queue.done(&"a");
        assert_eq!(queue.add_if_absent("a"), Added::Queued);
    }

    #[tokio::test(start_paused = true)]
    async fn the_queue_is_bounded_and_forgets_deleted_keys() {
        let queue = WorkQueue::new(2);
        queue.add("a");
        queue.add_after("b", Duration::from_secs(1));
        assert_eq!(queue.add("c"), Added::Full);
        assert_eq!(queue.add_after("c", Duration::from_secs(1)), Added::Full);
        assert_eq!(queue.add("b"), Added::Queued, "a known key is not refused");
        queue.forget(&"a");
        assert_eq!(queue.pending(), 1);
        assert_eq!(queue.add("c"), Added::Queued);
        assert_eq!(take(&queue).await, "b");
        assert_eq!(take(&queue).await, "c");
        queue.forget(&"c");
        queue.done(&"c");
        assert_eq!(queue.pending(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn close_wakes_every_worker() {
        let queue = Arc::new(WorkQueue::<&'static str>::new(10));
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let queue = queue.clone();
                tokio::spawn(async move { queue.next().await })
            })
            .collect();
        tokio::task::yield_now().await;
        queue.close();
        for worker in workers {
            assert!(worker.await.ok().flatten().is_none());
        }
        assert_eq!(queue.add("a"), Added::Already);
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_is_counted_from_the_add() {
        let queue = WorkQueue::new(10);
        queue.add("a");
        tokio::time::advance(Duration::from_millis(7)).await;
        let waited = queue.next().await.map(|(_, waited)| waited);
        assert_eq!(waited, Some(Duration::from_millis(7)));
    }
}
