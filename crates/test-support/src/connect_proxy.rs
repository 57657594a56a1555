//! A loopback HTTP `CONNECT` proxy, as corporate egress proxies are: it records every target it
//! is asked to tunnel to and reaches each one itself, by name, without the client resolving it.
//! Every name is taken to mean `127.0.0.1` (at the requested port), so a test can name hosts
//! that resolve nowhere else (`meta.test`) and still be tunnelled.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// Longest request head read.
const MAX_HEAD: usize = 8 * 1024;
/// The longest any tunnel lives.
const TUNNEL_LIFETIME: Duration = Duration::from_secs(600);
/// Time to send the request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// A running proxy on `127.0.0.1`; stops (closing every tunnel) on drop.
///
/// ```no_run
/// # async fn demo() -> anyhow::Result<()> {
/// let proxy = noe_test_support::ConnectProxy::start().await?;
/// // HTTPS_PROXY=proxy.url() for the code under test, then:
/// assert!(proxy.targets().iter().all(|t| !t.starts_with("meta.test:")));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ConnectProxy {
    addr: SocketAddr,
    targets: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl ConnectProxy {
    /// Binds `127.0.0.1:0` and starts accepting.
    pub async fn start() -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let targets = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn(accept_loop(listener, targets.clone()));
        Ok(Self {
            addr,
            targets,
            task,
        })
    }

    /// `http://127.0.0.1:PORT`, the value for `HTTPS_PROXY` / `HTTP_PROXY`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The `host:port` of every `CONNECT` received, in order (also the refused ones).
    pub fn targets(&self) -> Vec<String> {
        self.targets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for ConnectProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, targets: Arc<Mutex<Vec<String>>>) {
    // Owned here so that aborting this task aborts every tunnel too.
    let mut tunnels = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = tunnels.join_next(), if !tunnels.is_empty() => continue,
        };
        let Ok((stream, _)) = accepted else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let targets = targets.clone();
        tunnels.spawn(async move {
            let _ = tokio::time::timeout(TUNNEL_LIFETIME, tunnel(stream, targets)).await;
        });
    }
}

async fn tunnel(mut client: TcpStream, targets: Arc<Mutex<Vec<String>>>) -> std::io::Result<()> {
    let head = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(Some(head))) => head,
        _ => return Ok(()),
    };
    let mut words = head.split_whitespace();
    let (Some("CONNECT"), Some(target)) = (words.next(), words.next()) else {
        client
            .write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
            .await?;
        return Ok(());
    };
    targets
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(target.to_owned());
    let port = target
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse::<u16>().ok());
    let upstream = match port {
        Some(port) => TcpStream::connect(("127.0.0.1", port)).await.ok(),
        None => None,
    };
    let Some(mut upstream) = upstream else {
        client
            .write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
            .await?;
        return Ok(());
    };
    client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

/// Reads up to the blank line ending the request head (at most [`MAX_HEAD`] bytes); `None`
/// when the client closes first or sends more.
async fn read_head(client: &mut TcpStream) -> std::io::Result<Option<String>> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while head.len() < MAX_HEAD {
        if client.read(&mut byte).await? == 0 {
            return Ok(None);
        }
        head.push(byte[0]);
        if head.ends_with(b"\r\n\r\n") {
            return Ok(Some(String::from_utf8_lossy(&head).into_owned()));
        }
    }
    Ok(None)
}
