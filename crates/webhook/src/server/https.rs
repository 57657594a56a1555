//! The HTTPS admission listener: a bound on connections, a TLS handshake timeout, an HTTP/1.1
//! header-read timeout, HTTP/2, a body size limit enforced while reading, a write timeout and an
//! idle timeout per connection ([`super::conn`]), graceful drain.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode, Version};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::conn::{self, Activity, Close, Watched};
use super::health::Readiness;
use super::plain::{not_found, text};

/// Admission request bodies above this are refused: the apiserver caps an object at 3 MiB and a
/// review may carry the object and its old version (docs/architecture.md, "Limits").
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// How long an HTTP/1.1 connection whose body was refused may still flush its answer.
const CLOSE_AFTER_REFUSAL: Duration = Duration::from_millis(500);

/// The admission route.
pub const MUTATE_PATH: &str = "/mutate";

/// What answers an admission body: always a JSON AdmissionReview (even for garbage input).
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, body: Bytes) -> impl Future<Output = Bytes> + Send;

    /// The answer when [`Handler::handle`] panicked: a bug must not drop the apiserver's
    /// connection.
    fn recover(&self, body: &[u8]) -> Bytes;
}

/// Connection limits of the admission listener.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub handshake_timeout: Duration,
    pub header_read_timeout: Duration,
    pub body_read_timeout: Duration,
    /// A write (the answer) that makes no progress for this long closes the connection: a
    /// client that never reads does not hold its buffers for good.
    pub write_timeout: Duration,
    /// A connection with no request in flight and no byte moved for this long is closed
    /// gracefully. Longer than the apiserver's own idle timeout for webhook connections (Go's
    /// 90 s), so the client closes first and never races a request against our close.
    pub idle_timeout: Duration,
    pub drain_timeout: Duration,
    pub max_body_bytes: usize,
    /// Open connections at most; the listener stops accepting until one closes.
    pub max_connections: usize,
    /// Concurrent HTTP/2 streams per connection.
    pub max_concurrent_streams: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            drain_timeout: Duration::from_secs(15),
            max_body_bytes: MAX_BODY_BYTES,
            max_connections: 1024,
            max_concurrent_streams: 100,
        }
    }
}

/// Accepts connections until `shutdown` flips, then drains open connections within
/// `limits.drain_timeout` (each is closed gracefully: HTTP/2 GOAWAY, HTTP/1.1 after its answer).
pub async fn serve<H: Handler>(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    handler: Arc<H>,
    limits: Limits,
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
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut connections = JoinSet::new();
    readiness.set_serving(true);
    loop {
        while connections.try_join_next().is_some() {}
        let permit = tokio::select! {
            _ = shutdown.changed() => break,
            permit = slots.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
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
        connections.spawn(connection(
            tcp,
            peer,
            Peers {
                acceptor: acceptor.clone(),
                handler: handler.clone(),
                builder: builder.clone(),
                shutdown: shutdown.clone(),
            },
            limits,
            permit,
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
struct Peers<H> {
    acceptor: TlsAcceptor,
    handler: Arc<H>,
    builder: Arc<auto::Builder<TokioExecutor>>,
    shutdown: watch::Receiver<bool>,
}

/// One connection, from the TLS handshake to its close; holds a connection slot meanwhile.
async fn connection<H: Handler>(
    tcp: TcpStream,
    peer: std::net::SocketAddr,
    peers: Peers<H>,
    limits: Limits,
    _slot: OwnedSemaphorePermit,
) {
    let Peers {
        acceptor,
        handler,
        builder,
        shutdown,
    } = peers;
    let _ = tcp.set_nodelay(true);
    let tls = match tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => {
            tracing::debug!(%error, %peer, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            return;
        }
    };
    let activity = Activity::new();
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
        service_fn(move |request: Request<Incoming>| {
            let (handler, activity) = (handler.clone(), activity.clone());
            let in_flight = activity.request();
            async move {
                let http1 = request.version() < Version::HTTP_2;
                let response = route::<_, Incoming>(request, &*handler, limits).await;
                if http1 && response.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    activity.refused();
                }
                drop(in_flight);
                Ok::<_, Infallible>(response)
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

/// Answers one request: 404 off [`MUTATE_PATH`], 405 for anything but POST, 413 for a body
/// above the limit (declared or read), else the handler's answer. Generic over the body so tests
/// call it in-process.
pub async fn route<H, B>(request: Request<B>, handler: &H, limits: Limits) -> Response<Full<Bytes>>
where
    H: Handler,
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if request.uri().path() != MUTATE_PATH {
        return not_found();
    }
    if request.method() != Method::POST {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "use POST\n");
        response
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("POST"));
        return response;
    }
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limits.max_body_bytes as u64) {
        return too_large();
    }
    let body = Limited::new(request.into_body(), limits.max_body_bytes).collect();
    let body = match tokio::time::timeout(limits.body_read_timeout, body).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(error)) if error.is::<LengthLimitError>() => return too_large(),
        Ok(Err(_)) => return text(StatusCode::BAD_REQUEST, "cannot read the request body\n"),
        Err(_) => return text(StatusCode::REQUEST_TIMEOUT, "request body read timed out\n"),
    };
    let answer = {
        use futures::FutureExt as _;
        match std::panic::AssertUnwindSafe(handler.handle(body.clone()))
            .catch_unwind()
            .await
        {
            Ok(answer) => answer,
            Err(_) => handler.recover(&body),
        }
    };
    let mut response = Response::new(Full::new(answer));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

fn too_large() -> Response<Full<Bytes>> {
    let mut response = text(
        StatusCode::PAYLOAD_TOO_LARGE,
        "admission request body larger than 8 MiB\n",
    );
    response.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    response
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Echoes the body; panics on the body `panic`.
    struct Echo;

    impl Handler for Echo {
        async fn handle(&self, body: Bytes) -> Bytes {
            if body.as_ref() == b"panic" {
                panic!("scripted bug");
            }
            body
        }

        fn recover(&self, body: &[u8]) -> Bytes {
            Bytes::from([b"recovered: ", body].concat())
        }
    }

    async fn call(method: Method, path: &str, body: &'static [u8]) -> Response<Full<Bytes>> {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .body(Full::new(Bytes::from_static(body)))
            .unwrap();
        let limits = Limits {
            max_body_bytes: 16,
            ..Limits::default()
        };
        route(request, &Echo, limits).await
    }

    async fn text_of(response: Response<Full<Bytes>>) -> String {
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn routes_in_process() {
        let answered = call(Method::POST, MUTATE_PATH, b"{}").await;
        assert_eq!(answered.status(), StatusCode::OK);
        assert_eq!(answered.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(text_of(answered).await, "{}");

        for path in ["/", "/mutate/x", "/metrics", "/healthz"] {
            assert_eq!(
                call(Method::POST, path, b"{}").await.status(),
                StatusCode::NOT_FOUND
            );
        }
        let get = call(Method::GET, MUTATE_PATH, b"").await;
        assert_eq!(get.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(get.headers()[header::ALLOW], "POST");

        let too_large = call(Method::POST, MUTATE_PATH, b"01234567890123456789").await;
        assert_eq!(too_large.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(too_large.headers()[header::CONNECTION], "close");
    }

    #[tokio::test]
    async fn a_panicking_handler_still_answers() {
        let answered = call(Method::POST, MUTATE_PATH, b"panic").await;
        assert_eq!(answered.status(), StatusCode::OK);
        assert_eq!(text_of(answered).await, "recovered: panic");
    }
}
