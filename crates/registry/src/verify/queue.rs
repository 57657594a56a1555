//! The server's background verification (`--verify-binaries=background`): after a cold lookup
//! (the process cache missed; the registry or the shared cache answered) the image is offered
//! here, and queued unless its digest was queued before (a bounded memory of digests) or the
//! queue is full; a consumer verifies the queued images off the admission path, a few at a time
//! (`--verify-concurrency`), each platform decompressed on a thread of the idle scheduling
//! class, every request through the same limiter as the lookups. Nothing waits for it: what it
//! finds reaches decisions through the verdicts' corrections ([`super::Verdicts`]); a gate may
//! hold a pod while its images are [`Queue::pending`] (`--gate-verify`).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::mpsc;

use crate::resolver::Routed;
use noe_credentials::CredentialCandidate;

/// Images waiting to be verified at most; more are dropped (verified after a later cold
/// lookup).
pub const QUEUE_CAPACITY: usize = 1024;
/// Image digests remembered as queued or verified (so one is queued once).
pub const MAX_SEEN: usize = 65_536;
/// Images (as pods name them) whose pending verifications are tracked at most.
const MAX_PENDING: usize = 4 * QUEUE_CAPACITY;

/// One image to verify, with the credentials its lookup used.
pub(crate) struct Job {
    pub routed: Routed,
    pub credentials: Vec<CredentialCandidate>,
    pub digest: String,
}

/// The queue of images offered for verification.
#[derive(derive_more::Debug)]
#[debug("Queue {{ depth: {:?}, .. }}", depth.get())]
pub struct Queue {
    tx: mpsc::Sender<Job>,
    seen: quick_cache::sync::Cache<String, ()>,
    /// Images (as written) whose verification is queued or running, and how many times.
    pending: Mutex<HashMap<String, usize>>,
    depth: prometheus::IntGauge,
}

impl Queue {
    /// A queue and the receiver its consumer reads; `depth` counts the images waiting.
    pub(crate) fn new(depth: prometheus::IntGauge) -> (Self, mpsc::Receiver<Job>) {
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let queue = Self {
            tx,
            seen: quick_cache::sync::Cache::new(MAX_SEEN),
            pending: Mutex::default(),
            depth,
        };
        (queue, rx)
    }

    /// Offers the image `routed`, which resolved to `digest` with `credentials`.
    pub(crate) fn offer(&self, routed: &Routed, credentials: &[CredentialCandidate], digest: &str) {
        if self.seen.get(digest).is_some() {
            return;
        }
        let job = Job {
            routed: routed.clone(),
            credentials: credentials.to_vec(),
            digest: digest.to_owned(),
        };
        let image = routed.image().to_owned();
        let mut pending = self.pending_images();
        if pending.len() >= MAX_PENDING && !pending.contains_key(&image) {
            return;
        }
        match self.tx.try_send(job) {
            Ok(()) => {
                self.seen.insert(digest.to_owned(), ());
                *pending.entry(image).or_insert(0) += 1;
                self.depth.inc();
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::debug!(image, "verification queue full: not queued");
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    /// Whether a verification of `image` (as a pod names it) is queued or running.
    pub fn pending(&self, image: &str) -> bool {
        self.pending_images().contains_key(image)
    }

    /// Images waiting (not yet started).
    pub fn depth(&self) -> i64 {
        self.depth.get()
    }

    /// A job was taken from the queue to run.
    pub(crate) fn started(&self) {
        self.depth.dec();
    }

    /// A job of `image` ended (verified or not).
    pub(crate) fn finished(&self, image: &str) {
        let mut pending = self.pending_images();
        if let Some(count) = pending.get_mut(image) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                pending.remove(image);
            }
        }
    }

    fn pending_images(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_queue_takes_each_digest_once_and_drops_what_does_not_fit() {
        let resolver =
            crate::Resolver::new(crate::Config::default(), &prometheus::Registry::new()).unwrap();
        let routed = resolver.routed("registry.example/app:1").await.unwrap();
        let other = resolver.routed("registry.example/other:1").await.unwrap();
        let depth = prometheus::IntGauge::new("depth", "depth").unwrap();
        let (queue, mut jobs) = Queue::new(depth);
        let digest = |i: usize| format!("sha256:{i:064}");
        queue.offer(&routed, &[], &digest(0));
        queue.offer(&routed, &[], &digest(0));
        assert_eq!(queue.depth(), 1, "one digest, queued once");
        assert!(queue.pending("registry.example/app:1"));
        assert!(!queue.pending("registry.example/other:1"));
        for i in 1..=QUEUE_CAPACITY {
            queue.offer(&other, &[], &digest(i));
        }
        assert_eq!(
            queue.depth(),
            QUEUE_CAPACITY as i64,
            "the last one did not fit"
        );
        let job = jobs.recv().await.unwrap();
        assert_eq!(job.digest, digest(0));
        queue.started();
        queue.finished(job.routed.image());
        assert!(!queue.pending("registry.example/app:1"));
        assert!(queue.pending("registry.example/other:1"));
        // The digest that did not fit is not remembered: a later cold lookup queues it.
        drop(jobs);
        queue.offer(&other, &[], &digest(QUEUE_CAPACITY));
        assert_eq!(queue.depth(), QUEUE_CAPACITY as i64 - 1);
    }
}
