//! The registry auth flow: a 401 gives a challenge (cached per registry, so later repositories
//! skip the probe); Bearer challenges are answered with a token from the realm (Basic credentials,
//! an OAuth2 refresh-token POST for identity tokens, or anonymously), cached per
//! (registry, repository, identity); Basic challenges with Basic credentials; registry tokens are
//! sent as Bearer directly. Credentials only go to the registry and the realm its own challenge
//! named, and only over HTTPS unless the host is an insecure registry.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use http::header::{ACCEPT, AUTHORIZATION, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderValue, StatusCode};
use serde::Deserialize;
use url::Url;

use crate::challenge::{self, Challenge};
use crate::client::{
    basic_header, bearer_header, is_insecure_target, Context, Http, Request, Response,
};
use crate::credential::fingerprint;
use crate::metrics::{Kind, Metrics};
use crate::{Config, Credential, CredentialCandidate, Error};

const DEFAULT_TOKEN_LIFETIME: Duration = Duration::from_secs(60);
const TOKEN_MARGIN: Duration = Duration::from_secs(10);
const TOKEN_CACHE_MAX: u64 = 10_000;
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

/// Challenge and token caches.
pub struct Auth {
    challenges: RwLock<HashMap<String, Challenge>>,
    tokens: moka::future::Cache<TokenKey, Arc<Token>>,
    insecure: Vec<String>,
    metrics: Metrics,
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Auth")
            .field("tokens", &self.tokens.entry_count())
            .finish_non_exhaustive()
    }
}

impl Auth {
    pub fn new(config: &Config, metrics: Metrics) -> Self {
        Self {
            challenges: RwLock::new(HashMap::new()),
            tokens: moka::future::Cache::builder()
                .max_capacity(TOKEN_CACHE_MAX)
                .expire_after(TokenExpiry)
                .build(),
            insecure: config.insecure_registries.clone(),
            metrics,
        }
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
            if let Ok(mut challenges) = self.challenges.write() {
                challenges.insert(session.host.clone(), challenge);
            }
        }
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
        self.challenges
            .read()
            .ok()
            .and_then(|c| c.get(host).cloned())
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
        let mut fetched = false;
        let result = self
            .tokens
            .try_get_with(token_key(session), async {
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
            reason,
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
        let lifetime = parsed
            .expires_in
            .map_or(DEFAULT_TOKEN_LIFETIME, Duration::from_secs);
        Ok(Token {
            value,
            lifetime: lifetime.saturating_sub(TOKEN_MARGIN.min(lifetime / 4)),
        })
    }

    /// Credentials may travel to `url`: HTTPS, or a host listed as an insecure registry.
    fn secure(&self, url: &Url) -> bool {
        url.scheme() == "https" || is_insecure_target(&self.insecure, url)
    }
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
        host: crate::client::authority(&response.url),
    })
}

fn forbidden_check(session: &Session<'_>, response: Response) -> Result<Response, Error> {
    if response.status == StatusCode::FORBIDDEN {
        Err(unauthorized(session, 403))
    } else {
        Ok(response)
    }
}
