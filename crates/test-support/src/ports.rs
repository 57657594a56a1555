//! Loopback ports a client cannot get through: one nobody listens on (connecting is refused at
//! once) and one whose listener never accepts and whose queue is full (connecting waits until the
//! client gives up, as a port a firewall drops). Tests check that both look the same to a caller.

use std::net::SocketAddr;

use anyhow::Context as _;
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// A loopback port nobody listens on: connecting is refused.
pub fn closed_port() -> anyhow::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("binding a port")?;
    listener.local_addr().context("the port's address")
}

/// A loopback port where connecting never completes: its listener has a queue of one, filled
/// by a connection of its own, and never accepts. Closed on drop.
#[derive(Debug)]
pub struct UnansweredPort {
    addr: SocketAddr,
    _listener: TcpListener,
    _filler: TcpStream,
}

impl UnansweredPort {
    pub async fn start() -> anyhow::Result<Self> {
        let socket = TcpSocket::new_v4()?;
        socket.bind("127.0.0.1:0".parse()?)?;
        let listener = socket.listen(0).context("listening")?;
        let addr = listener.local_addr()?;
        let filler = TcpStream::connect(addr)
            .await
            .context("filling the listener's queue")?;
        Ok(Self {
            addr,
            _listener: listener,
            _filler: filler,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}
