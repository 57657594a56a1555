//! From a manifest to platforms: index entries give theirs without being fetched; nested indexes
//! (depth-bounded) and platform-less image entries (a bounded number) are fetched; a single
//! manifest's platform comes from its config blob. Everything fetched by digest is verified.

use bytes::Bytes;
use url::Url;

use crate::auth::{Auth, Session};
use crate::client::{Http, Response};
use crate::manifest::{self, Descriptor, ParseError, Parsed, ACCEPT};
use crate::metrics::Kind;
use crate::{Error, Platform};

/// Deepest index nesting followed.
pub const MAX_DEPTH: usize = 4;
/// Entries without a platform resolved per index (each costs one or two requests).
pub const MAX_UNPLATFORMED: usize = 8;

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

    /// GETs a blob by digest (redirects followed by the client) and verifies it.
    pub async fn blob(&self, digest: &str) -> Result<Bytes, Error> {
        crate::reference::validate_digest(digest)
            .map_err(|reason| self.invalid("manifest", reason))?;
        let url = self.url("blobs", digest)?;
        let response = self
            .auth
            .get(self.http, self.session, url, None, Kind::Blob)
            .await?;
        let response = self.check_status(response)?;
        self.verify(digest, &response.body)?;
        Ok(response.body)
    }

    /// Parses a manifest response, naming reference and registry on failure.
    pub fn parse(&self, response: &Response) -> Result<(String, Parsed), Error> {
        manifest::parse(response.content_type(), &response.body).map_err(|e| match e {
            ParseError::Invalid(reason) => self.invalid("manifest", reason),
            ParseError::Unsupported(media_type) => Error::UnsupportedMediaType {
                reference: self.session.ctx.reference.clone(),
                registry: self.session.ctx.registry.clone(),
                media_type,
            },
        })
    }

    /// All platforms reachable from `top`, unsorted. The children an index needs fetched are
    /// fetched concurrently, one nesting level at a time.
    pub async fn platforms(&self, top: Parsed) -> Result<Vec<Platform>, Error> {
        let mut platforms = Vec::new();
        let mut level = vec![top];
        let mut depth = 0usize;
        while !level.is_empty() {
            let mut children = Vec::new();
            let mut configs = Vec::new();
            for parsed in level {
                match parsed {
                    Parsed::Image(config) => configs.push(config),
                    Parsed::Index(entries) => {
                        children.extend(self.select_children(entries, depth, &mut platforms)?);
                    }
                }
            }
            let found = futures::future::try_join_all(
                configs.iter().map(|config| self.config_platform(config)),
            )
            .await?;
            platforms.extend(found);
            level = futures::future::try_join_all(children.iter().map(|digest| async move {
                let response = self.manifest(digest).await?;
                self.parse(&response).map(|(_, child)| child)
            }))
            .await?;
            depth += 1;
        }
        Ok(platforms)
    }

    /// Takes the platforms an index states and returns the digests of the entries that must be
    /// fetched (no platform), within the bounds.
    fn select_children(
        &self,
        entries: Vec<Descriptor>,
        depth: usize,
        platforms: &mut Vec<Platform>,
    ) -> Result<Vec<String>, Error> {
        let mut children = Vec::new();
        for entry in entries {
            if entry.is_attestation() {
                continue;
            }
            if let Some(platform) = entry.platform() {
                platforms.push(platform);
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
            if children.len() == MAX_UNPLATFORMED {
                tracing::debug!(reference = %self.session.ctx.reference, "index entries without platform beyond the bound are ignored");
                continue;
            }
            crate::reference::validate_digest(&entry.digest)
                .map_err(|reason| self.invalid("manifest", reason))?;
            children.push(entry.digest);
        }
        Ok(children)
    }

    async fn config_platform(&self, config: &Descriptor) -> Result<Platform, Error> {
        if !manifest::is_image_config(config) {
            return Err(Error::UnsupportedMediaType {
                reference: self.session.ctx.reference.clone(),
                registry: self.session.ctx.registry.clone(),
                media_type: config.media_type.clone().unwrap_or_default(),
            });
        }
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

    fn check_status(&self, response: Response) -> Result<Response, Error> {
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
            reason,
        }
    }
}
