//! The registry auth flow: a 401 gives a challenge (cached per registry, so later repositories
//! skip the probe; concurrent first lookups on one registry wait for one probe instead of each
//! sending theirs); Bearer challenges are answered with a token from the realm (Basic
//! credentials, an OAuth2 refresh-token POST for identity tokens, or anonymously), cached per
//! (registry, repository, identity); Basic challenges with Basic credentials; registry tokens are
//! sent as Bearer directly. Credentials only go to the registry and the realm its own challenge
//! named (a 401 from a host it redirected to is not its challenge), and only over HTTPS unless
//! the host is an insecure registry. Registries are many and hostile: the challenge store, the
//! token cache and each token are bounded.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::header::{ACCEPT, AUTHORIZATION, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderValue, StatusCode};
use serde::Deserialize;
use url::Url;

use crate::budget::Context;
use crate::challenge::{self, Challenge};
use crate::client::{basic_header, bearer_header, is_insecure_target, Http, Request, Response};
use crate::metrics::{Kind, Metrics};
use crate::{Config, Error};
use noe_credentials::credential::fingerprint;
use noe_credentials::{Credential, CredentialCandidate};

const DEFAULT_TOKEN_LIFETIME: Duration = Duration::from_secs(60);
/// A token is kept at most this long whatever `expires_in` says (a realm cannot pin one).
pub const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(3600);
const TOKEN_MARGIN: Duration = Duration::from_secs(10);
/// Longest token accepted. Real ones (JWTs of Docker Hub, GHCR, Harbor, ACR) are a few KiB,
/// and registries behind common proxies refuse headers much longer than 8 KiB.
pub const MAX_TOKEN_LEN: usize = 16 * 1024;
/// Bound on the bytes of cached tokens (with their keys).
const TOKEN_CACHE_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// Registry hosts whose challenge is remembered (any pod author can name new hosts).
const MAX_KNOWN_HOSTS: usize = 4096;
const CLIENT_ID: &str = "noe";

/// Who is asking, against which repository of which registry.
#[derive(Debug)]
pub struct Session<'a> {
    pub ctx: Context,
    /// `host[:port]` of the registry endpoint.
    pub host: String,
    /// The API root with a trailing slash: `https://host/v2/` (`http://` for insecure
    /// registries), or a containerd host's own path with `override_path`.
    pub base: Url,
    pub repository: String,
    /// containerd host `header` values, sent to this endpoint only.
    pub headers: HeaderMap,
    pub candidate: Option<&'a CredentialCandidate>,
    /// Set once the candidate's credentials were actually sent (registry or realm).
    pub used: AtomicBool,
}

/// The outcome of choosing an `Authorization` header.
#[derive(Default)]
struct Attempt {
    header: Option<HeaderValue>,
    /// The header carries a token from the cache (it may have been revoked since).
    cached_token: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct TokenKey {
    host: String,
    repository: String,
    identity: Option<u64>,
}

#[derive(Clone)]
struct Token {
    value: String,
    lifetime: Duration,
    /// `lifetime` from when it was fetched, on the configured clock.
    expires: Instant,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("value", &"<redacted>")
            .field("lifetime", &self.lifetime)
            .finish()
    }
}

struct TokenExpiry;

impl moka::Expiry<TokenKey, Arc<Token>> for TokenExpiry {
    fn expire_after_create(
        &self,
        _: &TokenKey,
        token: &Arc<Token>,
        _: Instant,
    ) -> Option<Duration> {
        Some(token.lifetime)
    }
}

#[derive(Deserialize)]
struct TokenResponse {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
}

/// What a registry host answered to a request without credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Known {
    /// A 401 with this challenge.
    Challenge(Challenge),
    /// Something else: it does not ask (at least not for that repository).
    Open,
}

/// Challenge and token caches, and the probes in flight.
#[derive(derive_more::Debug)]
#[debug("Auth {{ tokens: {:?}, .. }}", tokens.entry_count())]
pub struct Auth {
    known: quick_cache::sync::Cache<String, Known>,
    /// One entry per host whose first request is in flight; later first requests wait on it.
    probes: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    tokens: moka::future::Cache<TokenKey, Arc<Token>>,
    clock: noe_core::clock::Clock,
    insecure: Vec<String>,
    metrics: Metrics,
}

/// Held by the request that probes a host for the others; dropping it (after the answer was
/// recorded, or on failure or cancellation) lets them go.
struct Probe<'a> {
    auth: &'a Auth,
    host: String,
    gate: Arc<tokio::sync::Mutex<()>>,
    _held: tokio::sync::OwnedMutexGuard<()>,
}

impl Drop for Probe<'_> {
    fn drop(&mut self) {
        if let Ok(mut probes) = self.auth.probes.lock() {
            if probes
                .get(&self.host)
                .is_some_and(|g| Arc::ptr_eq(g, &self.gate))
            {
                probes.remove(&self.host);
            }
        }
    }
}

impl Auth {
    pub fn new(config: &Config, metrics: Metrics) -> Self {
        Self {
            known: quick_cache::sync::Cache::new(MAX_KNOWN_HOSTS),
            probes: Mutex::new(HashMap::new()),
            tokens: moka::future::Cache::builder()
                .max_capacity(TOKEN_CACHE_MAX_BYTES)
                .weigher(|key: &TokenKey, token: &Arc<Token>| {
                    let bytes = std::mem::size_of::<Token>()
                        .saturating_add(token.value.len())
                        .saturating_add(key.host.len())
                        .saturating_add(key.repository.len());
                    u32::try_from(bytes).unwrap_or(u32::MAX)
                })
                .expire_after(TokenExpiry)
                .build(),
            clock: config.clock.clone(),
            insecure: config.insecure_registries.clone(),
            metrics,
        }
    }

    /// When nothing is known of `host` yet: becomes its prober (`Some`), or waits for the
    /// probe in flight and returns `None` (what it learned is then in `known`).
    async fn probe_or_wait(&self, host: &str) -> Option<Probe<'_>> {
        let waiting = {
            let Ok(mut probes) = self.probes.lock() else {
                return None;
            };
            match probes.get(host) {
                Some(gate) => gate.clone(),
                None => {
                    let gate = Arc::new(tokio::sync::Mutex::new(()));
                    let held = gate.clone().try_lock_owned().ok()?;
                    probes.insert(host.to_owned(), gate.clone());
                    return Some(Probe {
                        auth: self,
                        host: host.to_owned(),
                        gate,
                        _held: held,
                    });
                }
            }
        };
        // Released when the prober is done, whatever happened to it.
        drop(waiting.lock().await);
        None
    }

    /// GETs `url` on the session's registry, answering one 401 with the challenge's auth.
    /// A 401/403 that remains is [`Error::Unauthorized`], so the caller can try another credential.
    pub async fn get(
        &self,
        http: &Http,
        session: &Session<'_>,
        url: Url,
        accept: Option<&'static str>,
        kind: Kind,
    ) -> Result<Response, Error> {
        let mut probe = None;
        if self.known.get(&session.host).is_none() {
            probe = self.probe_or_wait(&session.host).await;
        }
        let known = self.challenge(&session.host);
        let attempt = self.authorization(http, session).await?;
        let sent = attempt.header.is_some();
        let response = http
            .send(
                &session.ctx,
                request(session, url.clone(), accept, attempt.header, kind),
            )
            .await?;
        if response.status != StatusCode::UNAUTHORIZED {
            if !sent && response.url.origin() == session.base.origin() {
                self.remember(&session.host, Known::Open);
            }
            return forbidden_check(session, response);
        }
        // Only the registry's own challenge counts: a host it redirected to is not asked with
        // its credentials, and what that host says is not remembered for the registry.
        foreign_check(session, &response)?;
        let values = response
            .headers
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok());
        let Some(mut challenge) = challenge::parse(values) else {
            return Err(unauthorized(session, 401));
        };
        // The scope differs per repository and is never used (we ask for our own): drop it so
        // the cached challenge compares equal across repositories.
        if let Challenge::Bearer { scope, .. } = &mut challenge {
            *scope = None;
        }
        let changed = known.as_ref() != Some(&challenge);
        if changed {
            self.remember(&session.host, Known::Challenge(challenge));
        }
        // Recorded: the requests that waited on this probe may go.
        drop(probe.take());
        // Retry only when something may differ: no auth was sent, the challenge changed, or a
        // cached token may have been revoked early.
        if sent && !changed && !attempt.cached_token {
            return Err(unauthorized(session, 401));
        }
        if attempt.cached_token {
            self.tokens.invalidate(&token_key(session)).await;
        }
        let Some(header) = self.authorization(http, session).await?.header else {
            return Err(unauthorized(session, 401));
        };
        let response = http
            .send(
                &session.ctx,
                request(session, url, accept, Some(header), kind),
            )
            .await?;
        if response.status == StatusCode::UNAUTHORIZED {
            foreign_check(session, &response)?;
            return Err(unauthorized(session, 401));
        }
        forbidden_check(session, response)
    }

    fn challenge(&self, host: &str) -> Option<Challenge> {
        match self.known.get(host)? {
            Known::Challenge(challenge) => Some(challenge),
            Known::Open => None,
        }
    }

    fn remember(&self, host: &str, known: Known) {
        if self.known.get(host).as_ref() != Some(&known) {
            self.known.insert(host.to_owned(), known);
        }
    }

    /// The `Authorization` header for the session, if the registry asked for one.
    async fn authorization(&self, http: &Http, session: &Session<'_>) -> Result<Attempt, Error> {
        let credential = session.candidate.map(|c| &c.credential);
        let mut attempt = Attempt::default();
        if let Some(Credential::RegistryToken(token)) = credential {
            if self.secure(&session.base) {
                attempt.header = bearer_header(token);
            }
        } else {
            match self.challenge(&session.host) {
                None => {}
                Some(Challenge::Basic { .. }) => {
                    if let Some(Credential::Basic { username, password }) = credential {
                        if self.secure(&session.base) {
                            attempt.header = basic_header(username, password);
                        }
                    }
                }
                Some(Challenge::Bearer { realm, service, .. }) => {
                    let (token, cached) = self
                        .token(http, session, &realm, service.as_deref())
                        .await?;
                    attempt.header = bearer_header(&token.value);
                    attempt.cached_token = cached;
                }
            }
        }
        if attempt.header.is_some() && credential.is_some() {
            session.used.store(true, Ordering::Relaxed);
        }
        Ok(attempt)
    }

    /// The token for the session, and whether it came from the cache.
    async fn token(
        &self,
        http: &Http,
        session: &Session<'_>,
        realm: &str,
        service: Option<&str>,
    ) -> Result<(Arc<Token>, bool), Error> {
        self.metrics.auth_cache_requests.inc();
        let key = token_key(session);
        // moka drops a token after its lifetime on its own clock; freshness is decided here.
        if let Some(cached) = self.tokens.get(&key).await {
            if cached.expires <= self.clock.now() {
                self.tokens.invalidate(&key).await;
            }
        }
        let mut fetched = false;
        let result = self
            .tokens
            .try_get_with(key, async {
                fetched = true;
                self.fetch_token(http, session, realm, service)
                    .await
                    .map(Arc::new)
            })
            .await;
        let outcome = if fetched { "miss" } else { "hit" };
        self.metrics
            .auth_cache_responses
            .with_label_values(&[outcome])
            .inc();
        result
            .map(|token| (token, !fetched))
            .map_err(|e| (*e).clone())
    }

    async fn fetch_token(
        &self,
        http: &Http,
        session: &Session<'_>,
        realm: &str,
        service: Option<&str>,
    ) -> Result<Token, Error> {
        let token_error = |status: u16| Error::Token {
            reference: session.ctx.reference.clone(),
            registry: session.ctx.registry.clone(),
            realm: realm.to_owned(),
            status,
        };
        let invalid = |reason: String| Error::InvalidContent {
            reference: session.ctx.reference.clone(),
            registry: session.ctx.registry.clone(),
            what: "token realm",
            reason: crate::error::bounded(&reason, 256).into_owned(),
        };
        let mut url = Url::parse(realm).map_err(|e| invalid(format!("bad realm URL ({e})")))?;
        if !matches!(url.scheme(), "https" | "http") {
            return Err(invalid(format!(
                "unsupported realm scheme {:?}",
                url.scheme()
            )));
        }
        let scope = format!("repository:{}:pull", session.repository);
        let credential = session.candidate.map(|c| &c.credential);
        if credential.is_some() && !self.secure(&url) {
            return Err(invalid(format!(
                "realm {realm} is plain HTTP; credentials are only sent over HTTPS"
            )));
        }
        let mut headers = HeaderMap::new();
        let form = match credential {
            Some(Credential::IdentityToken(refresh_token)) => {
                let mut form = vec![
                    ("grant_type", "refresh_token".to_owned()),
                    ("refresh_token", refresh_token.clone()),
                    ("scope", scope),
                    ("client_id", CLIENT_ID.to_owned()),
                ];
                if let Some(service) = service {
                    form.push(("service", service.to_owned()));
                }
                Some(form)
            }
            other => {
                {
                    let mut query = url.query_pairs_mut();
                    if let Some(service) = service {
                        query.append_pair("service", service);
                    }
                    query.append_pair("scope", &scope);
                }
                if let Some(Credential::Basic { username, password }) = other {
                    if let Some(value) = basic_header(username, password) {
                        headers.insert(AUTHORIZATION, value);
                    }
                }
                None
            }
        };
        let response = http
            .send(
                &session.ctx,
                Request {
                    url,
                    headers,
                    origin_headers: HeaderMap::new(),
                    form,
                    kind: Kind::Token,
                },
            )
            .await?;
        if !response.status.is_success() {
            return Err(token_error(response.status.as_u16()));
        }
        let parsed: TokenResponse = serde_json::from_slice(&response.body)
            .map_err(|e| invalid(format!("token response is not JSON ({e})")))?;
        let value = parsed
            .token
            .filter(|t| !t.is_empty())
            .or(parsed.access_token.filter(|t| !t.is_empty()))
            .ok_or_else(|| invalid("token response holds no token".into()))?;
        if value.len() > MAX_TOKEN_LEN {
            return Err(invalid(format!(
                "token of {} bytes (at most {MAX_TOKEN_LEN})",
                value.len()
            )));
        }
        let lifetime = token_lifetime(parsed.expires_in);
        Ok(Token {
            value,
            lifetime,
            expires: self.clock.expiry(lifetime),
        })
    }

    /// Credentials may travel to `url`: HTTPS, or a host listed as an insecure registry.
    fn secure(&self, url: &Url) -> bool {
        url.scheme() == "https" || is_insecure_target(&self.insecure, url)
    }
}

/// How long a token is kept: `expires_in` (default 60 s, at most [`MAX_TOKEN_LIFETIME`]) less a
/// margin of 10 s, or a quarter for short lifetimes.
fn token_lifetime(expires_in: Option<u64>) -> Duration {
    let lifetime = expires_in
        .map_or(DEFAULT_TOKEN_LIFETIME, Duration::from_secs)
        .min(MAX_TOKEN_LIFETIME);
    lifetime.saturating_sub(TOKEN_MARGIN.min(lifetime / 4))
}

fn token_key(session: &Session<'_>) -> TokenKey {
    TokenKey {
        host: session.host.clone(),
        repository: session.repository.clone(),
        identity: session
            .candidate
            .map(|c| fingerprint(std::slice::from_ref(c))),
    }
}

fn request(
    session: &Session<'_>,
    url: Url,
    accept: Option<&'static str>,
    authorization: Option<HeaderValue>,
    kind: Kind,
) -> Request {
    let mut headers = HeaderMap::new();
    if let Some(accept) = accept {
        headers.insert(ACCEPT, HeaderValue::from_static(accept));
    }
    if let Some(authorization) = authorization {
        headers.insert(AUTHORIZATION, authorization);
    }
    Request {
        url,
        headers,
        origin_headers: session.headers.clone(),
        form: None,
        kind,
    }
}

fn unauthorized(session: &Session<'_>, status: u16) -> Error {
    Error::Unauthorized {
        reference: session.ctx.reference.clone(),
        registry: session.ctx.registry.clone(),
        status,
    }
}

/// Refuses a 401 that came from another origin than the registry's (after a redirect).
fn foreign_check(session: &Session<'_>, response: &Response) -> Result<(), Error> {
    if response.url.origin() == session.base.origin() {
        return Ok(());
    }
    Err(Error::RedirectedChallenge {
        reference: session.ctx.reference.clone(),
        registry: session.ctx.registry.clone(),
        host: crate::error::host_for_message(&crate::client::authority(&response.url)),
    })
}

fn forbidden_check(session: &Session<'_>, response: Response) -> Result<Response, Error> {
    if response.status == StatusCode::FORBIDDEN {
        Err(unauthorized(session, 403))
    } else {
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_lifetimes_are_bounded() {
        let cases = [
            (None, 50),
            (Some(0), 0),
            (Some(8), 6),
            (Some(300), 290),
            (Some(3600), 3590),
            (Some(86_400), 3590),
            (Some(u64::MAX), 3590),
        ];
        for (expires_in, kept) in cases {
            assert_eq!(
                token_lifetime(expires_in),
                Duration::from_secs(kept),
                "{expires_in:?}"
            );
        }
    }
}
