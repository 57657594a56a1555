//! The resolver: reference → proxies → cache → credential candidates in order → manifest walk.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Serialize;
use url::Url;

use crate::auth::{Auth, Session};
use crate::cache::{Key, PlatformCache};
use crate::client::{Context, Http};
use crate::credential::fingerprint;
use crate::metrics::Metrics;
use crate::walk::Fetcher;
use crate::{manifest, proxies, Config, CredentialCandidate, Error, Platform, Reference};

/// What an image resolves to. Serializes as `noe inspect --output json` prints it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Resolution {
    /// The normalized reference, e.g. `docker.io/library/nginx:latest`.
    pub image: String,
    /// The reference actually fetched (after proxies), e.g. `proxy.corp/library/nginx:latest`.
    pub resolved: String,
    /// Digest of the top-level manifest.
    pub digest: String,
    /// Media type of the top-level manifest.
    pub media_type: String,
    /// `CredentialCandidate::source` of the credential used; `None` for anonymous access.
    pub credential_source: Option<String>,
    /// Sorted, deduplicated.
    #[serde(serialize_with = "platform_strings")]
    pub platforms: Vec<Platform>,
}

fn platform_strings<S: serde::Serializer>(platforms: &[Platform], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(platforms.iter().map(ToString::to_string))
}

/// Resolves images to platforms. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Resolver {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: Config,
    http: Http,
    auth: Auth,
    cache: PlatformCache,
    metrics: Metrics,
}

impl Resolver {
    /// Builds the resolver and registers its metrics on `metrics`.
    pub fn new(config: Config, metrics: &prometheus::Registry) -> Result<Self, Error> {
        for (pattern, replacement) in &config.proxies {
            if pattern.is_empty() || replacement.is_empty() || replacement.contains(['/', '*', '?'])
            {
                return Err(Error::Config {
                    reason: format!("invalid registry proxy rule {pattern:?}={replacement:?}"),
                });
            }
        }
        let metrics = Metrics::new(metrics, &config)?;
        let http = Http::new(&config, metrics.clone())?;
        let auth = Auth::new(&config, metrics.clone());
        let cache = PlatformCache::new(&config, metrics.clone());
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                http,
                auth,
                cache,
                metrics,
            }),
        })
    }

    /// The reference after normalization and proxies: what [`Resolver::resolve`] will contact.
    /// Callers use it to pick credentials for the host actually contacted.
    pub fn target(&self, image: &str) -> Result<Reference, Error> {
        let reference = Reference::parse(image)?;
        Ok(proxies::apply(&self.inner.config.proxies, &reference))
    }

    /// Resolves the platforms of `image`. Candidates are tried in order (a 401/403 moves to the
    /// next), then anonymous access unless the image matches `private_registries`.
    pub async fn resolve(
        &self,
        image: &str,
        credentials: &[CredentialCandidate],
    ) -> Result<Arc<Resolution>, Error> {
        let reference = Reference::parse(image).inspect_err(|e| self.count_error(e))?;
        let resolved = proxies::apply(&self.inner.config.proxies, &reference);
        let (image, target) = (reference.to_string(), resolved.to_string());
        let key = Key::new(&target, fingerprint(credentials), resolved.digest.is_some());
        self.inner
            .cache
            .get_or_load(key, &image, &target, async {
                self.lookup(&reference, &resolved, credentials)
                    .await
                    .inspect_err(|e| self.count_error(e))
            })
            .await
    }

    /// Lookups currently cached.
    pub fn cache_entries(&self) -> u64 {
        self.inner.cache.entries()
    }

    fn count_error(&self, error: &Error) {
        tracing::debug!(%error, "image lookup failed");
        self.inner
            .metrics
            .errors
            .with_label_values(&[error.kind()])
            .inc();
    }

    async fn lookup(
        &self,
        reference: &Reference,
        resolved: &Reference,
        credentials: &[CredentialCandidate],
    ) -> Result<Resolution, Error> {
        let inner = &*self.inner;
        let host = resolved.endpoint().to_owned();
        let scheme =
            if inner.config.is_insecure(&host) || inner.config.is_insecure(&resolved.registry) {
                "http"
            } else {
                "https"
            };
        let ctx = Context {
            reference: reference.to_string(),
            registry: resolved.registry.clone(),
        };
        let base =
            Url::parse(&format!("{scheme}://{host}/")).map_err(|e| Error::InvalidReference {
                reference: ctx.reference.clone(),
                reason: format!("registry {host:?} is not a valid URL host ({e})"),
            })?;
        inner
            .http
            .guard()
            .check_host(base.host_str().unwrap_or_default())?;
        let private = inner
            .config
            .private_registries
            .iter()
            .any(|pattern| is_private(pattern, &reference.name()));
        let anonymous = (!private).then_some(None);
        let candidates = credentials.iter().map(Some).chain(anonymous);
        let mut last_error = None;
        for candidate in candidates {
            let session = Session {
                ctx: ctx.clone(),
                host: host.clone(),
                base: base.clone(),
                repository: resolved.repository.clone(),
                candidate,
                used: AtomicBool::new(false),
            };
            match self.lookup_as(&session, reference, resolved).await {
                Err(error) if error.is_auth() => {
                    tracing::debug!(%error, source = candidate.map(|c| c.source.as_str()), "credential refused, trying the next");
                    last_error = Some(error);
                }
                other => return other,
            }
        }
        Err(last_error.unwrap_or(Error::NoCredentials {
            reference: ctx.reference,
            registry: resolved.registry.clone(),
        }))
    }

    async fn lookup_as(
        &self,
        session: &Session<'_>,
        reference: &Reference,
        resolved: &Reference,
    ) -> Result<Resolution, Error> {
        let fetcher = Fetcher {
            http: &self.inner.http,
            auth: &self.inner.auth,
            session,
        };
        let response = fetcher.manifest(resolved.object()).await?;
        let digest = manifest::digest_of(&response.body, resolved.digest.as_deref());
        let (media_type, parsed) = fetcher.parse(&response)?;
        let mut platforms = fetcher.platforms(parsed).await?;
        platforms.sort();
        platforms.dedup();
        if platforms.is_empty() {
            return Err(Error::NoPlatforms {
                reference: session.ctx.reference.clone(),
                registry: session.ctx.registry.clone(),
            });
        }
        Ok(Resolution {
            image: reference.to_string(),
            resolved: resolved.to_string(),
            digest,
            media_type,
            // Reported only when the registry asked for the credentials and got them.
            credential_source: session
                .candidate
                .filter(|_| session.used.load(Ordering::Relaxed))
                .map(|c| c.source.clone()),
            platforms,
        })
    }
}

/// kubelet `matchImages` semantics on the normalized `registry/repository` name.
fn is_private(pattern: &str, image: &str) -> bool {
    crate::credentials::matching::image_matches(pattern, image)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn private_patterns() {
        let cases = [
            ("*.corp.example", "registry.corp.example/team/app", true),
            ("*.corp.example", "a.b.corp.example/team/app", false),
            (
                "registry.corp.example:5000",
                "registry.corp.example/app",
                false,
            ),
            (
                "registry.corp.example/team",
                "registry.corp.example/team/app",
                true,
            ),
            (
                "registry.corp.example/team",
                "registry.corp.example/other/app",
                false,
            ),
            ("docker.io/acme", "docker.io/acme/app", true),
        ];
        for (pattern, image, expected) in cases {
            assert_eq!(is_private(pattern, image), expected, "{pattern} {image}");
        }
    }

    #[test]
    fn resolution_serializes_like_inspect_json() {
        let resolution = Resolution {
            image: "docker.io/library/nginx:latest".into(),
            resolved: "docker.io/library/nginx:latest".into(),
            digest: "sha256:0".into(),
            media_type: manifest::OCI_INDEX.into(),
            credential_source: None,
            platforms: vec![Platform::new("linux", "arm", Some("v7"))],
        };
        let json = serde_json::to_value(&resolution).unwrap();
        assert_eq!(json["mediaType"], manifest::OCI_INDEX);
        assert_eq!(json["credentialSource"], serde_json::Value::Null);
        assert_eq!(json["platforms"], serde_json::json!(["linux/arm/v7"]));
    }

    #[test]
    fn bad_proxy_rules_are_refused() {
        let config = Config {
            proxies: vec![("docker.io".into(), "proxy.corp/path".into())],
            ..Config::default()
        };
        assert!(matches!(
            Resolver::new(config, &prometheus::Registry::new()),
            Err(Error::Config { .. })
        ));
    }
}
