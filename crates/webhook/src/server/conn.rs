//! One admission connection's lifetime: whether it moved bytes lately, how many requests it has
//! in flight, a write that may not wait forever, and when it must close.
//!
//! A client that never reads its answers makes every write wait for buffer space; without a
//! bound, each such connection holds its buffers (and its task) for good. [`Watched`] fails a
//! write that made no progress for the write timeout, which closes the connection.
//!
//! The rest is decided off the hot path: reads, writes and requests only bump counters, and a
//! small [`watchdog`] task per connection looks at them every idle timeout. When the connection
//! has been idle that long (no request in flight, no byte either way), or the server shuts down,
//! it asks the connection to close gracefully; after a refused HTTP/1.1 body it asks it to close
//! at once. The connection's own future checks one flag per poll ([`Activity::close`]), so the
//! admission path pays no timer and no lock per request.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::AtomicWaker;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{watch, Notify};
use tokio::time::Sleep;

/// What the watchdog asks of the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Close {
    /// Keep serving.
    No,
    /// Finish what is in flight, then close (HTTP/2 GOAWAY; HTTP/1.1 after the answer).
    Gracefully,
    /// Close now (a refused HTTP/1.1 body is still being sent).
    Now,
}

/// A connection's activity and the watchdog's verdict.
#[derive(Debug, Default)]
pub struct Activity {
    /// Bumped by every read, write and request: the watchdog compares two samples.
    events: AtomicU64,
    in_flight: AtomicUsize,
    close: AtomicU8,
    /// The connection's task, woken when `close` changes.
    connection: AtomicWaker,
    refused: Notify,
}

impl Activity {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    fn touch(&self) {
        self.events.fetch_add(1, Ordering::Relaxed);
    }

    /// Marks a request in flight until the guard is dropped.
    pub fn request(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.touch();
        InFlight(self.clone())
    }

    /// An HTTP/1.1 body was refused: close the connection shortly (time to flush the 413).
    pub fn refused(&self) {
        self.refused.notify_one();
    }

    /// No request in flight (between requests, or before the first).
    pub fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    /// Asks the connection to close gracefully: to make room for a new connection
    /// ([`super::slots`]).
    pub fn close_gracefully(&self) {
        self.decide(Close::Gracefully);
    }

    /// The watchdog's verdict, registering `cx`'s waker for a later one. Called by the
    /// connection's future on every poll: one atomic load (the waker registration is a no-op
    /// for the same task).
    pub fn close(&self, cx: &Context<'_>) -> Close {
        self.connection.register(cx.waker());
        match self.close.load(Ordering::Acquire) {
            0 => Close::No,
            1 => Close::Gracefully,
            _ => Close::Now,
        }
    }

    fn decide(&self, close: Close) {
        let value = match close {
            Close::No => 0,
            Close::Gracefully => 1,
            Close::Now => 2,
        };
        self.close.fetch_max(value, Ordering::AcqRel);
        self.connection.wake();
    }
}

/// A request in flight on a connection (see [`Activity::request`]).
#[derive(Debug)]
pub struct InFlight(Arc<Activity>);

impl InFlight {
    /// This request's body was refused on HTTP/1.1: see [`Activity::refused`].
    pub fn refused(&self) {
        self.0.refused();
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Watches one connection until it should close: gracefully once it has been idle for
/// `idle_timeout` (no request in flight, no byte moved; judged between two looks
/// `idle_timeout` apart, so an idle connection closes after one to two timeouts) or when
/// `shutdown` flips; at once `after_refusal` after a refused HTTP/1.1 body. Ends when it has
/// decided, or when the connection is gone.
pub async fn watchdog(
    activity: Arc<Activity>,
    idle_timeout: Duration,
    after_refusal: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut last = activity.events.load(Ordering::Relaxed);
    loop {
        tokio::select! {
            _ = shutdown.changed() => {
                activity.decide(Close::Gracefully);
                return;
            }
            () = activity.refused.notified() => {
                tokio::time::sleep(after_refusal).await;
                activity.decide(Close::Now);
                return;
            }
            () = tokio::time::sleep(idle_timeout) => {
                let now = activity.events.load(Ordering::Relaxed);
                if now == last && activity.in_flight.load(Ordering::Acquire) == 0 {
                    tracing::debug!("Closing an idle connection");
                    activity.decide(Close::Gracefully);
                    return;
                }
                last = now;
            }
        }
    }
}

/// An IO stream whose reads and writes count as activity, and whose writes (and flushes) fail
/// with `TimedOut` when they make no progress for `write_timeout`.
#[derive(Debug)]
pub struct Watched<T> {
    inner: T,
    activity: Arc<Activity>,
    write_timeout: Duration,
    /// Armed while a write is pending.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> Watched<T> {
    pub fn new(inner: T, activity: Arc<Activity>, write_timeout: Duration) -> Self {
        Self {
            inner,
            activity,
            write_timeout,
            stalled: None,
        }
    }

    /// The outcome of one write-side poll: progress disarms the timer, a pending write arms it,
    /// and a timer that fires turns the wait into `TimedOut`.
    fn watch_write<R>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        match polled {
            Poll::Ready(result) => {
                self.stalled = None;
                if result.is_ok() {
                    self.activity.touch();
                }
                Poll::Ready(result)
            }
            Poll::Pending => {
                let timeout = self.write_timeout;
                let stalled = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                match stalled.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client did not read its answer within the write timeout",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch_write(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch_write(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch_write(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.watch_write(cx, polled)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
