//! A small plain-HTTP server for `/metrics` and the health probes.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Routes a GET path to a response; `None` is a 404.
pub type Router = Arc<dyn Fn(&str) -> Option<Response<Full<Bytes>>> + Send + Sync>;

/// Serves `router` on `listener` until `shutdown` flips.
pub async fn serve(listener: TcpListener, router: Router, mut shutdown: watch::Receiver<bool>) {
    loop {
        let accepted = tokio::select! {
            _ = shutdown.changed() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((tcp, _peer)) = accepted else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let router = router.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<Incoming>| {
                let response = router(request.uri().path()).unwrap_or_else(not_found);
                async move { Ok::<_, Infallible>(response) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(tcp), service);
            let _ = connection.await;
        });
    }
}

/// The registry's metrics in the Prometheus text format.
pub fn metrics(registry: &prometheus::Registry) -> Response<Full<Bytes>> {
    use prometheus::Encoder as _;
    let encoder = prometheus::TextEncoder::new();
    let mut body = Vec::new();
    if let Err(error) = encoder.encode(&registry.gather(), &mut body) {
        tracing::warn!(%error, "Cannot encode metrics");
    }
    let mut response = Response::new(Full::new(Bytes::from(body)));
    if let Ok(value) = http::header::HeaderValue::from_str(encoder.format_type()) {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, value);
    }
    response
}

pub fn not_found() -> Response<Full<Bytes>> {
    text(StatusCode::NOT_FOUND, "not found\n")
}

pub fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response
}
