//! Requests held back until a test releases them: a list still in flight when a client stops.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

/// Matching requests wait, unanswered, until this is released or dropped
/// ([`crate::KubeApi::hold`]).
#[derive(Debug)]
pub struct Held {
    released: watch::Sender<bool>,
    waiting: Arc<AtomicUsize>,
}

impl Held {
    /// How many requests wait on it now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Lets the waiting requests (and every later one) be answered.
    pub fn release(self) {
        drop(self);
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.released.send_replace(true);
    }
}

/// The server's side of a [`Held`].
#[derive(Debug)]
pub(crate) struct Hold {
    /// `GET` (gets and lists), `WATCH`, or another method.
    method: String,
    path_contains: String,
    released: watch::Receiver<bool>,
    waiting: Arc<AtomicUsize>,
}

impl Hold {
    pub(crate) fn new(method: &str, path_contains: &str) -> (Self, Held) {
        let (sender, released) = watch::channel(false);
        let waiting = Arc::new(AtomicUsize::new(0));
        let hold = Self {
            method: method.to_owned(),
            path_contains: path_contains.to_owned(),
            released,
            waiting: waiting.clone(),
        };
        (
            hold,
            Held {
                released: sender,
                waiting,
            },
        )
    }

    /// Whether it still holds a request of `method` on `path` (`watching`: a watch).
    pub(crate) fn matches(&self, method: &str, path: &str, watching: bool) -> bool {
        let method = if watching { "WATCH" } else { method };
        !*self.released.borrow() && self.method == method && path.contains(&self.path_contains)
    }

    /// Waits until released (at once when it was).
    pub(crate) fn wait(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut released = self.released.clone();
        let waiting = self.waiting.clone();
        async move {
            let _counted = Counted::new(waiting);
            // An error: the `Held` is gone, which releases too.
            let _ = released.wait_for(|released| *released).await;
        }
    }
}

/// One waiting request, counted until it is answered or its client goes away.
struct Counted(Arc<AtomicUsize>);

impl Counted {
    fn new(waiting: Arc<AtomicUsize>) -> Self {
        waiting.fetch_add(1, Ordering::SeqCst);
        Self(waiting)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
