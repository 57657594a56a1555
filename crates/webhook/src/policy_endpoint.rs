//! The lookup endpoint for policy engines (`--lookup-addr`): which platforms images support,
//! asked over HTTPS by Gatekeeper's external data ([`GATEKEEPER_PATH`]) and Kyverno's `apiCall`
//! or CEL `http.Post` ([`KYVERNO_PATH`]).
//!
//! Each request is, in order: POST only (405), its caller authenticated before its body is read
//! ([`auth`]: 401/403/503 and no data otherwise), the body read within 1 MiB (413), parsed as
//! the engine's request with at most 256 keys ([`wire`]: 400), then answered with HTTP 200 and
//! one answer per key: from the cache first, the others looked up with the server's resolver
//! ([`images`]), each within min(the caller's `?timeout=`, `--lookup-deadline`, 2 s) or a
//! `timeout:` error of its own (the lookup goes on and fills the cache for the next request).
//! Counted in [`metrics`]. An answer written from the cache alone is remembered by its body,
//! and the same request answered with it while the cache's answers it was written from hold
//! ([`noe_registry::cache::Stamp`]): the same bytes a new reading would write.
//!
//! The routes are `tower::Service`s for the transport's [`crate::server::Router`], served on a
//! listener of their own ([`crate::server::Running::add_https`]) with the webhook's certificate
//! and [`server_config`]'s client authentication.

pub mod auth;
pub mod client_ca;
pub mod images;
pub mod metrics;
pub mod token;
pub mod wire;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;

use crate::server::post::{self, Answerer, Answering};
use crate::server::router::{Answer, NotFound, Route, Router};
use crate::server::tls::{provider, Reloadable};
use crate::server::{BodyLimits, ClientCertificate};
use crate::table::{Table, Weighed};
pub use auth::{Auth, Caller, KubeTokenReviews, Refused, TokenAuth, TokenReviewer};
pub use client_ca::ClientCa;
pub use images::{ImageSource, RegistryImages};
pub use metrics::{Engine, Metrics, Outcome, TokenMetrics};
pub use wire::KeyAnswer;

/// Gatekeeper's external-data route (a `Provider`'s `spec.url` path).
pub const GATEKEEPER_PATH: &str = "/gatekeeper/v1/platforms";
/// Kyverno's route (`apiCall.service.url`, CEL `http.Post`).
pub const KYVERNO_PATH: &str = "/kyverno/v1/platforms";
/// Request bodies above this are refused (413).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// The longest a request may take, whatever the caller and `--lookup-deadline` say: Gatekeeper
/// asks providers to answer within 1–2 s.
pub const MAX_DEADLINE: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyEndpointError {
    #[error("cannot read the lookup client CA {}", path.display())]
    ReadClientCa {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no usable PEM certificate in the lookup client CA {}", path.display())]
    ClientCa { path: PathBuf },
    #[error("cannot build the lookup endpoint's TLS configuration")]
    Config(#[source] rustls::Error),
}

/// The listener's TLS configuration: the webhook's serving certificate (`tls`, reloaded), TLS
/// 1.3 and 1.2, and with `client_ca` (`--lookup-client-ca`, reloaded: [`ClientCa`]) client
/// certificates asked for and verified against it (a client without one may still present a
/// Bearer token).
pub fn server_config(
    tls: &Arc<Reloadable>,
    client_ca: Option<&Arc<ClientCa>>,
) -> Result<rustls::ServerConfig, PolicyEndpointError> {
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(PolicyEndpointError::Config)?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => builder.with_client_cert_verifier(ca.clone()),
    };
    let mut config = builder.with_cert_resolver(tls.clone());
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The endpoint: who may ask, where answers come from, within what. Cheap to share behind an
/// `Arc`.
#[derive(derive_more::Debug)]
#[debug("PolicyEndpoint {{ auth: {auth:?}, deadline: {deadline:?}, .. }}")]
pub struct PolicyEndpoint {
    auth: Auth,
    images: Arc<dyn ImageSource>,
    /// min(`--lookup-deadline`, [`MAX_DEADLINE`]).
    deadline: Duration,
    /// The endpoint's lookups in flight at most (those still finishing after their request's
    /// deadline included).
    in_flight: Arc<tokio::sync::Semaphore>,
    metrics: Metrics,
    /// Answers by request body, while the cache answers they were written from hold.
    answers: Table<Remembered>,
    /// Whether an answer was ever remembered: until then no body is hashed to look for one
    /// (a source that cannot stamp its answers, `--platform-overrides`, never remembers).
    remembers: std::sync::atomic::AtomicBool,
    /// What proves platforms false ([`noe_core::truth`]); `None`: nothing does.
    corrections: Option<Arc<dyn noe_core::truth::Corrections>>,
}

/// Bytes of remembered answers, at most.
const REMEMBERED_BYTES: u64 = 4 * 1024 * 1024;

/// An answer written from cached answers only, and what they depended on.
#[derive(Debug)]
struct Remembered {
    body: Bytes,
    outcome: Outcome,
    keys: usize,
    failed: usize,
    stamp: noe_registry::cache::Stamp,
    /// The generation of the corrections it was written under: never answered under another.
    generation: u64,
}

impl Weighed for Remembered {
    fn weight(&self) -> u64 {
        u64::try_from(self.body.len().saturating_add(std::mem::size_of::<Self>()))
            .unwrap_or(u64::MAX)
    }
}

impl PolicyEndpoint {
    /// Answers within `deadline` (at most [`MAX_DEADLINE`]), with at most `max_in_flight`
    /// registry lookups at once.
    pub fn new(
        auth: Auth,
        images: Arc<dyn ImageSource>,
        deadline: Duration,
        max_in_flight: usize,
        metrics: Metrics,
    ) -> Self {
        Self {
            auth,
            images,
            deadline: deadline.min(MAX_DEADLINE),
            in_flight: Arc::new(tokio::sync::Semaphore::new(
                max_in_flight.clamp(1, tokio::sync::Semaphore::MAX_PERMITS),
            )),
            metrics,
            answers: Table::new(REMEMBERED_BYTES, 1024),
            remembers: std::sync::atomic::AtomicBool::new(false),
            corrections: None,
        }
    }

    /// Answers with the platforms `corrections` prove false left out (by each image's digest),
    /// as every decision does.
    #[must_use]
    pub fn with_corrections(mut self, corrections: Arc<dyn noe_core::truth::Corrections>) -> Self {
        self.corrections = Some(corrections);
        self
    }

    /// The generation of the corrections answers are written under.
    fn generation(&self) -> u64 {
        self.corrections.as_ref().map_or(0, |c| c.generation())
    }

    /// Answers one request of `engine`'s route.
    pub async fn answer<B>(&self, engine: Engine, request: Request<B>) -> Answer
    where
        B: hyper::body::Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let started = Instant::now();
        let (outcome, answer) = self.respond(engine, request).await;
        self.metrics
            .observe(engine, outcome, started.elapsed().as_secs_f64());
        answer
    }

    async fn respond<B>(&self, engine: Engine, request: Request<B>) -> (Outcome, Answer)
    where
        B: hyper::body::Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let now = tokio::time::Instant::now();
        if request.method() != Method::POST {
            post::drain(request.into_body()).await;
            return (Outcome::Invalid, post::method_not_allowed());
        }
        let verified = request.extensions().get::<ClientCertificate>().is_some();
        let caller = match self.auth.caller(verified, request.headers()).await {
            Ok(caller) => caller,
            Err(refused) => {
                // Not read for the answer, only so that the refusal reaches every client whole.
                post::drain(request.into_body()).await;
                return self.refuse(engine, &refused);
            }
        };
        let budget = match caller_timeout(request.uri().query()) {
            Ok(Some(caller)) => caller.min(self.deadline),
            Ok(None) => self.deadline,
            Err(invalid) => {
                post::drain(request.into_body()).await;
                return (Outcome::Invalid, invalid_answer(engine, &invalid));
            }
        };
        // A margin to serialize and send the answer: a tenth, at most 100 ms.
        let deadline = now + budget.saturating_sub((budget / 10).min(Duration::from_millis(100)));
        let limits = BodyLimits {
            max_bytes: MAX_BODY_BYTES,
            read_timeout: budget,
        };
        let body = match post::read_body(request, limits).await {
            Ok(body) => body,
            Err(refused) => {
                let outcome = if refused.status() == StatusCode::BAD_REQUEST {
                    Outcome::Invalid
                } else {
                    Outcome::TooLarge
                };
                return (outcome, refused);
            }
        };
        // The same request answered from the cache before, and every cache answer it was
        // written from still the same: that answer again, byte for byte.
        let key = || Table::<Remembered>::key(&("lookup", engine.label(), &body[..]));
        let generation = self.generation();
        let remembered = self
            .remembers
            .load(std::sync::atomic::Ordering::Relaxed)
            .then(key);
        if let Some(hit) = remembered
            .and_then(|remembered| self.answers.get(remembered))
            .filter(|hit| hit.generation == generation && self.images.holds(&hit.stamp))
        {
            tracing::debug!(caller = engine.label(), who = ?caller, keys = hit.keys, failed = hit.failed, "Lookup answered (as before)");
            return (hit.outcome, json(StatusCode::OK, hit.body.clone()));
        }
        let keys = match engine {
            Engine::Gatekeeper => wire::gatekeeper_keys(&body),
            Engine::Kyverno => wire::kyverno_keys(&body),
        };
        let keys = match keys {
            Ok(keys) => keys,
            Err(invalid) => {
                tracing::debug!(error = %invalid, caller = engine.label(), "Invalid lookup request");
                return (
                    Outcome::Invalid,
                    invalid_answer(engine, &invalid.to_string()),
                );
            }
        };
        let mut answers = images::answer(&self.images, &self.in_flight, &keys, deadline).await;
        if let Some(corrections) = &self.corrections {
            answers.correct(corrections.as_ref());
        }
        let outcome = match answers.failed {
            0 => Outcome::Ok,
            n if n == answers.distinct() => Outcome::Failed,
            _ => Outcome::Partial,
        };
        tracing::debug!(caller = engine.label(), who = ?caller, keys = keys.len(), failed = answers.failed, "Lookup answered");
        let find = |i: usize| answers.at(i);
        let answer = match engine {
            Engine::Gatekeeper => wire::gatekeeper_response(&keys, find),
            Engine::Kyverno => wire::kyverno_response(&keys, find),
        };
        if let Some(stamp) = answers.stamp.filter(|stamp| self.images.holds(stamp)) {
            let entry = Remembered {
                body: answer.clone(),
                outcome,
                keys: keys.len(),
                failed: answers.failed,
                stamp,
                generation,
            };
            self.answers.remember(remembered.unwrap_or_else(key), entry);
            self.remembers
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        (outcome, json(StatusCode::OK, answer))
    }

    /// 401, 403 or 503, with no data.
    fn refuse(&self, engine: Engine, refused: &Refused) -> (Outcome, Answer) {
        let (outcome, status) = match refused {
            Refused::Unauthenticated => (Outcome::Unauthenticated, StatusCode::UNAUTHORIZED),
            Refused::Forbidden => (Outcome::Forbidden, StatusCode::FORBIDDEN),
            Refused::Unavailable(_) | Refused::Throttled => {
                (Outcome::Unavailable, StatusCode::SERVICE_UNAVAILABLE)
            }
        };
        tracing::debug!(error = %refused, caller = engine.label(), "Lookup refused");
        let message = refused.to_string();
        let body = match engine {
            Engine::Gatekeeper => wire::gatekeeper_system_error(&message),
            Engine::Kyverno => wire::kyverno_error(&message),
        };
        let mut answer = json(status, body);
        if status == StatusCode::UNAUTHORIZED && self.auth.tokens.is_some() {
            answer
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if *refused == Refused::Throttled {
            answer
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        (outcome, answer)
    }
}

/// 400 with the engine's error body.
fn invalid_answer(engine: Engine, message: &str) -> Answer {
    let body = match engine {
        Engine::Gatekeeper => wire::gatekeeper_system_error(message),
        Engine::Kyverno => wire::kyverno_error(message),
    };
    json(StatusCode::BAD_REQUEST, body)
}

fn json(status: StatusCode, body: Bytes) -> Answer {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The caller's `timeout` query parameter: `1500ms`, `1.5s` or `2` (seconds); `None` without
/// one. A caller sets it in the URL it is configured with (a Gatekeeper `Provider`'s `url`, to
/// match its `spec.timeout`).
pub fn caller_timeout(query: Option<&str>) -> Result<Option<Duration>, String> {
    let Some(query) = query else {
        return Ok(None);
    };
    let Some(value) = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find_map(|(name, value)| (name == "timeout").then_some(value))
    else {
        return Ok(None);
    };
    let invalid = || {
        format!(
            "invalid timeout {:?} (expected e.g. 1500ms, 1.5s or 2)",
            value.chars().take(32).collect::<String>()
        )
    };
    let (number, scale) = if let Some(ms) = value.strip_suffix("ms") {
        (ms, 0.001)
    } else if let Some(s) = value.strip_suffix('s') {
        (s, 1.0)
    } else {
        (value, 1.0)
    };
    let seconds: f64 = number.parse().map_err(|_| invalid())?;
    let seconds = seconds * scale;
    if !seconds.is_finite() || seconds <= 0.0 {
        return Err(invalid());
    }
    Ok(Some(Duration::from_secs_f64(
        seconds.min(MAX_DEADLINE.as_secs_f64()),
    )))
}

/// One policy engine's route: `engine`'s requests answered by the endpoint.
#[derive(Clone, Debug)]
pub struct EngineRoute {
    endpoint: Arc<PolicyEndpoint>,
    engine: Engine,
}

impl Answerer for EngineRoute {
    async fn answer<B>(&self, request: Request<B>) -> Answer
    where
        B: hyper::body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.endpoint.answer(self.engine, request).await
    }
}

/// The policy endpoint's router: one route per engine.
pub type Routes = Router<Route<Answering<EngineRoute>, Route<Answering<EngineRoute>, NotFound>>>;

/// The two routes over one endpoint; anything else is 404.
pub fn routes(endpoint: Arc<PolicyEndpoint>) -> Routes {
    Router::new()
        .route(
            GATEKEEPER_PATH,
            Answering(EngineRoute {
                endpoint: endpoint.clone(),
                engine: Engine::Gatekeeper,
            }),
        )
        .route(
            KYVERNO_PATH,
            Answering(EngineRoute {
                endpoint,
                engine: Engine::Kyverno,
            }),
        )
}

#[cfg(test)]
mod tests;
