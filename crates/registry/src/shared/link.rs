//! The connection to the shared cache, made by noe rather than by the `redis` crate so that a
//! hostile server cannot make it read without bound: the `redis` parser accepts any bulk length
//! (`$4294967296`) and reads on, even after the caller stopped waiting. Here every byte the
//! server sends is counted against an allowance: each command credits the longest answer it may
//! get, and when nothing is in flight the allowance falls back to a few bytes. A server that
//! sends more, or does not answer within the timeout, loses the connection (the next lookup
//! opens a new one), so one connection never reads more than what its commands may get back.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use redis::aio::MultiplexedConnection;
use redis::{ConnectionAddr, ConnectionInfo};
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::Error;

/// Bytes the server may send with nothing asked: the connection set-up's answers (`AUTH`,
/// `SELECT`, `CLIENT SETINFO`), and what is left over between commands.
pub const IDLE_ALLOWANCE: u64 = 4096;
/// What one command's answer may hold besides its value (the RESP framing).
pub const FRAMING_BYTES: u64 = 64;

/// The bytes a server may still send on one connection, and whether it lost the connection.
#[derive(Debug)]
struct Allowance {
    left: u64,
    in_flight: usize,
    closed: bool,
}

/// What the reading side and the callers share about one connection.
#[derive(Debug)]
pub struct Meter(Mutex<Allowance>);

impl Meter {
    fn new() -> Self {
        Self(Mutex::new(Allowance {
            left: IDLE_ALLOWANCE,
            in_flight: 0,
            closed: false,
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Allowance> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Before sending commands whose answers hold at most `bytes`: the server may send them.
    /// The returned guard marks the commands answered (or abandoned) when dropped.
    pub fn expect(self: &Arc<Self>, bytes: u64) -> Expecting {
        let mut allowance = self.lock();
        allowance.left = allowance.left.saturating_add(bytes);
        allowance.in_flight = allowance.in_flight.saturating_add(1);
        Expecting(Arc::clone(self))
    }

    /// Ends the connection: the next read and write fail, the driver stops, buffers are freed.
    pub fn close(&self) {
        self.lock().closed = true;
    }

    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Counts `read` bytes received; `false` (and the connection closed) when that is more than
    /// the server may send.
    fn received(&self, read: usize) -> bool {
        let mut allowance = self.lock();
        let read = u64::try_from(read).unwrap_or(u64::MAX);
        match allowance.left.checked_sub(read) {
            Some(left) if !allowance.closed => {
                allowance.left = left;
                true
            }
            _ => {
                allowance.closed = true;
                false
            }
        }
    }
}

/// Commands in flight on a connection; dropped when they were answered or abandoned.
#[derive(Debug)]
pub struct Expecting(Arc<Meter>);

impl Drop for Expecting {
    fn drop(&mut self) {
        let mut allowance = self.0.lock();
        allowance.in_flight = allowance.in_flight.saturating_sub(1);
        if allowance.in_flight == 0 {
            // Every answer was read: whatever comes now was not asked for.
            allowance.left = allowance.left.min(IDLE_ALLOWANCE);
        }
    }
}

/// A stream whose reads are counted against its [`Meter`].
struct Metered<S> {
    inner: S,
    meter: Arc<Meter>,
}

/// A redis connection over `stream`, every byte read counted by `meter`, and the driver that
/// must run for it to answer.
async fn handshake<S>(
    stream: S,
    meter: &Arc<Meter>,
    settings: &redis::RedisConnectionInfo,
    config: redis::AsyncConnectionConfig,
) -> io::Result<(
    MultiplexedConnection,
    futures::future::BoxFuture<'static, ()>,
)>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static,
{
    let stream = Metered {
        inner: stream,
        meter: Arc::clone(meter),
    };
    let (connection, driver) = MultiplexedConnection::new_with_config(settings, stream, config)
        .await
        .map_err(io::Error::other)?;
    Ok((connection, futures::FutureExt::boxed(driver)))
}

fn closed() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "the shared cache sent more than it was asked for, or did not answer in time",
    )
}

impl<S: AsyncRead + Unpin> AsyncRead for Metered<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.meter.is_closed() {
            return Poll::Ready(Err(closed()));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            let read = buf.filled().len().saturating_sub(before);
            if !self.meter.received(read) {
                // Nothing of what was read is handed on.
                buf.set_filled(before);
                return Poll::Ready(Err(closed()));
            }
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Metered<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.meter.is_closed() {
            return Poll::Ready(Err(closed()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// One open connection.
#[derive(Clone)]
pub struct Link {
    pub connection: MultiplexedConnection,
    pub meter: Arc<Meter>,
}

/// Where the server is and how to greet it.
pub struct Connector {
    info: ConnectionInfo,
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl Connector {
    /// `info` parsed from the URL (with the password set); `ca_pem` trusted for `rediss://`.
    pub fn new(info: ConnectionInfo, ca_pem: Option<&[u8]>) -> Result<Self, Error> {
        let tls = match info.addr() {
            ConnectionAddr::Tcp(..) => None,
            ConnectionAddr::TcpTls { insecure, .. } => {
                let roots =
                    crate::client::tls::shared_roots(ca_pem).map_err(|_| Error::Config {
                        reason: "the shared cache CA file holds no usable certificate".into(),
                    })?;
                let mut config = crate::client::tls::host_config(
                    &roots,
                    &crate::hosts::TlsFiles::default(),
                    *insecure,
                )?;
                config.alpn_protocols.clear();
                Some(Arc::new(config))
            }
            _ => {
                return Err(Error::Config {
                    reason: "the shared cache URL must name a TCP host".into(),
                })
            }
        };
        Ok(Self { info, tls })
    }

    /// Opens a connection (the caller bounds the time).
    pub async fn connect(&self) -> io::Result<Link> {
        let (host, port) = match self.info.addr() {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                (host.as_str(), *port)
            }
            _ => return Err(io::Error::other("not a TCP address")),
        };
        let tcp = TcpStream::connect((host, port)).await?;
        tcp.set_nodelay(true)?;
        let meter = Arc::new(Meter::new());
        let config = redis::AsyncConnectionConfig::new();
        let settings = self.info.redis_settings();
        let (connection, driver) = match &self.tls {
            None => handshake(tcp, &meter, settings, config).await?,
            Some(tls) => {
                let name = ServerName::try_from(host.to_owned())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                let stream = tokio_rustls::TlsConnector::from(Arc::clone(tls))
                    .connect(name, tcp)
                    .await?;
                handshake(stream, &meter, settings, config).await?
            }
        };
        tokio::spawn(driver);
        Ok(Link { connection, meter })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_allowance_follows_what_was_asked() {
        let meter = Arc::new(Meter::new());
        assert!(meter.received(100));
        let first = meter.expect(1000);
        let second = meter.expect(1000);
        assert!(meter.received(1500));
        drop(first);
        // One command is still in flight: its allowance stays.
        assert!(meter.received(400));
        drop(second);
        // Nothing in flight: only the idle allowance is left.
        assert!(meter.received(usize::try_from(IDLE_ALLOWANCE).unwrap()));
        assert!(!meter.received(1));
        assert!(meter.is_closed());
        let _late = meter.expect(1000);
        assert!(!meter.received(1), "a closed connection stays closed");
    }
}
