//! The HTTPS listener: bounds on connections in handshake and established ([`super::slots`]:
//! the oldest in handshake shed when full), a TLS handshake timeout, an HTTP/1.1
//! header-read timeout, HTTP/2, a write timeout and an idle timeout per connection
//! ([`super::conn`]), graceful drain. What answers the requests is a `tower::Service` (a
//! [`super::Router`]); this module knows nothing of routes or bodies, only that an HTTP/1.1
//! connection whose request was answered 413 is closed shortly after (the rest of its body is
//! not read), while a refused HTTP/2 stream is reset alone.

use std::convert::Infallible;
use std::future::Future as _;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, StatusCode, Version};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower::{Service, ServiceExt as _};

use super::conn::{self, Activity, Close, Watched};
use super::health::Readiness;
use super::router::Answer;
use super::slots::{Handshake, SlotLimits, Slots};

/// In the extensions of every request of a connection whose client presented a certificate
/// the TLS handshake verified (only a listener with a client certificate verifier asks for
/// one: the policy engines' lookup endpoint).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientCertificate;

/// How long an HTTP/1.1 connection whose body was refused may still flush its answer.
const CLOSE_AFTER_REFUSAL: Duration = Duration::from_millis(500);

/// What the listener serves: any service answering every request (errors are answers too),
/// whose future is `Send` (HTTP/2 streams are spawned). A [`super::Router`] is one.
pub trait Routes:
    Service<Request<Incoming>, Response = Answer, Error = Infallible, Future: Send + 'static>
    + Clone
    + Send
    + 'static
{
}

impl<S> Routes for S where
    S: Service<Request<Incoming>, Response = Answer, Error = Infallible, Future: Send + 'static>
        + Clone
        + Send
        + 'static
{
}

/// Connection limits of the HTTPS listener.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// From a connection's accept to its established slot ([`super::slots`]): its TLS handshake,
    /// and its wait for room among the established connections.
    pub handshake_timeout: Duration,
    pub header_read_timeout: Duration,
    /// A write (the answer) that makes no progress for this long closes the connection: a
    /// client that never reads does not hold its buffers for good.
    pub write_timeout: Duration,
    /// A connection with no request in flight and no byte moved for this long is closed
    /// gracefully. Longer than the apiserver's own idle timeout for webhook connections (Go's
    /// 90 s), so the client closes first and never races a request against our close.
    pub idle_timeout: Duration,
    pub drain_timeout: Duration,
    /// Established connections at most; when they are all taken, the oldest idle one is closed
    /// to make room.
    pub max_connections: usize,
    /// Connections in their handshake at most; beyond, the oldest in handshake is shed.
    pub max_handshakes: usize,
    /// Connections in their handshake from one source address (IPv6: one /64) at most; beyond,
    /// that source's oldest in handshake is shed.
    pub max_handshakes_per_source: usize,
    /// Concurrent HTTP/2 streams per connection.
    pub max_concurrent_streams: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            handshake_timeout: Duration::from_secs(3),
            header_read_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            drain_timeout: Duration::from_secs(15),
            max_connections: 1024,
            max_handshakes: 256,
            max_handshakes_per_source: 64,
            max_concurrent_streams: 100,
        }
    }
}

impl Limits {
    /// The bounds [`Slots`] enforces.
    pub fn slots(&self) -> SlotLimits {
        SlotLimits {
            max_connections: self.max_connections,
            max_handshakes: self.max_handshakes,
            max_handshakes_per_source: self.max_handshakes_per_source,
            handshake_timeout: self.handshake_timeout,
        }
    }
}

/// Accepts connections until `shutdown` flips, each taking its place in `slots` (which sheds
/// what is over its bounds), then drains open connections within `limits.drain_timeout` (each
/// is closed gracefully: HTTP/2 GOAWAY, HTTP/1.1 after its answer).
pub async fn serve<R: Routes>(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    routes: R,
    limits: Limits,
    slots: Arc<Slots>,
    readiness: Readiness,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_concurrent_streams)
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(10));
    let builder = Arc::new(builder);
    let mut connections = JoinSet::new();
    readiness.set_serving(true);
    loop {
        while connections.try_join_next().is_some() {}
        let accepted = tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // e.g. EMFILE: back off instead of spinning.
                tracing::warn!(%error, "Cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Admitted here, in accept order: the oldest in handshake is the one shed.
        let handshake = slots.admit(peer.ip());
        connections.spawn(connection(
            tcp,
            peer,
            Peers {
                acceptor: acceptor.clone(),
                routes: routes.clone(),
                builder: builder.clone(),
                shutdown: shutdown.clone(),
            },
            limits,
            handshake,
        ));
    }
    readiness.set_serving(false);
    drop(listener);
    let drained = tokio::time::timeout(limits.drain_timeout, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = connections.len(),
            "Connections still open after the drain timeout: closing them"
        );
        connections.abort_all();
    }
}

/// What every connection shares.
struct Peers<R> {
    acceptor: TlsAcceptor,
    routes: R,
    builder: Arc<auto::Builder<TokioExecutor>>,
    shutdown: watch::Receiver<bool>,
}

/// One connection, from the TLS handshake to its close: in handshake until it holds an
/// established slot, which it holds until it closes.
async fn connection<R: Routes>(
    tcp: TcpStream,
    peer: std::net::SocketAddr,
    peers: Peers<R>,
    limits: Limits,
    handshake: Handshake,
) {
    let Peers {
        acceptor,
        routes,
        builder,
        shutdown,
    } = peers;
    let _ = tcp.set_nodelay(true);
    let tls = match handshake.run(acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => {
            tracing::debug!(%error, %peer, "TLS handshake failed");
            return;
        }
        Err(not) => {
            tracing::debug!(%peer, reason = ?not, "TLS handshake not done: connection closed");
            return;
        }
    };
    let client_certificate = tls.get_ref().1.peer_certificates().is_some();
    let activity = Activity::new();
    let _established = match handshake.establish(activity.clone()).await {
        Ok(established) => established,
        Err(not) => {
            tracing::debug!(%peer, reason = ?not, "No established slot: connection closed");
            return;
        }
    };
    // The idle timeout, the shutdown and a refused HTTP/1.1 body (hyper would otherwise keep the
    // connection open to read the rest of a body nobody wants) are watched beside the
    // connection; an HTTP/2 stream is reset alone, its connection and other streams go on.
    let watchdog = tokio::spawn(conn::watchdog(
        activity.clone(),
        limits.idle_timeout,
        CLOSE_AFTER_REFUSAL,
        shutdown,
    ));
    let service = {
        let activity = activity.clone();
        service_fn(move |mut request: Request<Incoming>| {
            if client_certificate {
                request.extensions_mut().insert(ClientCertificate);
            }
            let in_flight = activity.request();
            let http1 = request.version() < Version::HTTP_2;
            let answering = routes.clone().oneshot(request);
            async move {
                let response = answering.await;
                if http1
                    && response
                        .as_ref()
                        .is_ok_and(|r| r.status() == StatusCode::PAYLOAD_TOO_LARGE)
                {
                    in_flight.refused();
                }
                drop(in_flight);
                response
            }
        })
    };
    let io = Watched::new(tls, activity.clone(), limits.write_timeout);
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let mut closing = false;
    let result = std::future::poll_fn(|cx| {
        match activity.close(cx) {
            Close::Now => {
                tracing::debug!(%peer, "Closed a connection after refusing its body");
                return std::task::Poll::Ready(Ok(()));
            }
            Close::Gracefully if !closing => {
                connection.as_mut().graceful_shutdown();
                closing = true;
            }
            Close::Gracefully | Close::No => {}
        }
        connection.as_mut().poll(cx)
    })
    .await;
    watchdog.abort();
    if let Err(error) = result {
        tracing::debug!(%error, %peer, "Connection ended with an error");
    }
}
