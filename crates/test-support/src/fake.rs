//! An in-process fake registry for what the real one will not do.

mod behavior;
mod body;
mod hostile;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use http_body_util::BodyExt as _;
use hyper::body::Incoming;

pub use behavior::Behavior;
pub use hostile::{FanOut, Generator};

use crate::push::sha256_digest;
use crate::serve::{read_body, response, ResBody, Server};
use crate::{BuiltImage, TestCa};

/// Which of the fake's two listeners a request arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// [`FakeRegistry::host`].
    Main,
    /// [`FakeRegistry::other_host`] (the redirect target, "another host").
    Other,
}

/// One request the fake received.
#[derive(Debug, Clone)]
pub struct FakeRequest {
    /// The listener it arrived on.
    pub listener: Listener,
    /// Method.
    pub method: String,
    /// Path without the query.
    pub path: String,
    /// Raw query, if any.
    pub query: Option<String>,
    /// All request headers.
    pub headers: http::HeaderMap,
}

impl FakeRequest {
    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Whether an `Authorization` header arrived.
    pub fn has_authorization(&self) -> bool {
        self.headers.contains_key(http::header::AUTHORIZATION)
    }
}

#[derive(Debug)]
struct Route {
    behavior: Behavior,
    hits: usize,
}

#[derive(Debug, Default)]
struct State {
    routes: Mutex<HashMap<String, Route>>,
    requests: Mutex<Vec<FakeRequest>>,
    other_base_url: OnceLock<String>,
    /// Requests being answered now, and the most at any time.
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

/// Counts a request in flight until dropped (also when the client goes away mid-answer).
struct InFlight<'a>(&'a State);

impl<'a> InFlight<'a> {
    fn enter(state: &'a State) -> Self {
        let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        state.max_in_flight.fetch_max(now, Ordering::SeqCst);
        Self(state)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A scripted HTTP server on two `127.0.0.1` listeners ("main" and "other", a distinct host for
/// cross-host redirects), sharing one route table keyed by path. Unscripted paths answer 404
/// with the registry's error envelope, except `/v2/`, which answers 200 `{}`. Every request is
/// recorded with its headers. Stops on drop.
///
/// ```no_run
/// # async fn demo() -> anyhow::Result<()> {
/// use noe_test_support::{Behavior, FakeRegistry};
/// let fake = FakeRegistry::start().await?;
/// fake.route("/v2/slow/manifests/1", Behavior::Hang);
/// fake.route("/v2/busy/manifests/1", Behavior::too_many_requests(1));
/// fake.route("/v2/app/blobs/sha256:abc", Behavior::redirect_to_other("/storage/abc"));
/// // ... after the code under test ran:
/// assert!(fake.requests().iter().filter(|r| r.path == "/storage/abc").all(|r| !r.has_authorization()));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct FakeRegistry {
    main: Server,
    other: Server,
    tls: bool,
    state: Arc<State>,
}

impl FakeRegistry {
    /// Starts both listeners over plain HTTP.
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with(None).await
    }

    /// Starts both listeners over HTTPS with loopback certificates from `ca`.
    pub async fn start_tls(ca: &TestCa) -> anyhow::Result<Self> {
        Self::start_with(Some(ca)).await
    }

    async fn start_with(ca: Option<&TestCa>) -> anyhow::Result<Self> {
        let state = Arc::new(State::default());
        let tls_config = || -> anyhow::Result<Option<rustls::ServerConfig>> {
            match ca {
                Some(ca) => Ok(Some(ca.loopback_cert()?.server_config()?)),
                None => Ok(None),
            }
        };
        let handler = |listener: Listener| -> crate::serve::Handler {
            let state = state.clone();
            Arc::new(move |request, local| {
                let state = state.clone();
                Box::pin(async move { state.handle(listener, request, local).await })
            })
        };
        let main = Server::start(tls_config()?, handler(Listener::Main)).await?;
        let other = Server::start(tls_config()?, handler(Listener::Other)).await?;
        let fake = Self {
            main,
            other,
            tls: ca.is_some(),
            state,
        };
        let _ = fake.state.other_base_url.set(fake.other_base_url());
        Ok(fake)
    }

    fn scheme(&self) -> &'static str {
        if self.tls {
            "https"
        } else {
            "http"
        }
    }

    /// `127.0.0.1:PORT` of the main listener.
    pub fn host(&self) -> String {
        self.main.addr().to_string()
    }

    /// `http(s)://127.0.0.1:PORT` of the main listener.
    pub fn base_url(&self) -> String {
        format!("{}://{}", self.scheme(), self.host())
    }

    /// `127.0.0.1:PORT` of the second listener.
    pub fn other_host(&self) -> String {
        self.other.addr().to_string()
    }

    /// `http(s)://127.0.0.1:PORT` of the second listener.
    pub fn other_base_url(&self) -> String {
        format!("{}://{}", self.scheme(), self.other_host())
    }

    /// Scripts `path` (without query; on both listeners), replacing its previous behavior and
    /// resetting its hit count.
    pub fn route(&self, path: &str, behavior: Behavior) {
        self.state
            .routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path.to_owned(), Route { behavior, hits: 0 });
    }

    /// Scripts a manifest under `/v2/<repository>/manifests/<tag>` and under its digest
    /// (correct `Content-Type` and `Docker-Content-Digest`); returns the digest.
    pub fn script_manifest(
        &self,
        repository: &str,
        tag: &str,
        media_type: &str,
        body: &[u8],
    ) -> String {
        let digest = sha256_digest(body);
        let behavior = Behavior::manifest(media_type, body.to_vec());
        self.route(&manifest_path(repository, tag), behavior.clone());
        self.route(&manifest_path(repository, &digest), behavior);
        digest
    }

    /// Scripts a blob at `/v2/<repository>/blobs/<digest>`; returns the digest.
    pub fn script_blob(&self, repository: &str, body: &[u8]) -> String {
        let digest = sha256_digest(body);
        self.route(
            &blob_path(repository, &digest),
            Behavior::body(200, "application/octet-stream", body.to_vec())
                .with_header("docker-content-digest", &digest),
        );
        digest
    }

    /// Scripts a single image (see [`crate::build_image`]): its manifest (by tag and digest) and
    /// its config blob. Override a route afterwards to break one piece.
    pub fn script_image(&self, repository: &str, tag: &str, image: &BuiltImage) {
        self.script_manifest(
            repository,
            tag,
            &image.descriptor.media_type,
            &image.manifest,
        );
        self.script_blob(repository, &image.config);
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<FakeRequest> {
        self.state
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The requests for `path`.
    pub fn requests_to(&self, path: &str) -> Vec<FakeRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.path == path)
            .collect()
    }

    /// `requests().len()`.
    pub fn request_count(&self) -> usize {
        self.state
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// The most requests the fake was answering at the same time (until their headers were
    /// sent) since it started or since [`FakeRegistry::reset_requests`].
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }

    /// Forgets the recorded requests (and the in-flight maximum).
    pub fn reset_requests(&self) {
        self.state.max_in_flight.store(0, Ordering::SeqCst);
        self.state
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

/// `/v2/<repository>/manifests/<reference>`.
pub fn manifest_path(repository: &str, reference: &str) -> String {
    format!("/v2/{repository}/manifests/{reference}")
}

/// `/v2/<repository>/blobs/<digest>`.
pub fn blob_path(repository: &str, digest: &str) -> String {
    format!("/v2/{repository}/blobs/{digest}")
}

impl State {
    fn pick(&self, path: &str) -> Option<Behavior> {
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        let route = routes.get_mut(path)?;
        let hit = route.hits;
        route.hits += 1;
        Some(match &route.behavior {
            Behavior::Sequence(steps) => steps
                .get(hit)
                .or_else(|| steps.last())
                .cloned()
                .unwrap_or_else(|| Behavior::status(500)),
            other => other.clone(),
        })
    }

    async fn handle(
        &self,
        listener: Listener,
        request: http::Request<Incoming>,
        _local: SocketAddr,
    ) -> http::Response<ResBody> {
        let _in_flight = InFlight::enter(self);
        let (parts, body) = request.into_parts();
        // Drain (bounded) so keep-alive connections stay usable.
        let _ = read_body(body, 1024 * 1024).await;
        let path = parts.uri.path().to_owned();
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(FakeRequest {
                listener,
                method: parts.method.to_string(),
                path: path.clone(),
                query: parts.uri.query().map(str::to_owned),
                headers: parts.headers,
            });
        let behavior = match self.pick(&path) {
            Some(behavior) => behavior,
            None if path == "/v2/" => Behavior::json(200, &serde_json::json!({})),
            None => Behavior::json(
                404,
                &serde_json::json!({"errors": [{"code": "NAME_UNKNOWN", "message": "repository name not known to registry", "detail": {"path": path}}]}),
            ),
        };
        self.answer(behavior).await
    }

    fn answer(
        &self,
        behavior: Behavior,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = http::Response<ResBody>> + Send + '_>>
    {
        Box::pin(self.answer_now(behavior))
    }

    async fn answer_now(&self, behavior: Behavior) -> http::Response<ResBody> {
        match behavior {
            Behavior::Respond {
                status,
                headers,
                body,
            } => respond(status, &headers, body),
            Behavior::Hang => {
                tokio::time::sleep(Duration::from_secs(600)).await;
                response(504, &[], "hung")
            }
            Behavior::Trickle {
                status,
                headers,
                body,
                interval,
            } => with_body(status, &headers, body::Trickle::new(body, interval).boxed()),
            Behavior::Oversized {
                status,
                headers,
                len,
                declare_length,
            } => with_body(
                status,
                &headers,
                body::Filler::new(len, declare_length).boxed(),
            ),
            Behavior::RedirectToOther { path } => {
                let base = self.other_base_url.get().cloned().unwrap_or_default();
                response(307, &[("location", &format!("{base}{path}"))], "")
            }
            Behavior::Redirect { location } => response(307, &[("location", &location)], ""),
            Behavior::Delayed { delay, then } => {
                tokio::time::sleep(delay).await;
                self.answer(*then).await
            }
            Behavior::Generated(make) => self.answer((make.0)()).await,
            Behavior::Sequence(_) => response(500, &[], "nested sequence"),
        }
    }
}

fn respond(
    status: u16,
    headers: &[(String, String)],
    body: bytes::Bytes,
) -> http::Response<ResBody> {
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    response(status, &headers, body)
}

fn with_body(status: u16, headers: &[(String, String)], body: ResBody) -> http::Response<ResBody> {
    let mut response = respond(status, headers, bytes::Bytes::new());
    *response.body_mut() = body;
    response
}
