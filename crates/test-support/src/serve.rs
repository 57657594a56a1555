//! The accept loop shared by the in-process servers ([`crate::TokenServer`],
//! [`crate::FakeRegistry`]): hyper 1 on a loopback listener, optionally behind rustls.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

/// Response body type of the in-process servers.
pub(crate) type ResBody = BoxBody<Bytes, Infallible>;

/// A boxed response future.
pub(crate) type ResponseFuture = Pin<Box<dyn Future<Output = http::Response<ResBody>> + Send>>;

/// A request handler; the second argument is the local address the request arrived on.
pub(crate) type Handler =
    Arc<dyn Fn(http::Request<Incoming>, SocketAddr) -> ResponseFuture + Send + Sync>;

/// The longest any connection lives, so nothing outlasts a test by much even if leaked.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(600);

/// A running accept loop; dropping it (or the end of the test's runtime) stops accepting and
/// aborts every open connection.
#[derive(Debug)]
pub(crate) struct Server {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Server {
    /// Binds `127.0.0.1:0` and serves `handler`, over TLS when `tls` is given.
    pub(crate) async fn start(
        tls: Option<rustls::ServerConfig>,
        handler: Handler,
    ) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let acceptor = tls.map(|config| tokio_rustls::TlsAcceptor::from(Arc::new(config)));
        let task = tokio::spawn(accept_loop(listener, acceptor, handler));
        Ok(Self { addr, task })
    }

    /// The bound address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    handler: Handler,
) {
    // Owned here so that aborting this task aborts every connection too.
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let Ok((stream, _peer)) = accepted else {
            // Out of file descriptors or similar: do not spin.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let Ok(local) = stream.local_addr() else {
            continue;
        };
        // As Go servers (the apiserver, registries, token services) do by default: a small
        // write (a watch event, an answer's last part) is sent at once, not held by Nagle's
        // algorithm until the peer acknowledges the previous one.
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        let acceptor = acceptor.clone();
        connections.spawn(async move {
            let _ = tokio::time::timeout(CONNECTION_LIFETIME, async move {
                match acceptor {
                    Some(acceptor) => {
                        if let Ok(Ok(tls)) =
                            tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream))
                                .await
                        {
                            serve_connection(TokioIo::new(tls), local, handler).await;
                        }
                    }
                    None => serve_connection(TokioIo::new(stream), local, handler).await,
                }
            })
            .await;
        });
    }
}

async fn serve_connection<I>(io: I, local: SocketAddr, handler: Handler)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request| {
        let response = handler(request, local);
        async move { Ok::<_, Infallible>(response.await) }
    });
    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
        .serve_connection(io, service)
        .await;
}

/// A complete body.
pub(crate) fn full(body: impl Into<Bytes>) -> ResBody {
    Full::new(body.into()).boxed()
}

/// A response with a status, headers and a complete body.
pub(crate) fn response(
    status: u16,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> http::Response<ResBody> {
    let mut builder = http::Response::builder().status(status);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(full(body)).unwrap_or_else(|_| {
        let mut fallback = http::Response::new(full("invalid scripted response"));
        *fallback.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
        fallback
    })
}

/// Reads a request body up to `limit` bytes; a longer or broken body reads as empty.
pub(crate) async fn read_body(body: Incoming, limit: usize) -> Bytes {
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    }
}
