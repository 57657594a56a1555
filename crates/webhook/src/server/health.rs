//! `/healthz` (the process answers) and `/readyz` (ready for admissions: a certificate is loaded,
//! the admission listener accepts connections, and the process is not shutting down).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use http::StatusCode;

use super::router::{text, Answer};
use super::tls::Reloadable;

/// Readiness, shared by the HTTPS listener, the shutdown sequence and the probe server.
#[derive(Clone, Debug)]
pub struct Readiness(Arc<State>);

#[derive(Debug)]
struct State {
    tls: Arc<Reloadable>,
    serving: AtomicBool,
    terminating: AtomicBool,
}

impl Readiness {
    /// Not ready until the listener serves and `tls` holds a certificate.
    pub fn new(tls: Arc<Reloadable>) -> Self {
        Self(Arc::new(State {
            tls,
            serving: AtomicBool::new(false),
            terminating: AtomicBool::new(false),
        }))
    }

    /// The admission listener accepts connections (or stopped).
    pub fn set_serving(&self, serving: bool) {
        self.0.serving.store(serving, Ordering::Release);
    }

    /// The process is shutting down: not ready any more, so endpoints drop it, while it still
    /// answers what reaches it.
    pub fn set_terminating(&self) {
        self.0.terminating.store(true, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.0.serving.load(Ordering::Acquire)
            && !self.0.terminating.load(Ordering::Acquire)
            && self.0.tls.has_certificate()
    }
}

/// `/healthz`: the process answers.
pub fn healthz() -> Answer {
    text(StatusCode::OK, "ok\n")
}

/// `/readyz`: 200 when ready, else 503.
pub fn readyz(readiness: &Readiness) -> Answer {
    if readiness.is_ready() {
        text(StatusCode::OK, "ok\n")
    } else {
        text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
    }
}
