//! The HTTP layer: one reqwest client with our TLS config and the address guard, per-request
//! timeouts, a streamed body cap, one retry on 429/5xx honouring `Retry-After`, and redirects
//! followed by hand so `Authorization` never leaves the origin it was meant for.

mod tls;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::header::{AUTHORIZATION, CONTENT_LENGTH, LOCATION, RETRY_AFTER};
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use url::Url;

use crate::hosts::{Endpoint, TlsFiles};
use crate::metrics::{Kind, Metrics};
use crate::ssrf::{BlockedAddress, Guard};
use crate::{Config, Error};

/// Largest manifest, config blob or token response we read (distribution's manifest limit).
pub const BODY_LIMIT: usize = 4 * 1024 * 1024;
const MAX_REDIRECTS: usize = 5;
const DEFAULT_RETRY_WAIT: Duration = Duration::from_millis(200);

/// What a request is about, for error messages and metric labels.
#[derive(Clone, Debug)]
pub struct Context {
    /// The image reference as the user wrote it, normalized.
    pub reference: String,
    /// The registry host (after proxies).
    pub registry: String,
}

/// A fully read response.
#[derive(Debug)]
pub struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
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
    client: reqwest::Client,
    shared: Arc<Shared>,
    /// The containerd host configuration this client was built for, if any.
    host: Option<Arc<TlsKey>>,
}

#[derive(Debug)]
struct Shared {
    guard: Guard,
    timeout: Duration,
    metrics: Metrics,
    /// The roots of every connection (system roots read once).
    roots: Arc<rustls::RootCertStore>,
    variants: Mutex<HashMap<TlsKey, reqwest::Client>>,
}

/// Idle registry connections are closed after this long.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Idle connections kept per registry host. A burst of lookups (a pod with 100 uncached images)
/// opens one connection each; keeping them all would hold their buffers (tens of KiB each) long
/// after the burst (DESIGN.md §5: memory).
const POOL_MAX_IDLE_PER_HOST: usize = 16;

fn build_client(
    tls: rustls::ClientConfig,
    guard: &Guard,
    connect_timeout: Duration,
) -> Result<reqwest::Client, Error> {
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .dns_resolver(guard.resolver())
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(connect_timeout)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .pool_max_idle_per_host(POOL_MAX_IDLE_PER_HOST)
        .user_agent(concat!("noe-rs/", env!("CARGO_PKG_VERSION")))
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
        let client = build_client(tls, &guard, config.request_timeout)?;
        Ok(Self {
            client,
            host: None,
            shared: Arc::new(Shared {
                guard,
                timeout: config.request_timeout,
                metrics,
                roots,
                variants: Mutex::new(HashMap::new()),
            }),
        })
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
            .map_or(shared.timeout, |dial| dial.min(shared.timeout));
        let client = build_client(tls, &shared.guard, connect)?;
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

    fn variants(&self) -> Option<std::sync::MutexGuard<'_, HashMap<TlsKey, reqwest::Client>>> {
        self.shared.variants.lock().ok()
    }

    pub fn guard(&self) -> &Guard {
        &self.shared.guard
    }

    /// Sends `request`, following up to 5 redirects (GET only); `Authorization` is dropped as
    /// soon as a redirect leaves the original scheme, host and port.
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
            url = url.join(location).map_err(|e| Error::InvalidContent {
                reference: ctx.reference.clone(),
                registry: ctx.registry.clone(),
                what: "redirect",
                reason: format!("bad Location header ({e})"),
            })?;
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
        // Retry only when the wait still fits in this request's time budget.
        if started.elapsed() + wait >= self.shared.timeout {
            return Ok(response);
        }
        tracing::debug!(registry = %ctx.registry, status = %response.status, ?wait, "retrying registry request");
        tokio::time::sleep(wait).await;
        self.exchange(ctx, url, headers, form, kind).await
    }

    /// One HTTP exchange within the timeout, body read up to the cap.
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
            ..
        } = &*self.shared;
        let timeout = *timeout;
        guard.check_host(host)?;
        let label = metrics.registry_label(&ctx.registry);
        let timer = metrics
            .request_duration
            .with_label_values(&[label.as_str(), kind.as_str()])
            .start_timer();
        metrics.requests.inc();
        let mut builder = match form {
            Some(form) => self.client.request(Method::POST, url.clone()).form(form),
            None => self.client.request(Method::GET, url.clone()),
        };
        builder = builder.headers(headers.clone()).timeout(timeout);
        let result = tokio::time::timeout(timeout, async {
            let response = builder.send().await?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = read_capped(response).await?;
            Ok::<_, ReadError>(Response {
                status,
                headers,
                body,
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
                return Err(self.transport_error(ctx, url, error).await)
            }
            Ok(Ok(response)) => response,
        };
        metrics
            .responses
            .with_label_values(&[kind.as_str(), response.status.as_str()])
            .inc();
        metrics.record_rate_limit(&ctx.registry, &response.headers);
        Ok(response)
    }

    fn timeout_error(&self, ctx: &Context) -> Error {
        Error::Timeout {
            reference: ctx.reference.clone(),
            registry: ctx.registry.clone(),
            timeout_ms: u64::try_from(self.shared.timeout.as_millis()).unwrap_or(u64::MAX),
        }
    }

    async fn transport_error(&self, ctx: &Context, url: &Url, error: reqwest::Error) -> Error {
        let host = url.host_str().unwrap_or_default();
        if error.is_timeout() {
            return self.timeout_error(ctx);
        }
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&error);
        while let Some(current) = source {
            if let Some(blocked) = current.downcast_ref::<BlockedAddress>() {
                return Error::Blocked {
                    host: host.to_owned(),
                    address: blocked.address,
                };
            }
            source = current.source();
        }
        let mut detail = crate::error::transport_detail(&error);
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
        Error::Transport {
            reference: ctx.reference.clone(),
            registry: ctx.registry.clone(),
            detail,
            source: std::sync::Arc::new(error),
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
        let Ok(client) = build_client(tls, &shared.guard, shared.timeout) else {
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
    TooLarge,
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
        if body.len() + chunk.len() > BODY_LIMIT {
            return Err(ReadError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
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
    fn auth_headers_are_sensitive() {
        let basic = basic_header("user", "pass").unwrap();
        assert_eq!(basic.to_str().unwrap(), "Basic dXNlcjpwYXNz");
        assert!(basic.is_sensitive());
        assert!(bearer_header("t").unwrap().is_sensitive());
        assert!(bearer_header("bad\ntoken").is_none());
    }
}
