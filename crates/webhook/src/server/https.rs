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

use super::plain::{not_found, text};
use crate::health::Readiness;

/// Admission request bodies above this are refused (DESIGN.md §5: up to 8 MiB accepted).
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// How long a connection whose body was refused may still flush its answer.
const CLOSE_AFTER_REFUSAL: Duration = Duration::from_millis(500);

/// The admission route.
pub const MUTATE_PATH: &str = "/mutate";

/// What answers an admission body: always a JSON AdmissionReview (even for garbage input).
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, body: Bytes) -> impl Future<Output = Bytes> + Send;
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
                    let response = route(request, &*handler, limits).await;
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

async fn route<H: Handler>(
    request: Request<Incoming>,
    handler: &H,
    limits: Limits,
) -> Response<Full<Bytes>> {
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
    let answer = handler.handle(body).await;
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
