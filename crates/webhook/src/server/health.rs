//! `/healthz` (the process answers) and `/readyz` (a certificate is loaded and the admission
//! listener accepts connections).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;

/// Readiness, shared by the HTTPS listener and the probe server.
#[derive(Clone, Debug, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Answers a probe path; `None` for any other path (404).
pub fn respond(path: &str, readiness: &Readiness) -> Option<Response<Full<Bytes>>> {
    let (status, body) = match path {
        "/healthz" => (StatusCode::OK, "ok\n"),
        "/readyz" if readiness.is_ready() => (StatusCode::OK, "ok\n"),
        "/readyz" => (StatusCode::SERVICE_UNAVAILABLE, "not ready\n"),
        _ => return None,
    };
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    Some(response)
}
