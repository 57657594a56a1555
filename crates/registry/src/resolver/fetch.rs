//! A cache miss: the endpoints in order (mirrors, then the server), at each its credential
//! candidates in order then anonymous access, and with one of them a [`Step`]: a lookup's is
//! either a HEAD that confirms a known digest (no GET) or the manifest walk; `noe inspect`'s
//! (`inspect_step.rs`) fetches the manifest as served; image selection's (`artifact_step.rs`) fetches a
//! compatibility artifact. When every credential was refused, the refused ones whose source can
//! renew them are renewed once and the step runs once more ([`Resolver::fetch`]), whichever
//! step it is.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use futures::future::BoxFuture;
use url::Url;

use super::{header_map, is_private, Resolver};
use crate::auth::Session;
use crate::budget::{Budget, Context};
use crate::cache::{Answered, Entry, Loaded};
use crate::client::{Http, MAX_REQUESTS_PER_LOOKUP};
use crate::hosts::Endpoint;
use crate::shared::{DigestValue, Learned, SharedCache};
use crate::walk::Fetcher;
use crate::{manifest, Error, Reference, Resolution};
use noe_credentials::CredentialCandidate;

/// What one credential found, and which credential it was (`None`: anonymous access): one of
/// the request's, or (owned) one renewed after the request's was refused.
type Found<'a, T> = (T, Option<Cow<'a, CredentialCandidate>>);

/// One image to look up.
pub(super) struct Request<'a> {
    /// As parsed from what the caller wrote.
    pub reference: &'a Reference,
    /// After proxies.
    pub resolved: &'a Reference,
    /// `resolved` as text.
    pub target: &'a str,
    pub endpoints: Vec<&'a Endpoint>,
    pub credentials: &'a [CredentialCandidate],
    /// The renewable credentials a registry refused on the way.
    pub refused: Refused,
}

/// The most refused credentials remembered for renewal in one lookup.
const MAX_REFUSED: usize = 8;

/// Credentials a registry refused (401/403) after they were sent, whose source can renew them
/// ([`CredentialCandidate::renewal`]): a lookup renews each once and tries again once.
#[derive(Debug, Default)]
pub(super) struct Refused(Mutex<Vec<CredentialCandidate>>);

impl Refused {
    fn push(&self, candidate: &CredentialCandidate) {
        if candidate.renewal.is_none() {
            return;
        }
        let mut refused = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if refused.len() < MAX_REFUSED && !refused.contains(candidate) {
            refused.push(candidate.clone());
        }
    }

    fn take(&self) -> Vec<CredentialCandidate> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Where a [`Step`] fetches: one credential (the session's) at one endpoint.
pub(super) struct At<'s, 'a> {
    pub resolver: &'s Resolver,
    pub http: &'s Http,
    pub session: &'s Session<'a>,
    pub request: &'s Request<'a>,
    pub endpoint: &'s Endpoint,
}

impl<'s, 'a> At<'s, 'a> {
    /// Requests as this session, through the resolver's client and `Auth`.
    pub fn fetcher(&self) -> Fetcher<'s> {
        Fetcher {
            http: self.http,
            auth: &self.resolver.inner.auth,
            session: self.session,
        }
    }
}

/// What is fetched with one credential at one endpoint (a lookup's platforms, `noe inspect`'s
/// manifest); [`Resolver::fetch`] tries the endpoints and credentials in order. A 401/403
/// ([`Error::is_auth`]) passes to the next credential, any error at a mirror to the next
/// endpoint. Generic over the request's lifetime `'a` for every `'a`: a retry after a renewal
/// runs the same step on a request that holds the renewed credentials. Boxed: the server's
/// lookups run in spawned tasks, and an unboxed trait future cannot be proven `Send` there.
pub(super) trait Step: Sync {
    type Output: Send;

    /// The requests the step may send with one credential loop (tokens included).
    fn budget(&self) -> usize {
        MAX_REQUESTS_PER_LOOKUP
    }

    fn fetch<'s, 'a>(&'s self, at: At<'s, 'a>) -> BoxFuture<'s, Result<Self::Output, Error>>;
}

/// A lookup's step: a HEAD that confirms `known`'s digest, else the manifest walk.
struct Walk<'k> {
    /// An expired answer for this image.
    known: Option<&'k Entry>,
}

impl Step for Walk<'_> {
    type Output = Loaded;

    fn fetch<'s, 'a>(&'s self, at: At<'s, 'a>) -> BoxFuture<'s, Result<Loaded, Error>> {
        Box::pin(at.resolver.lookup_as(at, self.known))
    }
}

impl Resolver {
    /// A lookup: the shared cache, else the registry (whose answer is then shared).
    /// `known`: an expired answer for this image, revalidated with a HEAD.
    pub(super) async fn lookup(
        &self,
        request: &Request<'_>,
        known: Option<Entry>,
    ) -> Result<Loaded, Error> {
        let mut known = known;
        if let Some(shared) = &self.inner.shared {
            if let Some(loaded) = self.shared_answer(shared, request).await {
                return Ok(loaded);
            }
            // A digest reference whose platforms are shared: a HEAD proves this replica may
            // read it, then they are reused.
            if let (None, Some(digest)) = (&known, &request.resolved.digest) {
                known = shared
                    .platforms(&request.resolved.name(), digest)
                    .await
                    .map(|value| self.shared_entry(request, digest, value, None));
            }
        }
        let walk = Walk {
            known: known.as_ref(),
        };
        let (loaded, credential) = self.fetch(request, &walk).await?;
        self.share(request, &loaded, credential.as_deref());
        Ok(loaded)
    }

    /// [`Resolver::fetch_once`], and when every credential was refused, [`Resolver::renewed`].
    pub(super) async fn fetch<'a, S: Step>(
        &self,
        request: &Request<'a>,
        step: &S,
    ) -> Result<Found<'a, S::Output>, Error> {
        match self.fetch_once(request, step).await {
            Err(error) if error.is_auth() => self.renewed(request, step, error).await,
            other => other,
        }
    }

    /// After every credential was refused (`error`): the refused credentials whose source can
    /// renew them (a cached cloud token, a cached plugin answer) are renewed once each and the
    /// step runs once more with them. A renewed credential refused again, or a renewal that
    /// fails, is an [`Error::Renewal`] naming the provider and the step; never a loop.
    async fn renewed<'a, S: Step>(
        &self,
        request: &Request<'a>,
        step: &S,
        error: Error,
    ) -> Result<Found<'a, S::Output>, Error> {
        let refused = request.refused.take();
        if refused.is_empty() {
            return Err(error);
        }
        let counter = &self.inner.metrics.credential_renewals;
        let registry = error
            .registry()
            .unwrap_or(&request.resolved.registry)
            .to_owned();
        let renewal_error = |provider: &'static str, reason: String| Error::Renewal {
            reference: request.reference.to_string(),
            registry: registry.clone(),
            provider,
            reason,
        };
        let mut credentials = request.credentials.to_vec();
        let mut renewed = Vec::new();
        let mut failed = None;
        for stale in &refused {
            let Some(renewal) = &stale.renewal else {
                continue;
            };
            match renewal.renew(&stale.credential).await {
                Ok(mut fresh) => {
                    fresh.mirror.clone_from(&stale.mirror);
                    fresh.scoped = stale.scoped;
                    if fresh.renewal.is_none() {
                        // Marks it for the error if it is refused too.
                        fresh.renewal.clone_from(&stale.renewal);
                    }
                    for slot in credentials.iter_mut().filter(|c| *c == stale) {
                        slot.clone_from(&fresh);
                    }
                    renewed.push(renewal.provider());
                }
                Err(reason) => {
                    tracing::warn!(provider = renewal.provider(), error = %reason, "renewing a refused credential failed");
                    counter
                        .with_label_values(&[renewal.provider(), "failed"])
                        .inc();
                    failed.get_or_insert((renewal.provider(), reason));
                }
            }
        }
        if renewed.is_empty() {
            return Err(match failed {
                Some((provider, reason)) => renewal_error(provider, reason),
                None => error,
            });
        }
        let retry = Request {
            reference: request.reference,
            resolved: request.resolved,
            target: request.target,
            endpoints: request.endpoints.clone(),
            credentials: &credentials,
            refused: Refused::default(),
        };
        match self.fetch_once(&retry, step).await {
            Ok((output, credential)) => {
                for provider in renewed {
                    counter.with_label_values(&[provider, "renewed"]).inc();
                }
                Ok((output, credential.map(|c| Cow::Owned(c.into_owned()))))
            }
            Err(error) if error.is_auth() => {
                let again = retry.refused.take();
                let Some(provider) = again
                    .iter()
                    .find_map(|c| c.renewal.as_ref().map(|r| r.provider()))
                else {
                    return Err(error);
                };
                for provider in again.iter().filter_map(|c| c.renewal.as_ref()) {
                    counter
                        .with_label_values(&[provider.provider(), "refused"])
                        .inc();
                }
                let status = match &error {
                    Error::Unauthorized { status, .. } | Error::Token { status, .. } => *status,
                    _ => 401,
                };
                Err(renewal_error(
                    provider,
                    format!(
                        "{provider}: registry login: {registry} refused the renewed credential too (HTTP {status}) for {}",
                        request.reference
                    ),
                ))
            }
            Err(error) => Err(error),
        }
    }

    /// Tries the endpoints in order (mirrors, then the server); a mirror that fails in any way
    /// passes to the next. The error of the server (else of the last endpoint) is returned.
    async fn fetch_once<'a, S: Step>(
        &self,
        request: &Request<'a>,
        step: &S,
    ) -> Result<Found<'a, S::Output>, Error> {
        let mut last_error = None;
        let budget = Budget::new(step.budget());
        for &endpoint in &request.endpoints {
            match self.fetch_at(request, endpoint, step, &budget).await {
                Err(error) if endpoint.mirror => {
                    tracing::debug!(%error, mirror = %endpoint.url, "mirror failed, trying the next host");
                    last_error = Some(error);
                }
                other => return other,
            }
        }
        Err(last_error.unwrap_or_else(|| Error::Config {
            reason: format!(
                "no configured host of registry {} may serve {}",
                request.resolved.registry, request.target
            ),
        }))
    }

    /// One endpoint: its credential candidates in order, then anonymous access unless private;
    /// a 401/403 moves to the next.
    async fn fetch_at<'a, S: Step>(
        &self,
        request: &Request<'a>,
        endpoint: &Endpoint,
        step: &S,
        budget: &Budget,
    ) -> Result<Found<'a, S::Output>, Error> {
        let inner = &*self.inner;
        let resolved = request.resolved;
        let host = endpoint.host();
        let ctx = Context {
            reference: request.reference.to_string(),
            registry: if endpoint.mirror {
                host.clone()
            } else {
                resolved.registry.clone()
            },
            budget: budget.clone(),
        };
        let mut base = Url::parse(&format!("{}/", endpoint.api_base())).map_err(|e| {
            Error::InvalidReference {
                reference: ctx.reference.clone(),
                reason: format!("registry {host:?} is not a valid URL host ({e})"),
            }
        })?;
        if base.scheme() == "https"
            && (inner.config.is_insecure(&host)
                || (!endpoint.mirror && inner.config.is_insecure(&resolved.registry)))
        {
            // `--insecure-registries` hosts are reached over plain HTTP.
            let _ = base.set_scheme("http");
        }
        inner
            .http
            .guard()
            .check_host(base.host_str().unwrap_or_default())?;
        let http = inner.http.for_host(endpoint)?;
        let headers = header_map(endpoint);
        let name = endpoint.credential_image(&resolved.name());
        let private = inner
            .config
            .private_registries
            .iter()
            .any(|pattern| is_private(pattern, &name));
        let mirror = endpoint.mirror.then_some(host.as_str());
        let own = request
            .credentials
            .iter()
            .filter(|c| c.mirror.as_deref() == mirror);
        let anonymous = (!private).then_some(None);
        let candidates = own.map(Some).chain(anonymous);
        let mut last_error = None;
        for candidate in candidates {
            let session = Session {
                ctx: ctx.clone(),
                host: host.clone(),
                base: base.clone(),
                repository: resolved.repository.clone(),
                headers: headers.clone(),
                candidate,
                used: AtomicBool::new(false),
            };
            let at = At {
                resolver: self,
                http: &http,
                session: &session,
                request,
                endpoint,
            };
            match step.fetch(at).await {
                Ok(output) => return Ok((output, used(&session).map(Cow::Borrowed))),
                Err(error) if error.is_auth() => {
                    tracing::debug!(%error, source = candidate.map(|c| c.source.as_str()), "credential refused, trying the next");
                    if let Some(sent) = used(&session) {
                        request.refused.push(sent);
                    }
                    last_error = Some(error);
                }
                Err(error) => return Err(error),
            }
        }
        Err(last_error.unwrap_or(Error::NoCredentials {
            reference: ctx.reference,
            registry: ctx.registry,
        }))
    }

    /// One credential at one endpoint: a HEAD when a digest is known (an unchanged one is
    /// reused), else (or when the HEAD says nothing usable) the manifest walk.
    async fn lookup_as(&self, at: At<'_, '_>, known: Option<&Entry>) -> Result<Loaded, Error> {
        let inner = &*self.inner;
        let fetcher = at.fetcher();
        let (session, request, endpoint) = (at.session, at.request, at.endpoint);
        let resolved = request.resolved;
        let mirror = endpoint.mirror.then_some(session.host.as_str());
        let used = || used(session);
        let found = |entry, answered| {
            Ok(Loaded {
                entry,
                scoped: used().is_some_and(|c| c.scoped),
                answered,
                fresh_for: None,
            })
        };
        if let Some(known) = known {
            match fetcher.head(resolved.object()).await? {
                Some(digest) if known.has_digest(&digest) => {
                    inner.metrics.count_revalidation("unchanged");
                    let source = used().map(|c| c.source.as_str());
                    let entry = inner.cache.found_again(known, source, mirror);
                    return found(entry, Answered::Head);
                }
                Some(digest) => {
                    inner.metrics.count_revalidation("changed");
                    // The HEAD proved access to this digest: its shared platforms may be used.
                    if let Some(shared) = &inner.shared {
                        if let Some(value) = shared.platforms(&resolved.name(), &digest).await {
                            let entry = self.shared_entry(request, &digest, value, used());
                            return found(entry, Answered::Head);
                        }
                    }
                }
                None => inner.metrics.count_revalidation("no_digest"),
            }
        }
        let response = fetcher.manifest(resolved.object()).await?;
        let (media_type, parsed) = fetcher.parse(&response)?;
        let walked = fetcher.platforms(parsed).await?;
        // Hashed once the content proved usable (a tag's body is not verified against anything).
        let digest = manifest::digest_of(&response.body, resolved.digest.as_deref());
        // Only an artifact (image-volume content, a chart) may have no platform: arch-neutral.
        if walked.platforms.is_empty() && !walked.artifact {
            return Err(Error::NoPlatforms {
                reference: session.ctx.reference.clone(),
                registry: session.ctx.registry.clone(),
            });
        }
        let mut fetched_as = resolved.clone();
        if let Some(host) = mirror {
            fetched_as.registry = host.to_owned();
        }
        let resolution = Resolution {
            image: request.reference.to_string(),
            resolved: fetched_as.to_string(),
            digest,
            media_type,
            credential_source: used().map(|c| c.source.clone()),
            platforms: walked.platforms,
            answered_by: Answered::Get,
        };
        found(
            inner.cache.compact(resolution, request.target),
            Answered::Get,
        )
    }

    /// The answer of the shared cache for one of the credentials this lookup holds (or for
    /// anonymous access, unless the image is private).
    async fn shared_answer(&self, shared: &SharedCache, request: &Request<'_>) -> Option<Loaded> {
        let resolved = request.resolved;
        let name = resolved.name();
        let private = self
            .inner
            .config
            .private_registries
            .iter()
            .any(|pattern| is_private(pattern, &name));
        let scopes: Vec<Option<&CredentialCandidate>> = request
            .credentials
            .iter()
            .map(Some)
            .chain((!private).then_some(None))
            .collect();
        let (index, digest, fresh_for) = shared.tag(request.target, &scopes).await?;
        let credential = scopes.get(index).copied().flatten();
        let value = shared.platforms(&name, &digest).await?;
        Some(Loaded {
            entry: self.shared_entry(request, &digest, value, credential),
            scoped: credential.is_some_and(|c| c.scoped),
            answered: Answered::SharedCache,
            fresh_for: Some(fresh_for),
        })
    }

    /// An entry of what the shared cache knows of `digest`.
    fn shared_entry(
        &self,
        request: &Request<'_>,
        digest: &str,
        value: DigestValue,
        credential: Option<&CredentialCandidate>,
    ) -> Entry {
        let resolution = Resolution {
            image: request.reference.to_string(),
            resolved: request.target.to_owned(),
            digest: digest.to_owned(),
            media_type: value.media_type,
            credential_source: credential.map(|c| c.source.clone()),
            platforms: value.platforms,
            answered_by: Answered::SharedCache,
        };
        self.inner.cache.compact(resolution, request.target)
    }

    /// Writes what a registry lookup found to the shared cache (in the background).
    fn share(
        &self,
        request: &Request<'_>,
        loaded: &Loaded,
        credential: Option<&CredentialCandidate>,
    ) {
        let Some(shared) = &self.inner.shared else {
            return;
        };
        let immutable = request.resolved.digest.is_some();
        let digest = loaded.entry.digest();
        let platforms = (loaded.answered == Answered::Get).then(|| DigestValue {
            media_type: loaded.entry.media_type().to_owned(),
            platforms: loaded.entry.platforms().to_vec(),
        });
        shared.remember(&Learned {
            target: request.target,
            repository: &request.resolved.name(),
            credential,
            digest: &digest,
            fresh_for: self.inner.cache.ttl(immutable),
            platforms,
        });
    }
}

/// The credential a session sent: reported only when the registry asked for the credentials
/// and got them.
pub(super) fn used<'a>(session: &Session<'a>) -> Option<&'a CredentialCandidate> {
    session
        .candidate
        .filter(|_| session.used.load(Ordering::Relaxed))
}
