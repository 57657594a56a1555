//! `noe inspect`'s fetch: the top-level manifest as served, its platforms by the lookup's own
//! walk, and with a selection one child manifest and its config blob. Never cached (a person
//! asked the registry). Hosts, proxies, mirrors, credentials in order then anonymous access
//! (unless private), insecure registries, TLS, the address guard, the throttle and the request
//! budget are the lookup's: inspecting is a [`Step`] of the lookup's own endpoint and credential
//! loop (`fetch.rs`), with the same client, the same `Auth`, the same rules.

use futures::future::BoxFuture;

use super::fetch::{used, At, Step};
use super::{Resolver, Routed};
use crate::auth::Session;
use crate::cache::Answered;
use crate::inspect::{self, Config, Inspection, Pick, Selected, Served, Want};
use crate::manifest::{self, Parsed};
use crate::walk::Fetcher;
use crate::{Error, Resolution};
use noe_core::Platform;
use noe_credentials::CredentialCandidate;

/// `noe inspect`'s step at one endpoint with one credential.
struct Inspect<'w> {
    want: &'w Want,
}

impl Step for Inspect<'_> {
    type Output = Inspection;

    fn fetch<'s, 'a>(&'s self, at: At<'s, 'a>) -> BoxFuture<'s, Result<Inspection, Error>> {
        Box::pin(at.resolver.inspect_as(at, self.want))
    }
}

impl Resolver {
    /// Fetches the image `routed` from its registry for `noe inspect`: the manifest or index
    /// exactly as served, its entries, the platforms a lookup would find, and what `want`
    /// selects. The endpoints of [`Routed::endpoints`] are tried in order (a failing mirror
    /// passes to the next), at each its credentials in order then anonymous access, as a lookup
    /// does.
    pub async fn inspect(
        &self,
        routed: &Routed,
        credentials: &[CredentialCandidate],
        want: &Want,
    ) -> Result<Inspection, Error> {
        let request = routed.request(credentials, true);
        let (inspection, _) = self
            .fetch(&request, &Inspect { want })
            .await
            .inspect_err(|e| self.count_error(e))?;
        Ok(inspection)
    }

    /// One credential at one endpoint: the manifest, its platforms, and the selection.
    async fn inspect_as(&self, at: At<'_, '_>, want: &Want) -> Result<Inspection, Error> {
        let fetcher = at.fetcher();
        let (session, request, endpoint) = (at.session, at.request, at.endpoint);
        let resolved = request.resolved;
        let mut fetched_as = resolved.clone();
        if endpoint.mirror {
            fetched_as.registry.clone_from(&session.host);
        }
        let used = || used(session);
        if want.digest_only && want.platform.is_none() {
            if let Some(digest) = fetcher.head(resolved.object()).await? {
                return Ok(Inspection {
                    resolution: Resolution {
                        image: request.reference.to_string(),
                        resolved: fetched_as.to_string(),
                        digest: digest.clone(),
                        media_type: String::new(),
                        credential_source: used().map(|c| c.source.clone()),
                        platforms: Vec::new(),
                        answered_by: Answered::Head,
                    },
                    manifest: Served {
                        media_type: String::new(),
                        digest,
                        raw: bytes::Bytes::new(),
                    },
                    children: Vec::new(),
                    children_total: 0,
                    config_digest: None,
                    pick: None,
                    digest_only: true,
                });
            }
        }
        let response = fetcher.manifest(resolved.object()).await?;
        let (media_type, parsed) = fetcher.parse(&response)?;
        let top = Served {
            media_type: media_type.clone(),
            digest: manifest::digest_of(&response.body, resolved.digest.as_deref()),
            raw: response.body.clone(),
        };
        let mut children = Vec::new();
        let mut children_total = 0;
        let mut config_digest = None;
        let mut pick = None;
        let platforms = match &parsed {
            Parsed::Index(entries) => {
                (children, children_total) = inspect::children(entries);
                let walked = fetcher.platforms(parsed.clone()).await?;
                if walked.platforms.is_empty() && !walked.artifact {
                    return Err(no_platforms(session));
                }
                if let Some(spec) = &want.platform {
                    pick = Some(match inspect::choose(&children, spec) {
                        Some(child) => {
                            let digest = child.digest.clone();
                            let platform = child.platform.clone().unwrap_or_else(Platform::any);
                            Pick::Selected(Box::new(
                                select_child(&fetcher, &digest, platform).await?,
                            ))
                        }
                        None => Pick::Missing {
                            available: inspect::available(&children),
                        },
                    });
                } else if want.config {
                    pick = Some(Pick::Missing {
                        available: inspect::available(&children),
                    });
                }
                walked.platforms
            }
            Parsed::Image(descriptor) => {
                config_digest = Some(descriptor.digest.clone());
                let raw = fetcher.blob(&descriptor.digest).await?;
                let platform = manifest::platform_from_config(&raw)
                    .map_err(|e| invalid_config(&fetcher, e))?;
                let wanted = want.platform.as_ref();
                if wanted.is_some_and(|spec| !spec.matches(&platform)) {
                    pick = Some(Pick::Missing {
                        available: vec![platform.clone()],
                    });
                } else if wanted.is_some() || want.config {
                    pick = Some(Pick::Selected(Box::new(Selected {
                        platform: platform.clone(),
                        manifest: top.clone(),
                        config: Some(summarize(&fetcher, descriptor, raw)?),
                    })));
                }
                vec![platform]
            }
            Parsed::Artifact => {
                if want.platform.is_some() || want.config {
                    pick = Some(Pick::Missing {
                        available: Vec::new(),
                    });
                }
                Vec::new()
            }
        };
        Ok(Inspection {
            resolution: Resolution {
                image: request.reference.to_string(),
                resolved: fetched_as.to_string(),
                digest: top.digest.clone(),
                media_type,
                credential_source: used().map(|c| c.source.clone()),
                platforms,
                answered_by: Answered::Get,
            },
            manifest: top,
            children,
            children_total,
            config_digest,
            pick,
            digest_only: false,
        })
    }
}

fn no_platforms(session: &Session<'_>) -> Error {
    Error::NoPlatforms {
        reference: session.ctx.reference.clone(),
        registry: session.ctx.registry.clone(),
    }
}

/// An index's child chosen by platform: its manifest (verified against the digest) and, for an
/// image, its config.
async fn select_child(
    fetcher: &Fetcher<'_>,
    digest: &str,
    platform: Platform,
) -> Result<Selected, Error> {
    crate::reference::validate_digest(digest).map_err(|reason| Error::InvalidContent {
        reference: fetcher.session.ctx.reference.clone(),
        registry: fetcher.session.ctx.registry.clone(),
        what: "index entry",
        reason: crate::error::bounded(&reason, 256).into_owned(),
    })?;
    let response = fetcher.manifest(digest).await?;
    let (media_type, parsed) = fetcher.parse(&response)?;
    let config = match &parsed {
        Parsed::Image(descriptor) => Some(fetch_config(fetcher, descriptor).await?),
        Parsed::Artifact => None,
        Parsed::Index(_) => {
            return Err(Error::InvalidContent {
                reference: fetcher.session.ctx.reference.clone(),
                registry: fetcher.session.ctx.registry.clone(),
                what: "index entry",
                reason: format!("the entry for {platform} is an index, not an image"),
            })
        }
    };
    Ok(Selected {
        platform,
        manifest: Served {
            media_type,
            digest: digest.to_owned(),
            raw: response.body,
        },
        config,
    })
}

/// An image's config blob (verified against its digest, within the client's body cap),
/// summarized.
async fn fetch_config(
    fetcher: &Fetcher<'_>,
    descriptor: &manifest::Descriptor,
) -> Result<Config, Error> {
    let raw = fetcher.blob(&descriptor.digest).await?;
    summarize(fetcher, descriptor, raw)
}

fn summarize(
    fetcher: &Fetcher<'_>,
    descriptor: &manifest::Descriptor,
    raw: bytes::Bytes,
) -> Result<Config, Error> {
    let summary = inspect::summarize_config(&raw).map_err(|e| invalid_config(fetcher, e))?;
    let media_type = descriptor
        .media_type
        .as_deref()
        .unwrap_or(manifest::OCI_CONFIG);
    Ok(Config {
        served: Served {
            media_type: crate::error::bounded(media_type, 128).into_owned(),
            digest: descriptor.digest.clone(),
            raw,
        },
        summary,
    })
}

fn invalid_config(fetcher: &Fetcher<'_>, error: manifest::ParseError) -> Error {
    let (manifest::ParseError::Invalid(reason) | manifest::ParseError::Unsupported(reason)) = error;
    Error::InvalidContent {
        reference: fetcher.session.ctx.reference.clone(),
        registry: fetcher.session.ctx.registry.clone(),
        what: "image config",
        reason: crate::error::bounded(&reason, 256).into_owned(),
    }
}
