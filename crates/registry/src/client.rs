//! The HTTP layer: one reqwest client with our TLS config and the address guard, per-request
//! timeouts, a streamed body cap, one retry on 429/5xx honouring `Retry-After`, and redirects
//! followed by hand so `Authorization` never leaves the origin it was meant for.

pub(crate) mod blob;
pub(crate) mod host_tls;
pub(crate) mod hosts_toml;
pub(crate) mod pool;
pub(crate) mod tls;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::header::{AUTHORIZATION, CONTENT_LENGTH, LOCATION, RETRY_AFTER};
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use url::Url;

use crate::budget::Context;
use crate::error::host_for_message;
use crate::hosts::{Endpoint, TlsFiles};
use crate::metrics::{Kind, Metrics};
use crate::ssrf::{BlockedAddress, Guard, NameRefused};
use crate::throttle::Throttle;
use crate::{Config, Error};

/// Largest manifest, config blob or token response we read (distribution's manifest limit).
pub const BODY_LIMIT: usize = 4 * 1024 * 1024;
const MAX_REDIRECTS: usize = 5;
const DEFAULT_RETRY_WAIT: Duration = Duration::from_millis(200);

/// Requests one image lookup may send in all: every endpoint, credential, challenge probe,
/// token request, redirect and retry counts. A single image costs 2 to 4, an index with 8
/// platform-less entries 17 plus auth; a nested fan-out stops here.
pub const MAX_REQUESTS_PER_LOOKUP: usize = 32;

/// A fully read response; for a layer ([`Kind::Layer`]) answered with success, its body is
/// left unread in `stream` instead (`body` is empty).
#[derive(Debug)]
pub struct Response {
    /// The URL that answered: the request's, or the last redirect target.
    pub url: Url,
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// The unread body of a layer: the caller reads it chunk by chunk, within its own
    /// deadline and byte budget.
    pub stream: Option<reqwest::Response>,
}

impl Response {
    pub fn content_type(&self) -> Option<&str> {
        self.headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
    }
}

/// A request to send; `form` makes it a POST.
#[derive(Debug)]
pub struct Request {
    pub url: Url,
    pub headers: HeaderMap,
    /// Sent only while the request stays on `url`'s origin (containerd host headers), without
    /// replacing a header of `headers`.
    pub origin_headers: HeaderMap,
    pub form: Option<Vec<(&'static str, String)>>,
    pub kind: Kind,
}

/// What one containerd host changes: its `ca` and `client` files' contents, `skip_verify` and
/// `dial_timeout`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct TlsKey {
    files: Option<Arc<TlsFiles>>,
    skip_verify: bool,
    dial_timeout: Option<Duration>,
}

/// Bound on distinct per-host TLS configurations kept.
const MAX_TLS_VARIANTS: usize = 64;

/// The HTTP client; cheap to clone. [`Http::for_host`] gives one with a containerd host's TLS.
#[derive(Clone, Debug)]
pub struct Http {
    client: Clients,
    shared: Arc<Shared>,
    /// The containerd host configuration this client was built for, if any.
    host: Option<Arc<TlsKey>>,
}

/// The URL schemes reqwest sends through a proxy, from the environment it reads
/// (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, upper or lower case). `NO_PROXY` is not consulted:
/// a host it exempts is checked here and again by the resolving connector, which costs one more
/// name lookup and changes nothing.
#[derive(Clone, Copy, Debug, Default)]
struct Proxied {
    http: bool,
    https: bool,
}

impl Proxied {
    fn from_env() -> Self {
        let set = |names: &[&str]| {
            names
                .iter()
                .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()))
        };
        let all = set(&["ALL_PROXY", "all_proxy"]);
        Self {
            http: all || set(&["HTTP_PROXY", "http_proxy"]),
            https: all || set(&["HTTPS_PROXY", "https_proxy"]),
        }
    }

    fn applies(self, url: &Url) -> bool {
        match url.scheme() {
            "https" => self.https,
            "http" => self.http,
            _ => false,
        }
    }
}

/// One TLS configuration's clients: one that keeps idle connections, one that keeps none (for
/// hosts beyond [`pool::MAX_POOLED_HOSTS`]), and the layers' connections (bounded buffers).
#[derive(Clone, Debug)]
struct Clients {
    pooled: reqwest::Client,
    unpooled: reqwest::Client,
    blobs: blob::Blobs,
}

impl Clients {
    fn build(
        tls: rustls::ClientConfig,
        guard: &Guard,
        connect_timeout: Duration,
    ) -> Result<Self, Error> {
        Ok(Self {
            pooled: build_client(tls.clone(), guard, connect_timeout, POOL_MAX_IDLE_PER_HOST)?,
            unpooled: build_client(tls.clone(), guard, connect_timeout, 0)?,
            blobs: blob::Blobs::new(tls, guard, connect_timeout),
        })
    }
}

#[derive(Debug)]
struct Shared {
    guard: Guard,
    /// Schemes that go through a proxy: their host names are resolved and checked first.
    proxied: Proxied,
    /// `insecure_registries`: the only hosts an HTTPS redirect may send us to over plain HTTP.
    insecure: Vec<String>,
    timeout: Duration,
    metrics: Metrics,
    /// The rate limiter and circuit breaker of each registry host.
    throttle: Throttle,
    /// The roots of every connection (system roots read once).
    roots: Arc<rustls::RootCertStore>,
    variants: Mutex<HashMap<TlsKey, Clients>>,
    /// The hosts whose connections are kept idle (process-wide).
    pooled: Mutex<pool::PooledHosts>,
}

/// Idle registry connections are closed after this long.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// The `User-Agent` of every registry request, the layer connections' included.
pub(crate) const NOE_USER_AGENT: &str = concat!("noe-rs/", env!("CARGO_PKG_VERSION"));
/// Idle connections kept per registry host. A burst of lookups (a pod with 100 uncached images)
/// opens one connection each; keeping them all would hold their buffers (tens of KiB each) long
/// after the burst (docs/benchmarks.md, Memory). At most [`pool::MAX_POOLED_HOSTS`] hosts keep
/// any, per TLS configuration.
pub const POOL_MAX_IDLE_PER_HOST: usize = 16;

/// The connect timeout within a request timeout: a tenth shorter (at most 500 ms), so that a
/// connection that cannot be made ends as one (`unreachable`, whether refused or never
/// answered) before the request's own timeout would call it a slow registry.
fn connect_timeout(request: Duration) -> Duration {
    request.saturating_sub((request / 10).min(Duration::from_millis(500)))
}

fn build_client(
    tls: rustls::ClientConfig,
    guard: &Guard,
    connect_timeout: Duration,
    max_idle_per_host: usize,
) -> Result<reqwest::Client, Error> {
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .dns_resolver(guard.resolver())
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(connect_timeout)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .pool_max_idle_per_host(max_idle_per_host)
        .user_agent(NOE_USER_AGENT)
        .build()
        .map_err(|e| Error::Config {
            reason: format!("cannot build the HTTP client: {e}"),
        })
}

impl Http {
    pub fn new(config: &Config, metrics: Metrics) -> Result<Self, Error> {
        let guard = Guard::new(config.allow_cidrs.clone());
        let roots = tls::shared_roots(config.extra_ca_pem.as_deref())?;
        let tls = tls::client_config(&roots)?;
        let client = Clients::build(tls, &guard, connect_timeout(config.request_timeout))?;
        // hyper closes an idle connection between one and two idle timeouts after its last
        // use, and a request may last the registry timeout.
        let linger = POOL_IDLE_TIMEOUT
            .saturating_mul(2)
            .saturating_add(config.request_timeout);
        Ok(Self {
            client,
            host: None,
            shared: Arc::new(Shared {
                guard,
                proxied: Proxied::from_env(),
                insecure: config.insecure_registries.clone(),
                timeout: config.request_timeout,
                throttle: Throttle::new(
                    config.registry_qps,
                    config.registry_burst,
                    metrics.clone(),
                ),
                metrics,
                roots,
                variants: Mutex::new(HashMap::new()),
                pooled: Mutex::new(pool::PooledHosts::new(linger)),
            }),
        })
    }

    /// The bound on each request (`--registry-timeout`).
    pub fn timeout(&self) -> Duration {
        self.shared.timeout
    }

    /// This client as one containerd host configures it: trusting its `ca` files too (or any
    /// certificate with `skip_verify`), presenting its `client` certificates, connecting within
    /// its `dial_timeout`. Built once per distinct configuration and kept; no file is read here
    /// (the host configuration carries the files' contents).
    pub fn for_host(&self, endpoint: &Endpoint) -> Result<Self, Error> {
        let files = if endpoint.ca.is_empty() && endpoint.client.is_empty() {
            None
        } else {
            Some(endpoint.tls_files.clone().ok_or_else(|| Error::Config {
                reason: format!("the TLS files of {} were not read", endpoint.host()),
            })?)
        };
        if files.is_none() && !endpoint.skip_verify && endpoint.dial_timeout.is_none() {
            return Ok(self.clone());
        }
        let key = TlsKey {
            files,
            skip_verify: endpoint.skip_verify,
            dial_timeout: endpoint.dial_timeout,
        };
        if let Some(client) = self.variants().and_then(|v| v.get(&key).cloned()) {
            return Ok(Self {
                client,
                shared: self.shared.clone(),
                host: Some(Arc::new(key)),
            });
        }
        let shared = &self.shared;
        let none = TlsFiles::default();
        let files = key.files.as_deref().unwrap_or(&none);
        let tls = tls::host_config(&shared.roots, files, key.skip_verify)?;
        let connect = key
            .dial_timeout
            .map_or(connect_timeout(shared.timeout), |dial| {
                dial.min(connect_timeout(shared.timeout))
            });
        let client = Clients::build(tls, &shared.guard, connect)?;
        if let Some(mut variants) = self.variants() {
            if variants.len() >= MAX_TLS_VARIANTS {
                variants.clear();
            }
            variants.insert(key.clone(), client.clone());
        }
        Ok(Self {
            client,
            shared: self.shared.clone(),
            host: Some(Arc::new(key)),
        })
    }

    fn variants(&self) -> Option<std::sync::MutexGuard<'_, HashMap<TlsKey, Clients>>> {
        self.shared.variants.lock().ok()
    }

    /// The client for a request to `authority`: the pooling one while the host has a place in
    /// the process-wide table, else the one that keeps no idle connection.
    fn client_for(&self, authority: &str) -> &reqwest::Client {
        let pooled = self
            .shared
            .pooled
            .lock()
            .map(|mut hosts| hosts.admit(authority, Instant::now()))
            .unwrap_or(false);
        if pooled {
            &self.client.pooled
        } else {
            &self.client.unpooled
        }
    }

    pub fn guard(&self) -> &Guard {
        &self.shared.guard
    }

    /// Sends `request`, following up to 5 redirects (GET only); `Authorization` is dropped as
    /// soon as a redirect leaves the original scheme, host and port. A redirect from HTTPS to
    /// plain HTTP is refused unless its target is an insecure registry.
    pub async fn send(&self, ctx: &Context, request: Request) -> Result<Response, Error> {
        let Request {
            mut url,
            mut headers,
            origin_headers,
            form,
            kind,
        } = request;
        let origin = url.origin();
        let ours = headers.clone();
        for (name, value) in &origin_headers {
            if !ours.contains_key(name) {
                headers.append(name, value.clone());
            }
        }
        for _ in 0..=MAX_REDIRECTS {
            let response = self
                .send_with_retry(ctx, &url, &headers, form.as_deref(), kind)
                .await?;
            let location = response
                .headers
                .get(LOCATION)
                .and_then(|l| l.to_str().ok())
                .filter(|_| response.status.is_redirection() && form.is_none());
            let Some(location) = location else {
                return Ok(response);
            };
            let next = url.join(location).map_err(|e| Error::InvalidContent {
                reference: ctx.reference.clone(),
                registry: ctx.registry.clone(),
                what: "redirect",
                reason: format!("bad Location header ({e})"),
            })?;
            self.check_redirect(ctx, &url, &next)?;
            url = next;
            if url.origin() != origin {
                headers.remove(AUTHORIZATION);
                for name in origin_headers.keys() {
                    headers.remove(name);
                }
            }
        }
        Err(Error::InvalidContent {
            reference: ctx.reference.clone(),
            registry: ctx.registry.clone(),
            what: "redirect",
            reason: format!("more than {MAX_REDIRECTS} redirects"),
        })
    }

    /// A redirect may go from `from` to `to`: HTTP(S) only, and never from HTTPS down to plain
    /// HTTP unless `to` is an insecure registry (a tag has no digest to check content against).
    fn check_redirect(&self, ctx: &Context, from: &Url, to: &Url) -> Result<(), Error> {
        let downgrade = match (from.scheme(), to.scheme()) {
            (_, "https") | ("http", "http") => false,
            ("https", "http") => true,
            (_, other) => {
                return Err(Error::InvalidContent {
                    reference: ctx.reference.clone(),
                    registry: ctx.registry.clone(),
                    what: "redirect",
                    reason: format!("unsupported scheme {:?}", crate::error::bounded(other, 16)),
                })
            }
        };
        if downgrade && !is_insecure_target(&self.shared.insecure, to) {
            return Err(Error::InsecureRedirect {
                reference: ctx.reference.clone(),
                registry: ctx.registry.clone(),
                target: host_for_message(&authority(to)),
            });
        }
        Ok(())
    }

    async fn send_with_retry(
        &self,
        ctx: &Context,
        url: &Url,
        headers: &HeaderMap,
        form: Option<&[(&'static str, String)]>,
        kind: Kind,
    ) -> Result<Response, Error> {
        let started = Instant::now();
        let response = self.exchange(ctx, url, headers, form, kind).await?;
        let retryable =
            response.status == StatusCode::TOO_MANY_REQUESTS || response.status.is_server_error();
        if !retryable {
            return Ok(response);
        }
        let wait = retry_after(&response.headers).unwrap_or(DEFAULT_RETRY_WAIT);
        // Retry only when the wait fits in what is left of this request's time budget. The
        // header is the registry's: any number, compared, never added to an instant.
        let remaining = self.shared.timeout.saturating_sub(started.elapsed());
        if wait >= remaining {
            return Ok(response);
        }
        tracing::debug!(registry = %ctx.registry, status = %response.status, ?wait, "retrying registry request");
        tokio::time::sleep(wait).await;
        self.exchange(ctx, url, headers, form, kind).await
    }

    /// One HTTP exchange within the timeout, body read up to the cap (a layer's successful
    /// body is left to the caller: [`Response::stream`]).
    async fn exchange(
        &self,
        ctx: &Context,
        url: &Url,
        headers: &HeaderMap,
        form: Option<&[(&'static str, String)]>,
        kind: Kind,
    ) -> Result<Response, Error> {
        let host = url.host_str().unwrap_or_default();
        let Shared {
            guard,
            timeout,
            metrics,
            throttle,
            ..
        } = &*self.shared;
        let timeout = *timeout;
        guard.check_host(host)?;
        let authority = authority(url);
        throttle.admit(ctx, &authority, timeout).await?;
        if !ctx.budget.take() {
            return Err(ctx.budget.exhausted(ctx));
        }
        self.check_before_proxy(url, timeout).await?;
        let label = metrics.registry_label(&ctx.registry);
        let timer = metrics
            .request_duration
            .with_label_values(&[label.as_str(), kind.as_str()])
            .start_timer();
        metrics.requests.inc();
        let head = kind == Kind::ManifestHead;
        let streamed = kind == Kind::Layer;
        // A layer's body is read over a connection whose read buffer is bounded (client::blob),
        // unless a proxy carries it.
        let blobs = (streamed && form.is_none() && !self.shared.proxied.applies(url))
            .then_some(&self.client.blobs);
        let deadline = tokio::time::Instant::now() + timeout;
        let result = tokio::time::timeout(timeout, async {
            let response = match blobs {
                Some(blobs) => blobs
                    .get(url, headers, deadline)
                    .await
                    .map_err(ReadError::Blob)?,
                None => {
                    let client = self.client_for(&authority);
                    let builder = match form {
                        Some(form) => client.request(Method::POST, url.clone()).form(form),
                        None if head => client.request(Method::HEAD, url.clone()),
                        None => client.request(Method::GET, url.clone()),
                    };
                    builder
                        .headers(headers.clone())
                        .timeout(timeout)
                        .send()
                        .await?
                }
            };
            let status = response.status();
            let headers = response.headers().clone();
            if streamed && status.is_success() {
                return Ok(Response {
                    url: url.clone(),
                    status,
                    headers,
                    body: Bytes::new(),
                    stream: Some(response),
                });
            }
            // A HEAD's Content-Length is that of the body it does not send.
            let body = if head {
                Bytes::new()
            } else {
                read_capped(response).await?
            };
            Ok::<_, ReadError>(Response {
                url: url.clone(),
                status,
                headers,
                body,
                stream: None,
            })
        })
        .await;
        timer.observe_duration();
        let response = match result {
            Err(_elapsed) => return Err(self.timeout_error(ctx)),
            Ok(Err(ReadError::TooLarge)) => {
                return Err(Error::TooLarge {
                    reference: ctx.reference.clone(),
                    registry: ctx.registry.clone(),
                    limit: BODY_LIMIT,
                })
            }
            Ok(Err(ReadError::Http(error))) => {
                let failed = Failed {
                    connect: error.is_connect(),
                    timeout: error.is_timeout(),
                    cause: Arc::new(error),
                };
                return Err(self.transport_error(ctx, url, failed).await);
            }
            Ok(Err(ReadError::Blob(failure))) => {
                let failed = match failure {
                    blob::Failure::Connect(cause) => Failed {
                        connect: true,
                        timeout: false,
                        cause: Arc::from(cause),
                    },
                    blob::Failure::Exchange(cause) => Failed {
                        connect: false,
                        timeout: false,
                        cause: Arc::from(cause),
                    },
                };
                return Err(self.transport_error(ctx, url, failed).await);
            }
            Ok(Ok(response)) => response,
        };
        metrics
            .responses
            .with_label_values(&[kind.as_str(), response.status.as_str()])
            .inc();
        throttle.record(
            ctx,
            &authority,
            response.status,
            retry_after(&response.headers),
        );
        metrics.record_rate_limit(&ctx.registry, &response.headers);
        Ok(response)
    }

    /// A proxy resolves the names it is given itself, so the guard's resolver never sees them:
    /// when `url` goes through one, its host is resolved and checked here first.
    async fn check_before_proxy(&self, url: &Url, timeout: Duration) -> Result<(), Error> {
        let Shared { guard, proxied, .. } = &*self.shared;
        let Some(url::Host::Domain(name)) = url.host() else {
            // IP literals were checked by `check_host`.
            return Ok(());
        };
        if !proxied.applies(url) {
            return Ok(());
        }
        let port = url.port_or_known_default().unwrap_or(443);
        guard
            .check_name(name, port, timeout)
            .await
            .map_err(|refused| match refused {
                NameRefused::Unresolved => Error::Unresolvable {
                    host: host_for_message(name),
                },
                NameRefused::Blocked(address) => Error::Blocked {
                    host: host_for_message(name),
                    address,
                },
            })
    }

    fn timeout_error(&self, ctx: &Context) -> Error {
        Error::Timeout {
            reference: ctx.reference.clone(),
            registry: ctx.registry.clone(),
            timeout_ms: u64::try_from(self.shared.timeout.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// What a failed exchange with `url` tells the caller: a refused address, a TLS problem in
    /// fixed words, `unreachable` for any failure to connect (refused, timed out, no route, no
    /// such name alike: which one goes to the debug log only, or the error would be a port
    /// probe), a timeout once connected.
    async fn transport_error(&self, ctx: &Context, url: &Url, failed: Failed) -> Error {
        let host = url.host_str().unwrap_or_default();
        let Failed {
            cause: error,
            connect,
            timeout,
        } = failed;
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&*error);
        while let Some(current) = source {
            if let Some(blocked) = current.downcast_ref::<BlockedAddress>() {
                return Error::Blocked {
                    host: host_for_message(host),
                    address: blocked.address,
                };
            }
            source = current.source();
        }
        let tls = crate::error::transport_detail(&*error);
        if tls.is_empty() && connect {
            tracing::debug!(
                registry = %ctx.registry,
                error = %crate::error::chain(&*error),
                "cannot connect to the registry"
            );
            return Error::Transport {
                reference: ctx.reference.clone(),
                registry: ctx.registry.clone(),
                detail: crate::error::UNREACHABLE,
                cause: error,
            };
        }
        if timeout {
            return self.timeout_error(ctx);
        }
        let mut detail = tls;
        if detail == crate::error::CLIENT_CERT_REFUSED && !self.has_client_certificate() {
            // Older servers answer a missing certificate with bad_certificate.
            detail = crate::error::CLIENT_CERT_REQUIRED;
        }
        if detail.is_empty() && self.asks_for_a_client_certificate(url).await {
            detail = if self.has_client_certificate() {
                crate::error::CLIENT_CERT_REFUSED
            } else {
                crate::error::CLIENT_CERT_REQUIRED
            };
        }
        tracing::debug!(
            registry = %ctx.registry,
            error = %crate::error::chain(&*error),
            "registry connection failed"
        );
        Error::Transport {
            reference: ctx.reference.clone(),
            registry: ctx.registry.clone(),
            detail,
            cause: error,
        }
    }

    /// Whether this client presents a client certificate (containerd `client` files).
    fn has_client_certificate(&self) -> bool {
        self.host
            .as_deref()
            .and_then(|h| h.files.as_deref())
            .is_some_and(|f| !f.client.is_empty())
    }

    /// After an HTTPS connection failed without saying why: whether the server asks for a
    /// client certificate. Over HTTP/2 a TLS 1.3 server's refusal arrives after the handshake
    /// and is lost with the connection, so one more connection, presenting nothing and noting a
    /// CertificateRequest, tells.
    async fn asks_for_a_client_certificate(&self, url: &Url) -> bool {
        let host = self.host.as_deref();
        if url.scheme() != "https" {
            return false;
        }
        let none = TlsFiles::default();
        let files = host.and_then(|h| h.files.as_deref()).unwrap_or(&none);
        let skip_verify = host.is_some_and(|h| h.skip_verify);
        let shared = &self.shared;
        let Ok((tls, asked)) = tls::probe_config(&shared.roots, files, skip_verify) else {
            return false;
        };
        let Ok(client) = build_client(tls, &shared.guard, shared.timeout, 0) else {
            return false;
        };
        // A HEAD of the API root: no body, and no registry counts it as a pull.
        let mut root = url.clone();
        root.set_path("/v2/");
        root.set_query(None);
        let probe = client.head(root).timeout(shared.timeout).send();
        let _ = tokio::time::timeout(shared.timeout, probe).await;
        asked.load(std::sync::atomic::Ordering::Relaxed)
    }
}

enum ReadError {
    Http(reqwest::Error),
    Blob(blob::Failure),
    TooLarge,
}

/// A failed exchange: its cause, and whether it failed to connect or ran out of time.
struct Failed {
    cause: Arc<dyn std::error::Error + Send + Sync>,
    connect: bool,
    timeout: bool,
}

impl From<reqwest::Error> for ReadError {
    fn from(error: reqwest::Error) -> Self {
        Self::Http(error)
    }
}

/// Reads the body chunk by chunk and stops as soon as it exceeds [`BODY_LIMIT`].
async fn read_capped(mut response: reqwest::Response) -> Result<Bytes, ReadError> {
    let declared = response
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > BODY_LIMIT as u64) {
        return Err(ReadError::TooLarge);
    }
    let mut body = BytesMut::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len().saturating_add(chunk.len()) > BODY_LIMIT {
            return Err(ReadError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// `host[:port]` of `url`, the form `insecure_registries` entries take (port only when given).
pub fn authority(url: &Url) -> String {
    match (url.host_str(), url.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        _ => String::new(),
    }
}

/// True when `url`'s host is listed in `insecure` (as `host:port`, or as `host` alone when the
/// URL names no port).
pub fn is_insecure_target(insecure: &[String], url: &Url) -> bool {
    let target = authority(url);
    !target.is_empty() && insecure.iter().any(|i| i.eq_ignore_ascii_case(&target))
}

/// `Retry-After` in seconds (the HTTP-date form is treated as absent).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    value.parse::<u64>().ok().map(Duration::from_secs)
}

/// `Authorization: Basic base64(user:pass)`.
pub fn basic_header(username: &str, password: &str) -> Option<HeaderValue> {
    use base64::Engine as _;
    let encoded =
        base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
    let mut value = HeaderValue::from_str(&format!("Basic {encoded}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// `Authorization: Bearer token`.
pub fn bearer_header(token: &str) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_seconds_only() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert(RETRY_AFTER, HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn insecure_targets_match_host_and_port_as_listed() {
        let insecure = vec!["registry.local:5000".to_owned(), "plain.local".to_owned()];
        let cases = [
            ("http://registry.local:5000/v2/", true),
            ("http://REGISTRY.local:5000/x", true),
            ("http://registry.local/v2/", false),
            ("http://registry.local:5001/v2/", false),
            ("http://plain.local/v2/", true),
            ("http://plain.local:8080/v2/", false),
            ("http://other.local:5000/", false),
        ];
        for (url, expected) in cases {
            let url = Url::parse(url).unwrap();
            assert_eq!(is_insecure_target(&insecure, &url), expected, "{url}");
        }
    }

    #[test]
    fn auth_headers_are_sensitive() {
        let basic = basic_header("user", "pass").unwrap();
        assert_eq!(basic.to_str().unwrap(), "Basic dXNlcjpwYXNz");
        assert!(basic.is_sensitive());
        assert!(bearer_header("t").unwrap().is_sensitive());
        assert!(bearer_header("bad\ntoken").is_none());
    }
}
