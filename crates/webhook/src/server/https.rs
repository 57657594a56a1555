//! The HTTPS admission listener: TLS handshake timeout, HTTP/1.1 header-read timeout, HTTP/2,
//! a body size limit enforced while reading, graceful drain.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};
use tokio_rustls::TlsAcceptor;

use super::health::Readiness;
use super::plain::{not_found, text};

/// Admission request bodies above this are refused: the apiserver caps an object at 3 MiB and a
/// review may carry the object and its old version (docs/architecture.md, "Limits").
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// How long a connection whose body was refused may still flush its answer.
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
    pub drain_timeout: Duration,
    pub max_body_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(15),
            max_body_bytes: MAX_BODY_BYTES,
        }
    }
}

/// Accepts connections until `shutdown` flips, then drains open connections within
/// `limits.drain_timeout`.
pub async fn serve<H: Handler>(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    handler: Arc<H>,
    limits: Limits,
    readiness: Readiness,
    mut shutdown: watch::Receiver<bool>,
) {
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    readiness.set(true);
    loop {
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
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let handler = handler.clone();
        let builder = builder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls =
                match tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await {
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
            // Set when a body is refused: hyper would otherwise keep the connection open to
            // read the rest of a body nobody wants.
            let refused = Arc::new(Notify::new());
            let refused_in_service = refused.clone();
            let service = service_fn(move |request: Request<Incoming>| {
                let handler = handler.clone();
                let refused = refused_in_service.clone();
                async move {
                    let response = route::<_, Incoming>(request, &*handler, limits).await;
                    if response.status() == StatusCode::PAYLOAD_TOO_LARGE {
                        refused.notify_one();
                    }
                    Ok::<_, Infallible>(response)
                }
            });
            let connection = builder.serve_connection(TokioIo::new(tls), service);
            tokio::select! {
                result = watcher.watch(connection) => {
                    if let Err(error) = result {
                        tracing::debug!(%error, %peer, "Connection ended with an error");
                    }
                }
                () = async {
                    refused.notified().await;
                    // Time to flush the 413 before the connection is dropped.
                    tokio::time::sleep(CLOSE_AFTER_REFUSAL).await;
                } => tracing::debug!(%peer, "Closed a connection after refusing its body"),
            }
        });
    }
    readiness.set(false);
    drop(listener);
    if tokio::time::timeout(limits.drain_timeout, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("Connections still open after the drain timeout");
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
