//! One admission connection's lifetime: when it last moved bytes, how many requests it has in
//! flight, and a write that may not wait forever.
//!
//! A client that never reads its answers makes every write wait for buffer space; without a
//! bound, each such connection holds its buffers (and its task) for good. [`Watched`] fails a
//! write that made no progress for the write timeout, which closes the connection. [`Activity`]
//! tells when a connection has been idle (no request in flight, no byte in either direction) for
//! the idle timeout, so the server can close it gracefully.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// When a connection last moved bytes, and its requests in flight.
#[derive(Debug)]
pub struct Activity {
    started: Instant,
    /// Milliseconds after `started` of the last byte read or written.
    last: AtomicU64,
    in_flight: AtomicUsize,
}

impl Activity {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            started: Instant::now(),
            last: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        })
    }

    fn touch(&self) {
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(now, Ordering::Relaxed);
    }

    /// Marks a request in flight until the guard is dropped.
    pub fn request(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.touch();
        InFlight(self.clone())
    }

    /// Resolves once no request has been in flight and no byte has moved for `timeout`.
    pub async fn idle_for(&self, timeout: Duration) {
        loop {
            let last = Duration::from_millis(self.last.load(Ordering::Relaxed));
            let quiet = self.started.elapsed().saturating_sub(last);
            let busy = self.in_flight.load(Ordering::Acquire) > 0;
            if !busy && quiet >= timeout {
                return;
            }
            // A request in flight: look again after a full timeout (its end counts as activity).
            let wait = if busy {
                timeout
            } else {
                timeout.saturating_sub(quiet)
            };
            tokio::time::sleep(wait.max(Duration::from_millis(10))).await;
        }
    }
}

/// A request in flight on a connection (see [`Activity::request`]).
#[derive(Debug)]
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
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
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Time is paused: a write into a pipe nobody reads fails after exactly the write timeout.
    #[tokio::test(start_paused = true)]
    async fn a_write_nobody_reads_times_out() {
        let (server, _client) = tokio::io::duplex(64);
        let activity = Activity::new();
        let mut watched = Watched::new(server, activity, Duration::from_secs(10));
        let started = Instant::now();
        let error = watched.write_all(&[0u8; 1024]).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_is_not_a_stalled_one() {
        let (server, mut client) = tokio::io::duplex(64);
        let mut watched = Watched::new(server, Activity::new(), Duration::from_secs(10));
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 64];
            let mut total = 0;
            while total < 1024 {
                tokio::time::sleep(Duration::from_secs(5)).await;
                total += client.read(&mut buf).await.unwrap();
            }
            total
        });
        // Each wait for space is shorter than the timeout: the write completes.
        watched.write_all(&[1u8; 1024]).await.unwrap();
        drop(watched);
        assert_eq!(reader.await.unwrap(), 1024);
    }

    #[tokio::test(start_paused = true)]
    async fn idle_means_no_request_and_no_bytes() {
        let activity = Activity::new();
        let started = Instant::now();
        let request = activity.request();
        let idle = tokio::spawn({
            let activity = activity.clone();
            async move { activity.idle_for(Duration::from_secs(60)).await }
        });
        tokio::time::sleep(Duration::from_secs(100)).await;
        assert!(!idle.is_finished(), "a request in flight is not idle");
        drop(request);
        idle.await.unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(160));
    }
}
