//! kube's real `Client` talking to the scripted API server over in-memory pipes instead of a
//! loopback socket: each request is one HTTP/1.1 exchange on a `tokio::io::duplex` pair, served
//! by the same handler. Without a socket a test can run on tokio's paused clock: time moves only
//! when every task waits on a timer, so backoffs and jitter are counted in virtual seconds, and
//! no client timeout fires because a socket sat idle.

use std::convert::Infallible;
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use super::handler;
use super::store::{lock, Shared};
use super::KubeApi;

/// Bytes buffered in each direction of a pipe.
const PIPE: usize = 64 * 1024;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl KubeApi {
    /// kube's real `Client` for this server over in-memory pipes (namespace `default`); works on
    /// tokio's paused clock.
    pub fn in_memory_client(&self) -> kube::Client {
        let state = self.state.clone();
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            exchange(state.clone(), request)
        });
        kube::Client::new(service, "default")
    }

    /// Ends every watch after `lifetime` (`Duration::ZERO`: as soon as it has sent what it had
    /// to replay), like an apiserver or a proxy that cuts watches short; `None` restores the
    /// default (the client's `timeoutSeconds`).
    pub fn watch_lifetime(&self, lifetime: Option<Duration>) {
        lock(&self.state).watch_lifetime = lifetime;
    }
}

async fn exchange(
    state: Shared,
    request: http::Request<kube::client::Body>,
) -> Result<http::Response<Incoming>, BoxError> {
    let (client_io, server_io) = tokio::io::duplex(PIPE);
    let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
        let state = state.clone();
        async move { Ok::<_, Infallible>(handler::handle(state, request).await) }
    });
    tokio::spawn(async move {
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(server_io), service)
            .await;
    });
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(client_io)).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender.send_request(request).await?)
}
