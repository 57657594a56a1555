//! From a manifest to platforms: index entries give theirs without being fetched; nested indexes
//! (depth-bounded) and platform-less image entries (a bounded number per index) are fetched, each
//! digest once per lookup, a few at a time, within the lookup's request budget; a single
//! manifest's platform comes from its config blob; an artifact has none. Everything fetched by
//! digest is verified, every platform field validated.

use std::collections::{BTreeSet, HashSet};
use std::future::Future;

use bytes::Bytes;
use futures::{StreamExt as _, TryStreamExt as _};
use url::Url;

use crate::auth::{Auth, Session};
use crate::client::{Http, Response};
use crate::manifest::{self, Descriptor, ParseError, Parsed, ACCEPT};
use crate::metrics::Kind;
use crate::Error;
use noe_core::platform::MAX_PLATFORMS;
use noe_core::Platform;

/// Deepest index nesting followed.
pub const MAX_DEPTH: usize = 4;
/// Entries without a platform resolved per index (each costs one or two requests); further
/// ones are ignored.
pub const MAX_UNPLATFORMED: usize = 8;
/// Longest reason kept in an invalid-content error.
const MAX_REASON_LEN: usize = 256;
/// A revalidation HEAD waits at most the request timeout divided by this, then GETs (a HEAD
/// that hangs must not cost the whole timeout before the GET that answers).
pub const HEAD_TIMEOUT_SHARE: u32 = 3;
/// Manifests and blobs one lookup fetches at the same time.
pub const MAX_CONCURRENT_FETCHES: usize = 4;

/// What a manifest walk found.
#[derive(Debug, Default)]
pub struct Walked {
    /// Distinct platforms, sorted.
    pub platforms: Vec<Platform>,
    /// An artifact (no platform of its own) was reached.
    pub artifact: bool,
}

/// Fetches manifests and blobs of one repository with one identity.
pub struct Fetcher<'a> {
    pub http: &'a Http,
    pub auth: &'a Auth,
    pub session: &'a Session<'a>,
}

impl Fetcher<'_> {
    /// GETs a manifest by tag or digest with the four-type `Accept`; a digest is verified.
    pub async fn manifest(&self, object: &str) -> Result<Response, Error> {
        let url = self.url("manifests", object)?;
        let response = self
            .auth
            .get(self.http, self.session, url, Some(ACCEPT), Kind::Manifest)
            .await?;
        let response = self.check_status(response)?;
        if object.contains(':') {
            self.verify(object, &response.body)?;
        }
        Ok(response)
    }

    /// HEADs a manifest by tag or digest with the same `Accept` as [`Fetcher::manifest`]: the
    /// digest the registry names in `Docker-Content-Digest` (no registry counts a HEAD as a
    /// pull). `None` when that header is absent or invalid, when the registry answers HEAD with
    /// a status other than success or an auth refusal (a 404 too: some registries refuse HEAD
    /// for what GET serves), or when it does not answer within [`HEAD_TIMEOUT_SHARE`] of the
    /// request timeout: the caller GETs instead, once.
    pub async fn head(&self, object: &str) -> Result<Option<String>, Error> {
        let url = self.url("manifests", object)?;
        let sent = self.auth.get(
            self.http,
            self.session,
            url,
            Some(ACCEPT),
            Kind::ManifestHead,
        );
        let bound = self.http.timeout() / HEAD_TIMEOUT_SHARE;
        let response = match tokio::time::timeout(bound, sent).await {
            Ok(Ok(response)) => response,
            Ok(Err(Error::Timeout { .. })) | Err(_) => {
                tracing::debug!(registry = %self.session.ctx.registry, "HEAD not answered in time: GET instead");
                return Ok(None);
            }
            Ok(Err(error)) => return Err(error),
        };
        if !response.status.is_success() {
            return Ok(None);
        }
        let digest = response
            .headers
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|d| crate::reference::validate_digest(d).is_ok());
        // By digest, the registry must name that digest.
        Ok(digest
            .filter(|d| !object.contains(':') || *d == object)
            .map(str::to_owned))
    }

    /// GETs a blob by digest (redirects followed by the client) and verifies it.
    pub async fn blob(&self, digest: &str) -> Result<Bytes, Error> {
        let response = self.get_blob(digest, "manifest", Kind::Blob).await?;
        self.verify(digest, &response.body)?;
        Ok(response.body)
    }

    /// GETs a layer blob by digest, its body left unread ([`Response::stream`]): redirects
    /// are followed by the client (`Authorization` dropped when one leaves the registry), the
    /// caller reads the body within its own budget and checks the digest when it read it whole.
    pub async fn layer(&self, digest: &str) -> Result<Response, Error> {
        self.get_blob(digest, "layer", Kind::Layer).await
    }

    /// GETs the blob `digest` (refused unless it is a digest, named as `what`) as `kind`.
    async fn get_blob(
        &self,
        digest: &str,
        what: &'static str,
        kind: Kind,
    ) -> Result<Response, Error> {
        crate::reference::validate_digest(digest).map_err(|reason| self.invalid(what, reason))?;
        let url = self.url("blobs", digest)?;
        let response = self
            .auth
            .get(self.http, self.session, url, None, kind)
            .await?;
        self.check_status(response)
    }

    /// Parses a manifest response, naming reference and registry on failure.
    pub fn parse(&self, response: &Response) -> Result<(String, Parsed), Error> {
        manifest::parse(response.content_type(), &response.body).map_err(|e| match e {
            ParseError::Invalid(reason) => self.invalid("manifest", reason),
            ParseError::Unsupported(media_type) => Error::UnsupportedMediaType {
                reference: self.session.ctx.reference.clone(),
                registry: self.session.ctx.registry.clone(),
                media_type: crate::error::bounded(&media_type, 128).into_owned(),
            },
        })
    }

    /// All platforms reachable from `top`. The children an index needs fetched are fetched one
    /// nesting level at a time, [`MAX_CONCURRENT_FETCHES`] at once, each digest once; a level
    /// that needs more requests than the lookup has left fails before sending any.
    pub async fn platforms(&self, top: Parsed) -> Result<Walked, Error> {
        let mut walked = Walked::default();
        let mut found = BTreeSet::new();
        let mut seen_manifests = HashSet::new();
        let mut seen_configs = HashSet::new();
        let mut level = vec![top];
        let mut depth = 0usize;
        while !level.is_empty() {
            let mut children = Vec::new();
            let mut configs = Vec::new();
            for parsed in level {
                match parsed {
                    Parsed::Image(config) => {
                        if seen_configs.insert(config.digest.clone()) {
                            configs.push(config);
                        }
                    }
                    Parsed::Index(entries) => {
                        let selected =
                            self.select_children(entries, depth, &mut found, &mut seen_manifests)?;
                        children.extend(selected);
                    }
                    Parsed::Artifact => walked.artifact = true,
                }
            }
            self.afford(configs.len().saturating_add(children.len()))?;
            let platforms = fetch_all(
                configs
                    .iter()
                    .map(|config| self.config_platform(config))
                    .collect(),
            )
            .await?;
            for platform in platforms {
                self.add(&mut found, platform)?;
            }
            level = fetch_all(
                children
                    .iter()
                    .map(|digest| async move {
                        let response = self.manifest(digest).await?;
                        self.parse(&response).map(|(_, child)| child)
                    })
                    .collect(),
            )
            .await?;
            depth += 1;
        }
        walked.platforms = found.into_iter().collect();
        Ok(walked)
    }

    /// Takes the platforms an index states and returns the digests of the entries that must be
    /// fetched (no platform, not `seen` before in this lookup), within the bounds.
    fn select_children(
        &self,
        entries: Vec<Descriptor>,
        depth: usize,
        platforms: &mut BTreeSet<Platform>,
        seen: &mut HashSet<String>,
    ) -> Result<Vec<String>, Error> {
        let mut children = Vec::new();
        for entry in entries {
            if entry.is_attestation() {
                continue;
            }
            let stated = entry.platform().map_err(|e| match e {
                ParseError::Invalid(reason) | ParseError::Unsupported(reason) => {
                    self.invalid("index entry", reason)
                }
            })?;
            if let Some(platform) = stated {
                self.add(platforms, platform)?;
                continue;
            }
            let media_type = entry.media_type.as_deref().unwrap_or_default();
            if !manifest::is_index(media_type) && !manifest::is_image_manifest(media_type) {
                continue;
            }
            if depth + 1 > MAX_DEPTH {
                return Err(Error::TooDeep {
                    reference: self.session.ctx.reference.clone(),
                    registry: self.session.ctx.registry.clone(),
                    limit: MAX_DEPTH,
                });
            }
            if seen.contains(&entry.digest) {
                continue;
            }
            if children.len() == MAX_UNPLATFORMED {
                tracing::debug!(reference = %self.session.ctx.reference, "index entries without platform beyond the bound are ignored");
                continue;
            }
            crate::reference::validate_digest(&entry.digest)
                .map_err(|reason| self.invalid("manifest", reason))?;
            seen.insert(entry.digest.clone());
            children.push(entry.digest);
        }
        Ok(children)
    }

    /// Adds a platform, refusing an image with more than [`MAX_PLATFORMS`] distinct ones.
    fn add(&self, found: &mut BTreeSet<Platform>, platform: Platform) -> Result<(), Error> {
        if found.len() >= MAX_PLATFORMS && !found.contains(&platform) {
            return Err(self.invalid(
                "index",
                format!("more than {MAX_PLATFORMS} distinct platforms"),
            ));
        }
        found.insert(platform);
        Ok(())
    }

    /// Fails at once when `fetches` requests exceed what the lookup may still send.
    fn afford(&self, fetches: usize) -> Result<(), Error> {
        let budget = &self.session.ctx.budget;
        if fetches > budget.remaining() {
            return Err(budget.exhausted(&self.session.ctx));
        }
        Ok(())
    }

    /// The platform of an image manifest, from its config blob (`manifest::parse` already
    /// turned manifests with another config type into artifacts).
    async fn config_platform(&self, config: &Descriptor) -> Result<Platform, Error> {
        let body = self.blob(&config.digest).await?;
        manifest::platform_from_config(&body).map_err(|e| match e {
            ParseError::Invalid(reason) | ParseError::Unsupported(reason) => {
                self.invalid("image config", reason)
            }
        })
    }

    fn url(&self, what: &str, object: &str) -> Result<Url, Error> {
        let path = format!("{}/{what}/{object}", self.session.repository);
        self.session
            .base
            .join(&path)
            .map_err(|e| self.invalid("reference", format!("cannot build a URL ({e})")))
    }

    pub(crate) fn check_status(&self, response: Response) -> Result<Response, Error> {
        let status = response.status.as_u16();
        match status {
            200..=299 => Ok(response),
            404 => Err(Error::NotFound {
                reference: self.session.ctx.reference.clone(),
                registry: self.session.ctx.registry.clone(),
            }),
            _ => Err(Error::Status {
                reference: self.session.ctx.reference.clone(),
                registry: self.session.ctx.registry.clone(),
                status,
            }),
        }
    }

    fn verify(&self, expected: &str, body: &[u8]) -> Result<(), Error> {
        let actual = manifest::digest_of(body, Some(expected));
        if actual == expected {
            Ok(())
        } else {
            Err(Error::DigestMismatch {
                reference: self.session.ctx.reference.clone(),
                registry: self.session.ctx.registry.clone(),
                expected: expected.to_owned(),
                actual,
            })
        }
    }

    fn invalid(&self, what: &'static str, reason: String) -> Error {
        Error::InvalidContent {
            reference: self.session.ctx.reference.clone(),
            registry: self.session.ctx.registry.clone(),
            what,
            // Parser messages may quote the registry's content (serde quotes a mistyped string
            // whole).
            reason: crate::error::bounded(&reason, MAX_REASON_LEN).into_owned(),
        }
    }
}

/// Runs `fetches` at most [`MAX_CONCURRENT_FETCHES`] at a time; the first error wins. (A
/// `Vec`, not an iterator: a closure in the stream's type makes the lookup future not `Send`
/// for every lifetime, which `tokio::spawn` needs.)
async fn fetch_all<T, F>(fetches: Vec<F>) -> Result<Vec<T>, Error>
where
    F: Future<Output = Result<T, Error>>,
{
    futures::stream::iter(fetches)
        .buffer_unordered(MAX_CONCURRENT_FETCHES)
        .try_collect()
        .await
}
