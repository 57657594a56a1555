//! The resolver: reference → proxies → cache → credential candidates in order → manifest walk.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use url::Url;

use crate::auth::{Auth, Session};
use crate::cache::{Entry, Key, PlatformCache};
pub use crate::client::MAX_REQUESTS_PER_LOOKUP;
use crate::client::{Budget, Context, Http};
use crate::credential::fingerprint;
use crate::hosts::{Endpoint, HostsConfig};
use crate::metrics::Metrics;
use crate::walk::Fetcher;
pub use crate::walk::{MAX_CONCURRENT_FETCHES, MAX_DEPTH, MAX_UNPLATFORMED};
use crate::{manifest, proxies, Config, CredentialCandidate, Error, Platform, Reference};

/// What an image resolves to. Serializes as `noe inspect --output json` prints it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Resolution {
    /// The normalized reference, e.g. `docker.io/library/nginx:latest`.
    pub image: String,
    /// The reference actually fetched (after proxies), e.g. `proxy.corp/library/nginx:latest`;
    /// with the mirror's `host[:port]` when a containerd mirror served it
    /// (`mirror.corp:5000/library/nginx:latest`).
    pub resolved: String,
    /// Digest of the top-level manifest.
    pub digest: String,
    /// Media type of the top-level manifest.
    pub media_type: String,
    /// `CredentialCandidate::source` of the credential used; `None` for anonymous access,
    /// serialized as `"anonymous"` (what `noe inspect` prints).
    #[serde(serialize_with = "source_or_anonymous")]
    pub credential_source: Option<String>,
    /// Sorted, deduplicated.
    #[serde(serialize_with = "platform_strings")]
    pub platforms: Vec<Platform>,
}

/// What [`Resolution::credential_source`] says of anonymous access.
pub const ANONYMOUS: &str = "anonymous";

fn source_or_anonymous<S: serde::Serializer>(
    source: &Option<String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(source.as_deref().unwrap_or(ANONYMOUS))
}

fn platform_strings<S: serde::Serializer>(platforms: &[Platform], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(platforms.iter().map(ToString::to_string))
}

/// Where an image is fetched from, in the order [`Resolver::resolve`] tries.
#[derive(Clone, Debug)]
pub struct Route {
    /// The reference after normalization and proxies.
    pub target: Reference,
    /// The hosts that may serve it: containerd mirrors in order (only `resolve`-capable ones
    /// for a tag, `pull`-capable ones for a digest), then the registry's server.
    pub endpoints: Vec<Endpoint>,
}

/// How long a registry's host configuration is reused before the provider is asked again.
const HOSTS_TTL: Duration = Duration::from_secs(10);
const HOSTS_CACHE_MAX: u64 = 4096;

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
    /// Host configuration per registry (after proxies), the default server included.
    hosts: moka::future::Cache<String, Arc<HostsConfig>>,
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
                hosts: moka::future::Cache::builder()
                    .max_capacity(HOSTS_CACHE_MAX)
                    .time_to_live(HOSTS_TTL)
                    .build(),
            }),
        })
    }

    /// The bounded `registry` metric label value of a registry host: the host when the
    /// configuration names it (proxies, insecure and private registries, the hosts provider's
    /// hosts and mirrors) or it is a big public registry, the provider's domain for hosts under
    /// a provider wildcard (`azurecr.io`), a configured glob as written, else `other`.
    pub fn registry_label(&self, host: &str) -> String {
        self.inner.metrics.registry_label(host)
    }

    /// The bounded `registry` label value of a failed lookup, from the error itself (the host
    /// it names, see [`Error::registry`]); `other` when it names none.
    pub fn error_label(&self, error: &Error) -> String {
        error.registry().map_or_else(
            || crate::metrics::labels::OTHER.to_owned(),
            |host| self.registry_label(host),
        )
    }

    /// The reference after normalization and proxies: what [`Resolver::resolve`] will contact.
    /// Callers use it to pick credentials for the host actually contacted.
    pub fn target(&self, image: &str) -> Result<Reference, Error> {
        let reference = Reference::parse(image)?;
        Ok(proxies::apply(&self.inner.config.proxies, &reference))
    }

    /// The hosts [`Resolver::resolve`] will try for `image`, in order. Callers match
    /// credentials for each mirror's own host ([`Endpoint::credential_image`]) and pass them
    /// marked with [`CredentialCandidate::for_mirror`].
    pub async fn route(&self, image: &str) -> Result<Route, Error> {
        let reference = Reference::parse(image)?;
        let target = proxies::apply(&self.inner.config.proxies, &reference);
        let hosts = self.hosts(&target).await?;
        let endpoints = hosts
            .endpoints_for(target.digest.is_some())
            .into_iter()
            .cloned()
            .collect();
        Ok(Route { target, endpoints })
    }

    /// Resolves the platforms of `image`. The endpoints of [`Resolver::route`] are tried in
    /// order, a failing mirror passing to the next. At each, its candidates (unmarked ones at the
    /// registry's server, ones marked for a mirror's host at that mirror) are tried in order (a
    /// 401/403 moves to the next), then anonymous access unless the image as named at that host
    /// matches `private_registries`.
    pub async fn resolve(
        &self,
        image: &str,
        credentials: &[CredentialCandidate],
    ) -> Result<Arc<Resolution>, Error> {
        if let Some((reference, matched)) = self.platform_override(image).await? {
            return Ok(Arc::new(matched.resolution(&reference)));
        }
        let (entry, reference, target) = self.cached(image, credentials).await?;
        Ok(Arc::new(entry.resolution(&reference.to_string(), &target)))
    }

    /// The platforms of [`Resolver::resolve`] alone, shared with the cache: a cached image
    /// costs no string building (the admission path).
    pub async fn platforms(
        &self,
        image: &str,
        credentials: &[CredentialCandidate],
    ) -> Result<Arc<[Platform]>, Error> {
        if let Some((_, matched)) = self.platform_override(image).await? {
            return Ok(matched.platforms);
        }
        Ok(self.cached(image, credentials).await?.0.platforms())
    }

    /// The `--platform-overrides` file, when there is one.
    pub fn platform_overrides_file(&self) -> Option<&std::path::Path> {
        self.inner
            .config
            .platform_overrides
            .as_deref()
            .map(crate::overrides::PlatformOverrides::path)
    }

    /// The `--platform-overrides` entry that answers for `image` (matched on its normalized
    /// reference, before proxies), with that reference; `None` without overrides or match.
    pub async fn platform_override(
        &self,
        image: &str,
    ) -> Result<Option<(Reference, crate::overrides::Matched)>, Error> {
        let Some(overrides) = &self.inner.config.platform_overrides else {
            return Ok(None);
        };
        let reference = Reference::parse(image).inspect_err(|e| self.count_error(e))?;
        let matched = overrides.find(&reference).await;
        Ok(matched.map(|m| (reference, m)))
    }

    /// The cache entry of `image` looked up with `credentials` (loaded on a miss), with the
    /// parsed reference and the reference after proxies it was fetched as.
    async fn cached(
        &self,
        image: &str,
        credentials: &[CredentialCandidate],
    ) -> Result<(Entry, Reference, String), Error> {
        let reference = Reference::parse(image).inspect_err(|e| self.count_error(e))?;
        let resolved = proxies::apply(&self.inner.config.proxies, &reference);
        let hosts = self
            .hosts(&resolved)
            .await
            .inspect_err(|e| self.count_error(e))?;
        let endpoints = hosts.endpoints_for(resolved.digest.is_some());
        let target = resolved.to_string();
        let mut identity = fingerprint(credentials);
        if self.inner.config.hosts.is_some() {
            // A changed hosts.toml makes new lookups.
            identity = chain_fingerprint(identity, &endpoints);
        }
        let key = Key::new(&target, identity, resolved.digest.is_some());
        let entry = self
            .inner
            .cache
            .get_or_load(key, &target, async {
                self.lookup(&reference, &resolved, &endpoints, credentials)
                    .await
                    .inspect_err(|e| self.count_error(e))
            })
            .await?;
        Ok((entry, reference, target))
    }

    /// The host configuration of `target`'s registry: the provider's, else the default server.
    async fn hosts(&self, target: &Reference) -> Result<Arc<HostsConfig>, Error> {
        let inner = &*self.inner;
        if let Some(provider) = inner.config.hosts.as_ref() {
            if inner.metrics.configured_hosts_due() {
                let hosts = provider.configured_hosts().await;
                inner.metrics.set_configured_hosts(hosts);
            }
        }
        if let Some(hosts) = inner.hosts.get(&target.registry).await {
            return Ok(hosts);
        }
        let provided = match &inner.config.hosts {
            Some(provider) => provider.hosts(&target.registry).await,
            None => None,
        };
        if let Some(provided) = &provided {
            // Mirrors are configured hosts (a `_default` server is the pod's registry: not one).
            let mirrors = provided.endpoints().iter().filter(|e| e.mirror);
            inner.metrics.add_mirror_hosts(mirrors.map(Endpoint::host));
        }
        let hosts = match provided {
            Some(hosts) => hosts,
            None => {
                HostsConfig::default_for(&target.registry).map_err(|e| Error::InvalidReference {
                    reference: target.to_string(),
                    reason: format!(
                        "registry {:?} is not a valid URL host ({e})",
                        target.registry
                    ),
                })?
            }
        };
        let hosts = Arc::new(hosts);
        inner
            .hosts
            .insert(target.registry.clone(), hosts.clone())
            .await;
        Ok(hosts)
    }

    /// Counts `n` platform answers a caller reused from its own short-lived memo as cache
    /// requests and hits (`noe_registry_cache_*_total`), so the hit ratio stays true.
    pub fn count_reused(&self, n: u64) {
        self.inner.cache.count_hits(n);
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

    /// Tries the endpoints in order (mirrors, then the server); a mirror that fails in any way
    /// passes to the next. The error of the server (else of the last endpoint) is returned.
    async fn lookup(
        &self,
        reference: &Reference,
        resolved: &Reference,
        endpoints: &[&Endpoint],
        credentials: &[CredentialCandidate],
    ) -> Result<Resolution, Error> {
        let mut last_error = None;
        let budget = Budget::new(MAX_REQUESTS_PER_LOOKUP);
        for &endpoint in endpoints {
            let result = self
                .lookup_at(reference, resolved, endpoint, credentials, &budget)
                .await;
            match result {
                Err(error) if endpoint.mirror => {
                    tracing::debug!(%error, mirror = %endpoint.url, "mirror failed, trying the next host");
                    last_error = Some(error);
                }
                other => return other,
            }
        }
        Err(last_error.unwrap_or_else(|| Error::Config {
            reason: format!(
                "no configured host of registry {} may serve {resolved}",
                resolved.registry
            ),
        }))
    }

    /// One endpoint: its credential candidates in order, then anonymous access unless private.
    async fn lookup_at(
        &self,
        reference: &Reference,
        resolved: &Reference,
        endpoint: &Endpoint,
        credentials: &[CredentialCandidate],
        budget: &Budget,
    ) -> Result<Resolution, Error> {
        let inner = &*self.inner;
        let host = endpoint.host();
        let ctx = Context {
            reference: reference.to_string(),
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
        let own = credentials.iter().filter(|c| c.mirror.as_deref() == mirror);
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
            match self
                .lookup_as(&http, &session, reference, resolved, endpoint)
                .await
            {
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

    async fn lookup_as(
        &self,
        http: &Http,
        session: &Session<'_>,
        reference: &Reference,
        resolved: &Reference,
        endpoint: &Endpoint,
    ) -> Result<Resolution, Error> {
        let fetcher = Fetcher {
            http,
            auth: &self.inner.auth,
            session,
        };
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
        let platforms = walked.platforms;
        let resolved = if endpoint.mirror {
            let mut at_mirror = resolved.clone();
            at_mirror.registry = session.host.clone();
            at_mirror
        } else {
            resolved.clone()
        };
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

/// `credentials` combined with the identity of the endpoint chain.
fn chain_fingerprint(credentials: u64, endpoints: &[&Endpoint]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    credentials.hash(&mut hasher);
    endpoints.hash(&mut hasher);
    hasher.finish()
}

/// A containerd host's `header` values; names or values HTTP cannot carry are skipped.
fn header_map(endpoint: &Endpoint) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, values) in &endpoint.headers {
        let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else {
            tracing::warn!(host = %endpoint.url, header = %name, "ignoring an invalid hosts.toml header name");
            continue;
        };
        for value in values {
            match HeaderValue::from_str(value) {
                Ok(mut value) => {
                    value.set_sensitive(true);
                    headers.append(name.clone(), value);
                }
                Err(_) => {
                    tracing::warn!(host = %endpoint.url, header = %name, "ignoring an invalid hosts.toml header value");
                }
            }
        }
    }
    headers
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
        assert_eq!(json["credentialSource"], "anonymous");
        assert_eq!(json["platforms"], serde_json::json!(["linux/arm/v7"]));
    }

    #[test]
    fn chain_fingerprint_follows_the_hosts() {
        let one = HostsConfig::parse(
            "docker.io",
            "[host.\"https://a.corp\"]\n",
            std::path::Path::new("/"),
        )
        .unwrap();
        let other = HostsConfig::parse(
            "docker.io",
            "[host.\"https://b.corp\"]\n",
            std::path::Path::new("/"),
        )
        .unwrap();
        let fp = |h: &HostsConfig| chain_fingerprint(7, &h.endpoints_for(false));
        assert_eq!(fp(&one), fp(&one.clone()));
        assert_ne!(fp(&one), fp(&other));
        assert_ne!(
            chain_fingerprint(7, &one.endpoints_for(false)),
            chain_fingerprint(8, &one.endpoints_for(false))
        );
    }

    #[test]
    fn host_headers_skip_what_http_cannot_carry() {
        let hosts = HostsConfig::parse(
            "docker.io",
            "[header]\n  x-ok = [\"1\", \"2\"]\n  \"bad name\" = \"x\"\n  x-bad-value = \"a\\nb\"\n",
            std::path::Path::new("/"),
        )
        .unwrap();
        let headers = header_map(hosts.server().unwrap());
        assert_eq!(headers.len(), 2, "{headers:?}");
        assert_eq!(headers.get_all("x-ok").iter().count(), 2);
        assert!(headers.get("x-ok").unwrap().is_sensitive());
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
