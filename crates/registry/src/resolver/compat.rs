//! The fetch of compatibility artifacts (`crate::compat`): the same hosts, proxies, mirrors,
//! credentials in order then anonymous access (unless private), insecure registries, TLS,
//! address guard, throttle and request budget as a lookup (`lookup.rs`, `inspect.rs`).
//! Referrers are asked of the registry itself, never of a mirror (a mirror's 404 would hide
//! the registry's artifacts).

use std::sync::atomic::AtomicBool;

use bytes::Bytes;
use url::Url;

use super::{header_map, is_private, Resolver};
use crate::auth::Session;
use crate::budget::{Budget, Context};
use crate::client::MAX_REQUESTS_PER_LOOKUP;
use crate::compat::{
    fallback_tag, filter_applied, newest_first, next_page, referrers, ArtifactManifest, Fetched,
    Layer, Learned, Query, Referrer, INDEX_MEDIA_TYPE, MAX_ATTEMPTS, MAX_MANIFEST_BYTES, MAX_PAGES,
    MAX_REFERRERS, MAX_SPEC_BYTES,
};
use crate::hosts::Endpoint;
use crate::manifest;
use crate::metrics::Kind;
use crate::walk::Fetcher;
use crate::{CredentialCandidate, Error, Reference};

impl Resolver {
    /// Fetches the compatibility artifact `query` asks for, of `image` (explicit: the artifact
    /// itself; referrers: the image they refer to). `None`: the image has no such referrer.
    pub async fn compat(
        &self,
        image: &str,
        credentials: &[CredentialCandidate],
        query: &Query,
    ) -> Result<(Option<Fetched>, Learned), Error> {
        let reference = Reference::parse(image).inspect_err(|e| self.count_error(e))?;
        let resolved = crate::proxies::apply(&self.inner.config.proxies, &reference);
        let hosts = self
            .hosts(&resolved)
            .await
            .inspect_err(|e| self.count_error(e))?;
        let budget = Budget::new(MAX_REQUESTS_PER_LOOKUP);
        let referrers = matches!(query, Query::Referrers { .. });
        let mut last_error = None;
        for endpoint in hosts.endpoints_for(resolved.digest.is_some() || referrers) {
            if referrers && endpoint.mirror {
                continue;
            }
            let job = Job {
                reference: &reference,
                resolved: &resolved,
                credentials,
                query,
            };
            match self.compat_at(&job, endpoint, &budget).await {
                Err(error) if endpoint.mirror => {
                    tracing::debug!(%error, mirror = %endpoint.url, "mirror failed, trying the next host");
                    last_error = Some(error);
                }
                Err(error) => {
                    self.count_error(&error);
                    return Err(error);
                }
                Ok(found) => return Ok(found),
            }
        }
        let error = last_error.unwrap_or_else(|| Error::Config {
            reason: format!(
                "no configured host of registry {} may serve {resolved}",
                resolved.registry
            ),
        });
        self.count_error(&error);
        Err(error)
    }

    async fn compat_at(
        &self,
        job: &Job<'_>,
        endpoint: &Endpoint,
        budget: &Budget,
    ) -> Result<(Option<Fetched>, Learned), Error> {
        let inner = &*self.inner;
        let resolved = job.resolved;
        let host = endpoint.host();
        let ctx = Context {
            reference: job.reference.to_string(),
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
        let own = job
            .credentials
            .iter()
            .filter(|c| c.mirror.as_deref() == mirror);
        let anonymous = (!private).then_some(None);
        let mut last_error = None;
        for candidate in own.map(Some).chain(anonymous) {
            let session = Session {
                ctx: ctx.clone(),
                host: host.clone(),
                base: base.clone(),
                repository: resolved.repository.clone(),
                headers: headers.clone(),
                candidate,
                used: AtomicBool::new(false),
            };
            let fetcher = Fetcher {
                http: &http,
                auth: &inner.auth,
                session: &session,
            };
            let found = match job.query {
                Query::Explicit { media_type } => explicit(&fetcher, resolved, media_type)
                    .await
                    .map(|f| (Some(f), Learned::default())),
                Query::Referrers {
                    subject,
                    artifact_type,
                    media_type,
                    skip_api,
                } => {
                    let ask = Ask {
                        subject,
                        artifact_type,
                        media_type,
                        skip_api: *skip_api,
                    };
                    discovered(&fetcher, &ask).await
                }
            };
            match found {
                Err(error) if error.is_auth() => {
                    tracing::debug!(%error, source = candidate.map(|c| c.source.as_str()), "credential refused, trying the next");
                    last_error = Some(error);
                }
                other => return other,
            }
        }
        Err(last_error.unwrap_or(Error::NoCredentials {
            reference: ctx.reference,
            registry: ctx.registry,
        }))
    }
}

struct Job<'a> {
    reference: &'a Reference,
    resolved: &'a Reference,
    credentials: &'a [CredentialCandidate],
    query: &'a Query,
}

struct Ask<'a> {
    subject: &'a str,
    artifact_type: &'a str,
    media_type: &'a str,
    skip_api: bool,
}

fn invalid(fetcher: &Fetcher<'_>, what: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidContent {
        reference: fetcher.session.ctx.reference.clone(),
        registry: fetcher.session.ctx.registry.clone(),
        what,
        reason: crate::error::bounded(&reason.into(), 256).into_owned(),
    }
}

/// The spec layer, its stated size checked before the GET and the body digest-verified.
async fn layer(fetcher: &Fetcher<'_>, layer: &Layer) -> Result<Fetched, Error> {
    let size = usize::try_from(layer.size).unwrap_or(usize::MAX);
    if size > MAX_SPEC_BYTES {
        return Err(invalid(
            fetcher,
            "compatibility spec",
            format!("{} bytes, more than {MAX_SPEC_BYTES}", layer.size),
        ));
    }
    let spec: Bytes = fetcher.blob(&layer.digest).await?;
    if spec.len() != size {
        return Err(invalid(
            fetcher,
            "compatibility spec",
            "its size is not the one its descriptor states",
        ));
    }
    Ok(Fetched {
        digest: String::new(),
        media_type: layer.media_type.clone(),
        spec,
    })
}

/// ocifit-k8s's explicit artifact: the manifest the reference names, its layer of
/// `media_type`.
async fn explicit(
    fetcher: &Fetcher<'_>,
    resolved: &Reference,
    media_type: &str,
) -> Result<Fetched, Error> {
    let response = fetcher.manifest(resolved.object()).await?;
    if response.body.len() > MAX_MANIFEST_BYTES {
        return Err(invalid(
            fetcher,
            "artifact manifest",
            format!("larger than {MAX_MANIFEST_BYTES} bytes"),
        ));
    }
    let digest = manifest::digest_of(&response.body, resolved.digest.as_deref());
    let parsed = ArtifactManifest::parse(&response.body)
        .map_err(|e| invalid(fetcher, "artifact manifest", e))?;
    let wanted = parsed.layer(media_type, false).ok_or_else(|| {
        invalid(
            fetcher,
            "artifact manifest",
            format!("no layer of media type {media_type}"),
        )
    })?;
    let fetched = layer(fetcher, wanted).await?;
    Ok(Fetched { digest, ..fetched })
}

/// The referrers of the subject: the referrers API (unless known missing), all pages within
/// bounds; on its 404, the fallback tag.
async fn list(fetcher: &Fetcher<'_>, ask: &Ask<'_>) -> Result<(Vec<Referrer>, Learned), Error> {
    let mut learned = Learned::default();
    if !ask.skip_api {
        let path = format!("{}/referrers/{}", fetcher.session.repository, ask.subject);
        let mut url = fetcher
            .session
            .base
            .join(&path)
            .map_err(|e| invalid(fetcher, "reference", format!("cannot build a URL ({e})")))?;
        url.query_pairs_mut()
            .append_pair("artifactType", ask.artifact_type);
        let mut found = Vec::new();
        for page in 0..MAX_PAGES {
            let response = fetcher
                .auth
                .get(
                    fetcher.http,
                    fetcher.session,
                    url.clone(),
                    Some(INDEX_MEDIA_TYPE),
                    Kind::Referrers,
                )
                .await?;
            if page == 0 && response.status.as_u16() == 404 {
                learned.no_referrers_api = true;
                break;
            }
            let response = fetcher.check_status(response)?;
            tracing::debug!(
                registry = %fetcher.session.ctx.registry,
                filtered = filter_applied(&response.headers),
                "referrers page"
            );
            found.extend(
                referrers(&response.body, ask.artifact_type)
                    .map_err(|e| invalid(fetcher, "referrers index", e))?,
            );
            match next_page(&response.headers, &response.url) {
                Some(next) if found.len() < MAX_REFERRERS => url = next,
                _ => return Ok((found, learned)),
            }
        }
        if !learned.no_referrers_api {
            return Ok((found, learned));
        }
    }
    let Some(tag) = fallback_tag(ask.subject) else {
        return Ok((Vec::new(), learned));
    };
    let response = match fetcher.manifest(&tag).await {
        Err(Error::NotFound { .. }) => return Ok((Vec::new(), learned)),
        other => other?,
    };
    // A registry that resolves the tag as a digest (GitLab) serves the subject itself.
    let digest = manifest::digest_of(&response.body, Some(ask.subject));
    let is_index = response.content_type().is_none_or(|c| {
        c.split(';')
            .next()
            .is_some_and(|c| c.trim() == INDEX_MEDIA_TYPE)
    });
    if digest == ask.subject || !is_index {
        tracing::debug!(registry = %fetcher.session.ctx.registry, "the fallback tag is not an index of referrers: none");
        return Ok((Vec::new(), learned));
    }
    let found = referrers(&response.body, ask.artifact_type).unwrap_or_default();
    Ok((found, learned))
}

/// NFD's discovered artifact: the newest referrer whose manifest names the subject, its layer
/// of `media_type` (else its first, as NFD's client reads it).
async fn discovered(
    fetcher: &Fetcher<'_>,
    ask: &Ask<'_>,
) -> Result<(Option<Fetched>, Learned), Error> {
    let (mut found, learned) = list(fetcher, ask).await?;
    newest_first(&mut found);
    for referrer in found.iter().take(MAX_ATTEMPTS) {
        if usize::try_from(referrer.size).map_or(true, |s| s > MAX_MANIFEST_BYTES) {
            continue;
        }
        let response = fetcher.manifest(&referrer.digest).await?;
        let parsed = ArtifactManifest::parse(&response.body)
            .map_err(|e| invalid(fetcher, "artifact manifest", e))?;
        if parsed.subject() != Some(ask.subject) {
            tracing::debug!(registry = %fetcher.session.ctx.registry, artifact = %referrer.digest, "a referrer names another subject: skipped");
            continue;
        }
        let Some(wanted) = parsed.layer(ask.media_type, true) else {
            continue;
        };
        let fetched = layer(fetcher, wanted).await?;
        return Ok((
            Some(Fetched {
                digest: referrer.digest.clone(),
                ..fetched
            }),
            learned,
        ));
    }
    Ok((None, learned))
}
