//! A TCP proxy on loopback that adds a round-trip time to everything it forwards: each chunk is
//! held for half the round trip in each direction, in order, without slowing the throughput
//! (chunks in flight overlap, as on a long link). Connecting is not delayed: the measurements
//! that use it count HTTP round trips (docs/benchmarks.md, Cold path).
//!
//! The hold is exact to the scheduler's wake-up: tokio's timer fires on whole milliseconds,
//! rounded up (up to 1 ms late on each way, a fifth of a 5 ms round trip), so the last
//! millisecond is slept on a blocking thread, whose sleep is precise.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Chunks held per direction at most (64 KiB reads: at most 4 MiB per connection direction).
const IN_FLIGHT: usize = 64;
/// Connections forwarded at the same time at most.
const MAX_CONNECTIONS: usize = 1024;
/// tokio's timer resolution: what is left of a hold after its timer is slept precisely.
const TIMER_TICK: Duration = Duration::from_millis(1);

/// A running delaying proxy; stops (and drops every connection) on drop.
///
/// ```no_run
/// # async fn demo() -> anyhow::Result<()> {
/// use std::time::Duration;
/// use noe_test_support::{DelayProxy, Registry};
/// let registry = Registry::start().await?;
/// let slow = DelayProxy::start(registry.addr(), Duration::from_millis(50)).await?;
/// // images as `{slow.host()}/repo:tag`: every request to the registry now takes 50 ms more.
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct DelayProxy {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl DelayProxy {
    /// Listens on `127.0.0.1:0` and forwards each connection to `target`, adding `round_trip`
    /// to every request/answer exchange.
    pub async fn start(target: SocketAddr, round_trip: Duration) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        let one_way = round_trip / 2;
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    Some(_) = connections.join_next(), if !connections.is_empty() => continue,
                };
                let Ok((client, _)) = accepted else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                if connections.len() >= MAX_CONNECTIONS {
                    continue;
                }
                counter.fetch_add(1, Ordering::SeqCst);
                connections.spawn(forward(client, target, one_way));
            }
        });
        Ok(Self {
            addr,
            accepted,
            task,
        })
    }

    /// The proxy's `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `127.0.0.1:PORT`, the registry part of image references through the proxy.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn forward(client: TcpStream, target: SocketAddr, one_way: Duration) {
    let Ok(server) = TcpStream::connect(target).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::join!(
        pipe(client_read, server_write, one_way),
        pipe(server_read, client_write, one_way),
    );
}

/// Copies `from` to `to`, each chunk written `delay` after it was read.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration) {
    let (sender, mut receiver) = tokio::sync::mpsc::channel::<(Instant, Bytes)>(IN_FLIGHT);
    let reader = async move {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let chunk = Bytes::copy_from_slice(buffer.get(..n).unwrap_or_default());
                    if sender.send((Instant::now() + delay, chunk)).await.is_err() {
                        break;
                    }
                }
            }
        }
    };
    let writer = async move {
        while let Some((at, chunk)) = receiver.recv().await {
            sleep_until(at).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}

/// Sleeps until `at`: on tokio's timer up to its last tick before, then precisely.
async fn sleep_until(at: Instant) {
    if let Some(coarse) = at.checked_sub(TIMER_TICK) {
        tokio::time::sleep_until(coarse).await;
    }
    let rest = at.saturating_duration_since(Instant::now());
    if rest.is_zero() {
        return;
    }
    if tokio::task::spawn_blocking(move || std::thread::sleep(rest))
        .await
        .is_err()
    {
        // No blocking thread (the runtime is shutting down): the timer, rounded up.
        tokio::time::sleep_until(at).await;
    }
}
