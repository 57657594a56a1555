//! A small plain-HTTP listener for `/metrics` and the health probes, serving a
//! [`super::Router`] like the HTTPS one.

use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt as _;

use super::https::Routes;
use super::router::Answer;

/// Serves `routes` on `listener` until `shutdown` flips.
pub async fn serve<R: Routes>(
    listener: TcpListener,
    routes: R,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            _ = shutdown.changed() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((tcp, _peer)) = accepted else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let routes = routes.clone();
        tokio::spawn(async move {
            let service =
                service_fn(move |request: Request<Incoming>| routes.clone().oneshot(request));
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(tcp), service);
            let _ = connection.await;
        });
    }
}

/// The registry's metrics in the Prometheus text format.
pub fn metrics(registry: &prometheus::Registry) -> Answer {
    use prometheus::Encoder as _;
    let encoder = prometheus::TextEncoder::new();
    let mut body = Vec::new();
    if let Err(error) = encoder.encode(&registry.gather(), &mut body) {
        tracing::warn!(%error, "Cannot encode metrics");
    }
    let mut response = http::Response::new(Full::new(Bytes::from(body)));
    if let Ok(value) = http::header::HeaderValue::from_str(encoder.format_type()) {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, value);
    }
    response
}
