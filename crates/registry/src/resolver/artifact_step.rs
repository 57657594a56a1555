//! The fetch of compatibility artifacts (`crate::artifacts`): a [`Step`] of the lookup's own
//! endpoint and credential loop (`fetch.rs`), so the same hosts, proxies, mirrors, credentials
//! in order then anonymous access (unless private), insecure registries, TLS, address guard,
//! throttle and request budget. Referrers are asked of the registry itself, never of a mirror
//! (a mirror's 404 would hide the registry's artifacts).

use bytes::Bytes;
use futures::future::BoxFuture;

use super::fetch::{At, Step};
use super::{Resolver, Routed};
use crate::artifacts::{
    fallback_tag, filter_applied, newest_first, next_page, referrers, ArtifactManifest, Fetched,
    Layer, Learned, Query, Referrer, INDEX_MEDIA_TYPE, MAX_ATTEMPTS, MAX_MANIFEST_BYTES, MAX_PAGES,
    MAX_PLATFORM_SUBJECTS, MAX_REFERRERS, MAX_SPEC_BYTES,
};
use crate::manifest;
use crate::metrics::Kind;
use crate::walk::Fetcher;
use crate::{Error, Reference};
use noe_credentials::CredentialCandidate;

/// The compatibility artifact's step at one endpoint with one credential.
struct Compat<'q> {
    query: &'q Query,
}

impl Step for Compat<'_> {
    type Output = (Vec<Fetched>, Learned);

    fn fetch<'s, 'a>(&'s self, at: At<'s, 'a>) -> BoxFuture<'s, Result<Self::Output, Error>> {
        Box::pin(async move {
            let fetcher = at.fetcher();
            match self.query {
                Query::Explicit { media_type } => {
                    explicit(&fetcher, at.request.resolved, media_type)
                        .await
                        .map(|f| (vec![f], Learned::default()))
                }
                Query::Referrers {
                    subject,
                    artifact_type,
                    media_type,
                    skip_api,
                    index,
                } => {
                    let ask = Ask {
                        subject,
                        artifact_type,
                        media_type,
                        skip_api: *skip_api,
                    };
                    discovered(&fetcher, &ask, *index, at.request.resolved).await
                }
            }
        })
    }
}

impl Resolver {
    /// Fetches the compatibility artifact `query` asks for, of the image `routed` (explicit: the
    /// artifact itself; referrers: the image they refer to). Empty: the image has no such
    /// referrer. The lookup's own endpoint and credential loop ([`Resolver::fetch`]), mirrors
    /// left out for referrers.
    pub async fn fetch_artifacts(
        &self,
        routed: &Routed,
        credentials: &[CredentialCandidate],
        query: &Query,
    ) -> Result<(Vec<Fetched>, Learned), Error> {
        let referrers = matches!(query, Query::Referrers { .. });
        let request = routed.request(credentials, !referrers);
        let (found, _) = self
            .fetch(&request, &Compat { query })
            .await
            .inspect_err(|e| self.count_error(e))?;
        Ok(found)
    }
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
        spec_digest: layer.digest.clone(),
        spec,
        platform: None,
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

/// NFD's discovered artifacts: the subject's own (below); when the subject is an `index` with
/// none, the newest of each of its runnable platform manifests (at most
/// [`MAX_PLATFORM_SUBJECTS`], attestations left out), each marked with its platform. The
/// index's body is read for that (one more request), and every platform manifest costs its
/// referrers lookup; an image whose index carries the artifact costs nothing more. When the
/// subject is a platform manifest with none, pinned by digest beside a tag (`image`:
/// `name:tag@sha256:...`), the index the tag names is asked too ([`parent_index`]).
async fn discovered(
    fetcher: &Fetcher<'_>,
    ask: &Ask<'_>,
    index: bool,
    image: &Reference,
) -> Result<(Vec<Fetched>, Learned), Error> {
    let (found, mut learned) = newest(fetcher, ask).await?;
    if found.is_some() {
        return Ok((found.into_iter().collect(), learned));
    }
    if !index {
        let found = parent_index(fetcher, ask, image, &mut learned).await?;
        return Ok((found.into_iter().collect(), learned));
    }
    let response = fetcher.manifest(ask.subject).await?;
    let entries = match manifest::parse(response.content_type(), &response.body) {
        Ok((_, manifest::Parsed::Index(entries))) => entries,
        _ => return Ok((Vec::new(), learned)),
    };
    let mut out = Vec::new();
    let runnable = entries
        .iter()
        .filter(|e| !e.is_attestation())
        .filter(|e| crate::reference::validate_digest(&e.digest).is_ok())
        .filter_map(|e| Some((e, e.platform().ok()??)))
        .take(MAX_PLATFORM_SUBJECTS);
    for (entry, platform) in runnable {
        let ask = Ask {
            subject: &entry.digest,
            skip_api: ask.skip_api || learned.no_referrers_api,
            ..*ask
        };
        let (found, more) = newest(fetcher, &ask).await?;
        learned.no_referrers_api |= more.no_referrers_api;
        if let Some(found) = found {
            out.push(Fetched {
                platform: Some((platform.os.clone(), platform.architecture.clone())),
                ..found
            });
        }
    }
    Ok((out, learned))
}

/// The artifact attached to the index that holds a platform manifest: the registry API cannot
/// tell which index holds a manifest, but a reference pinned by digest beside its tag
/// (`name:tag@sha256:...`, as Renovate and Flux pin images) names one. The tag's manifest is
/// read (one request); when it is an index listing the subject, its newest artifact is the
/// image's (it holds wherever the image runs: the decision keeps the pod to the subject's
/// platform). Nothing when the reference has no tag, or the tag names no index holding it.
async fn parent_index(
    fetcher: &Fetcher<'_>,
    ask: &Ask<'_>,
    image: &Reference,
    learned: &mut Learned,
) -> Result<Option<Fetched>, Error> {
    let (Some(tag), Some(_)) = (image.tag.as_deref(), image.digest.as_deref()) else {
        return Ok(None);
    };
    let response = match fetcher.manifest(tag).await {
        Err(Error::NotFound { .. }) => return Ok(None),
        other => other?,
    };
    let holds_subject = match manifest::parse(response.content_type(), &response.body) {
        Ok((_, manifest::Parsed::Index(entries))) => {
            entries.iter().any(|entry| entry.digest == ask.subject)
        }
        _ => false,
    };
    if !holds_subject {
        tracing::debug!(registry = %fetcher.session.ctx.registry, tag, "the tag beside the digest names no index holding it");
        return Ok(None);
    }
    let digest = manifest::digest_of(&response.body, Some(ask.subject));
    let parent = Ask {
        subject: &digest,
        skip_api: ask.skip_api || learned.no_referrers_api,
        ..*ask
    };
    let (found, more) = newest(fetcher, &parent).await?;
    learned.no_referrers_api |= more.no_referrers_api;
    Ok(found)
}

/// The newest referrer whose manifest names the subject, its layer of `media_type` (else its
/// first, as NFD's client reads it).
async fn newest(fetcher: &Fetcher<'_>, ask: &Ask<'_>) -> Result<(Option<Fetched>, Learned), Error> {
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
