//! A client that sends requests and then never reads the answers, for server tests: the
//! response side of a slowloris. A server without a write timeout keeps every such connection,
//! its buffers and the response it is trying to send.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};

use crate::TestCa;

/// Receive buffer asked of the kernel (it may round it up): small, so the server's writes
/// block after a few KiB instead of filling megabytes of loopback buffers.
const RECEIVE_BUFFER: u32 = 4096;
/// How long one request may take to send before the client stops sending (the server stopped
/// reading: its own writes are blocked).
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection that sent its requests and never reads; closed on drop.
///
/// ```no_run
/// # async fn demo(addr: std::net::SocketAddr, ca: &noe_test_support::TestCa) -> anyhow::Result<()> {
/// use noe_test_support::StalledClient;
/// let review = br#"{"kind":"AdmissionReview"}"#;
/// let request = StalledClient::post(&addr.to_string(), "/mutate", review);
/// // 30 clients, each pipelining 4 requests over TLS and reading nothing.
/// let mut clients = Vec::new();
/// for _ in 0..30 {
///     clients.push(StalledClient::tls(addr, "localhost", ca, &request, 4).await?);
/// }
/// // ... the server must still answer others, and close these within its write timeout.
/// # Ok(()) }
/// ```
pub struct StalledClient {
    /// Kept open, never read.
    _stream: Box<dyn AsyncWrite + Send + Unpin>,
    sent: usize,
}

impl std::fmt::Debug for StalledClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StalledClient")
            .field("sent", &self.sent)
            .finish_non_exhaustive()
    }
}

impl StalledClient {
    /// Connects to `addr` over plain TCP with a small receive buffer, sends `request`
    /// `repeat` times (HTTP/1.1 pipelining) and then never reads.
    pub async fn tcp(addr: SocketAddr, request: &[u8], repeat: usize) -> anyhow::Result<Self> {
        let stream = connect(addr).await?;
        Self::send(Box::new(stream), request, repeat).await
    }

    /// Like [`StalledClient::tcp`] over TLS: the handshake completes (trusting `ca`, checking
    /// `server_name`), then the requests are sent and nothing is read, not even session
    /// tickets.
    pub async fn tls(
        addr: SocketAddr,
        server_name: &str,
        ca: &TestCa,
        request: &[u8],
        repeat: usize,
    ) -> anyhow::Result<Self> {
        let stream = connect(addr).await?;
        let mut config = ca.client_config()?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let name = rustls_pki_types::ServerName::try_from(server_name.to_owned())
            .context("invalid TLS server name")?;
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, stream)
            .await
            .context("TLS handshake")?;
        Self::send(Box::new(tls), request, repeat).await
    }

    /// An HTTP/1.1 `POST` of a JSON `body` to `path` (keep-alive), for [`StalledClient::tcp`]
    /// and [`StalledClient::tls`].
    pub fn post(host: &str, path: &str, body: &[u8]) -> Vec<u8> {
        let mut request = format!(
            "POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(body);
        request
    }

    /// Requests sent in full before the client stopped (all of them, unless the server
    /// stopped reading first).
    pub fn sent(&self) -> usize {
        self.sent
    }

    async fn send(
        mut stream: Box<dyn AsyncWrite + Send + Unpin>,
        request: &[u8],
        repeat: usize,
    ) -> anyhow::Result<Self> {
        let mut sent = 0;
        for _ in 0..repeat {
            match tokio::time::timeout(SEND_TIMEOUT, stream.write_all(request)).await {
                Ok(result) => result.context("sending a request")?,
                Err(_) => break,
            }
            sent += 1;
        }
        if let Ok(result) = tokio::time::timeout(SEND_TIMEOUT, stream.flush()).await {
            result.context("sending a request")?;
        }
        Ok(Self {
            _stream: stream,
            sent,
        })
    }
}

/// `count` plain TCP connections to `addr` from the local address `source` (a loopback address
/// such as 127.0.0.2 tells them apart from the clients under test) that never send a byte: a
/// server waiting for their TLS handshake waits for nothing. Closed when dropped.
pub async fn silent_connections(
    addr: SocketAddr,
    source: std::net::IpAddr,
    count: usize,
) -> anyhow::Result<Vec<TcpStream>> {
    let mut connections = Vec::with_capacity(count);
    for _ in 0..count {
        let socket = match addr {
            SocketAddr::V4(_) => TcpSocket::new_v4()?,
            SocketAddr::V6(_) => TcpSocket::new_v6()?,
        };
        socket
            .bind(SocketAddr::new(source, 0))
            .with_context(|| format!("binding to {source}"))?;
        let connection = tokio::time::timeout(SEND_TIMEOUT, socket.connect(addr))
            .await
            .with_context(|| format!("connection {} to {addr} timed out", connections.len()))?
            .with_context(|| format!("connection {} to {addr}", connections.len()))?;
        connections.push(connection);
    }
    Ok(connections)
}

async fn connect(addr: SocketAddr) -> anyhow::Result<TcpStream> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_recv_buffer_size(RECEIVE_BUFFER)?;
    socket
        .connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))
}
