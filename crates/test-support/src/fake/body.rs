//! Streaming response bodies that never hold more than one chunk in memory.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

/// Sends `data` one byte per `interval`.
pub(crate) struct Trickle {
    data: Bytes,
    interval: tokio::time::Interval,
}

impl Trickle {
    pub(crate) fn new(data: Bytes, interval: Duration) -> Self {
        let mut interval = tokio::time::interval(interval);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self { data, interval }
    }
}

impl Body for Trickle {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.data.is_empty() {
            return Poll::Ready(None);
        }
        match self.interval.poll_tick(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(_) => {
                let byte = self.data.split_to(1);
                Poll::Ready(Some(Ok(Frame::data(byte))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.len() as u64)
    }
}

/// `len` bytes of spaces in 64 KiB chunks; declares its length (Content-Length) or not (chunked).
pub(crate) struct Filler {
    remaining: u64,
    chunk: Bytes,
    declare_length: bool,
}

impl Filler {
    pub(crate) fn new(len: u64, declare_length: bool) -> Self {
        Self {
            remaining: len,
            chunk: Bytes::from(vec![b' '; 64 * 1024]),
            declare_length,
        }
    }
}

impl Body for Filler {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.remaining == 0 {
            return Poll::Ready(None);
        }
        let n = self.remaining.min(self.chunk.len() as u64);
        self.remaining -= n;
        let chunk = self.chunk.slice(..n as usize);
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        if self.declare_length {
            SizeHint::with_exact(self.remaining)
        } else {
            SizeHint::default()
        }
    }
}
