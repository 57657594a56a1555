//! The resolver: the image as written → the cache (in-process, then shared) → on a miss, the
//! reference → proxies → hosts → credential candidates in order → a HEAD when a digest is known,
//! else the manifest walk (`resolver/fetch.rs`).

mod artifact_step;
mod fetch;
mod inspect_step;
pub mod tags;
mod verify_step;

use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;

use crate::auth::Auth;
pub use crate::cache::Answered;
use crate::cache::{Entry, PlatformCache, Scope};
pub use crate::client::pool::MAX_POOLED_HOSTS;
use crate::client::Http;
pub use crate::client::{MAX_REQUESTS_PER_LOOKUP, POOL_MAX_IDLE_PER_HOST};
use crate::hosts::{Endpoint, HostsConfig};
use crate::metrics::Metrics;
use crate::shared::SharedCache;
pub use crate::walk::{MAX_CONCURRENT_FETCHES, MAX_DEPTH, MAX_UNPLATFORMED};
use crate::{proxies, Config, Error, Reference};
use noe_core::Platform;
use noe_credentials::CredentialCandidate;

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
    /// How this answer was found: from this process's cache, the shared cache, a HEAD whose
    /// digest was known (no GET), or a GET of the manifest.
    pub answered_by: Answered,
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

/// An image routed once ([`Resolver::routed`]): parsed, rewritten by the proxies, with the host
/// configuration of the registry actually contacted. Callers match credentials on it
/// ([`Routed::target`], and each mirror of [`Routed::endpoints`] for its own host), then look it
/// up with [`Resolver::platforms_routed`] or [`Resolver::resolve_routed`], which neither parse
/// nor route it again.
#[derive(Clone, Debug)]
pub struct Routed {
    /// As the caller wrote it: the cache key.
    image: String,
    /// As parsed from `image`.
    reference: Reference,
    /// After proxies.
    resolved: Reference,
    /// `resolved` as text.
    target: String,
    /// The host configuration of `resolved`'s registry.
    hosts: Arc<HostsConfig>,
}

impl Routed {
    /// The image as the caller wrote it.
    pub fn image(&self) -> &str {
        &self.image
    }

    /// The normalized reference, before proxies (what `--platform-overrides` match).
    pub fn reference(&self) -> &Reference {
        &self.reference
    }

    /// The reference after proxies: what is contacted, so what credentials are matched for.
    pub fn target(&self) -> &Reference {
        &self.resolved
    }

    /// [`Routed::target`] as text.
    pub fn target_name(&self) -> &str {
        &self.target
    }

    /// The hosts that may serve it, in the order they are tried: containerd mirrors (only
    /// `resolve`-capable ones for a tag, `pull`-capable ones for a digest), then the registry's
    /// server. Callers match credentials for each mirror's own host
    /// ([`Endpoint::credential_image`]) and pass them marked with
    /// [`CredentialCandidate::for_mirror`].
    pub fn endpoints(&self) -> Vec<&Endpoint> {
        self.hosts.endpoints_for(self.resolved.digest.is_some())
    }

    /// The request of one fetch with `credentials`: the endpoints that may serve it (by tag
    /// `resolve`-capable ones, by digest `pull`-capable ones), the registry's server alone
    /// without `mirrors` (referrers are asked of the registry itself).
    fn request<'a>(
        &'a self,
        credentials: &'a [CredentialCandidate],
        mirrors: bool,
    ) -> fetch::Request<'a> {
        let endpoints = self
            .hosts
            .endpoints_for(self.resolved.digest.is_some() || !mirrors)
            .into_iter()
            .filter(|endpoint| mirrors || !endpoint.mirror)
            .collect();
        fetch::Request {
            reference: &self.reference,
            resolved: &self.resolved,
            target: &self.target,
            endpoints,
            credentials,
            refused: fetch::Refused::default(),
        }
    }
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
    /// The second level, when configured.
    shared: Option<SharedCache>,
    metrics: Metrics,
    /// Verifications running at once in this process (`--verify-concurrency`).
    verify_permits: tokio::sync::Semaphore,
    /// The verdicts known, by platform manifest digest.
    verdicts: Arc<crate::verify::Verdicts>,
    /// The background verification's queue, once started: cold lookups are offered to it.
    queue: std::sync::OnceLock<Arc<crate::verify::Queue>>,
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
        let shared = config
            .shared_cache
            .as_ref()
            .map(|shared| SharedCache::new(shared, metrics.clone()))
            .transpose()?;
        let verify_permits = tokio::sync::Semaphore::new(config.verification.concurrency.max(1));
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                http,
                auth,
                cache,
                shared,
                metrics,
                verify_permits,
                verdicts: Arc::default(),
                queue: std::sync::OnceLock::new(),
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

    /// Resolves the platforms of `image` with the node's own credentials (no [`Scope`]): what
    /// `noe inspect` prints. See [`Resolver::resolve_in`].
    pub async fn resolve(
        &self,
        image: &str,
        credentials: &[CredentialCandidate],
    ) -> Result<Arc<Resolution>, Error> {
        self.resolve_in(image, None, credentials).await
    }

    /// Resolves the platforms of `image` looked up in `scope`: the image is parsed once, a
    /// `--platform-overrides` entry answers first (no host configuration asked), else it is
    /// routed and looked up as [`Resolver::resolve_routed`] does (the overrides not asked again).
    pub async fn resolve_in(
        &self,
        image: &str,
        scope: Option<Scope>,
        credentials: &[CredentialCandidate],
    ) -> Result<Arc<Resolution>, Error> {
        let reference = Reference::parse(image).inspect_err(|e| self.count_error(e))?;
        if let Some(matched) = self.override_of(&reference).await {
            return Ok(Arc::new(matched.resolution(&reference)));
        }
        let routed = self.route(image, reference).await?;
        self.resolve_entry(&routed, scope, credentials).await
    }

    /// Resolves the platforms of an image already routed, looked up in `scope`. A
    /// `--platform-overrides` entry answers first. A fresh cached answer (one any caller may
    /// use, else one found in `scope`) is returned as it is. Otherwise the shared cache is
    /// asked, then the endpoints of [`Routed::endpoints`] are tried in order, a failing mirror
    /// passing to the next. At each, its candidates (unmarked ones at the registry's server,
    /// ones marked for a mirror's host at that mirror) are tried in order (a 401/403 moves to
    /// the next), then anonymous access unless the image as named at that host matches
    /// `private_registries`. An expired answer is revalidated with a HEAD: an unchanged digest
    /// costs no GET.
    pub async fn resolve_routed(
        &self,
        routed: &Routed,
        scope: Option<Scope>,
        credentials: &[CredentialCandidate],
    ) -> Result<Arc<Resolution>, Error> {
        if let Some(matched) = self.override_of(&routed.reference).await {
            return Ok(Arc::new(matched.resolution(&routed.reference)));
        }
        self.resolve_entry(routed, scope, credentials).await
    }

    /// [`Resolver::resolve_routed`] past the overrides: the cache, else the registry.
    async fn resolve_entry(
        &self,
        routed: &Routed,
        scope: Option<Scope>,
        credentials: &[CredentialCandidate],
    ) -> Result<Arc<Resolution>, Error> {
        let (entry, answered) = self.entry(routed, scope, credentials).await?;
        let mut resolution = entry.resolution(&routed.reference.to_string(), &routed.target);
        resolution.answered_by = answered;
        Ok(Arc::new(resolution))
    }

    /// The platforms of `image` if a fresh answer is cached for any caller or for `scope`: one
    /// keyed hash and one table read, no parsing and no credential matching (the warm path).
    /// With `--platform-overrides`, the last good version of the file answers first (the image
    /// parsed once to match it, nothing awaited; a due reload runs in the background); an image
    /// that does not parse is left to [`Resolver::routed`], which counts the error.
    pub fn cached(&self, image: &str, scope: Option<Scope>) -> Option<Arc<[Platform]>> {
        if let Some(overrides) = &self.inner.config.platform_overrides {
            let current = overrides.now()?;
            if !current.is_empty() {
                let reference = Reference::parse(image).ok()?;
                if let Some(matched) = current.find(&reference) {
                    return Some(matched.platforms);
                }
            }
        }
        self.inner
            .cache
            .fresh(image, scope)
            .map(|entry| entry.platforms())
    }

    /// The digest the fresh cached answer of `image` (any pod's, or one found in `scope`)
    /// resolved to: the index's for a multi-platform image, the manifest's for a single one. No
    /// I/O; `None` when nothing fresh is cached, and for an image a `--platform-overrides` entry
    /// answers (it has no digest).
    pub fn cached_digest(&self, image: &str, scope: Option<Scope>) -> Option<String> {
        if let Some(overrides) = &self.inner.config.platform_overrides {
            let current = overrides.now()?;
            if !current.is_empty() {
                let reference = Reference::parse(image).ok()?;
                if current.find(&reference).is_some() {
                    return None;
                }
            }
        }
        self.inner
            .cache
            .fresh(image, scope)
            .map(|entry| entry.digest())
    }

    /// A probe of the cache for the fresh answers of many images (with their manifest digests:
    /// [`crate::cache::Entry::into_found`]), the clock read once and the hits counted together
    /// when it is dropped: the policy engines' lookup endpoint probes every key of a request
    /// with one. `None` when a `--platform-overrides` file is configured
    /// ([`Resolver::resolve_in`] answers those).
    pub fn cache_probe(&self) -> Option<crate::cache::Probe<'_>> {
        if self.inner.config.platform_overrides.is_some() {
            return None;
        }
        Some(self.inner.cache.probe())
    }

    /// Whether answers a [`Resolver::cache_probe`] found under `stamp` are still what a new
    /// probe would find (no entry changed, none expired, the same node-level credentials).
    pub fn cache_holds(&self, stamp: &crate::cache::Stamp) -> bool {
        self.inner.config.platform_overrides.is_none() && self.inner.cache.holds(stamp)
    }

    /// The platforms of [`Resolver::resolve_routed`] alone, shared with the cache (the
    /// admission path, after [`Resolver::cached`] missed): the override on the reference
    /// already parsed, then one cache probe that loads on a miss; no string building.
    pub async fn platforms_routed(
        &self,
        routed: &Routed,
        scope: Option<Scope>,
        credentials: &[CredentialCandidate],
    ) -> Result<Arc<[Platform]>, Error> {
        if let Some(matched) = self.override_of(&routed.reference).await {
            return Ok(matched.platforms);
        }
        Ok(self.entry(routed, scope, credentials).await?.0.platforms())
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

    /// The `--platform-overrides` entry that answers for `reference`; `None` without overrides
    /// or match.
    async fn override_of(&self, reference: &Reference) -> Option<crate::overrides::Matched> {
        match &self.inner.config.platform_overrides {
            Some(overrides) => overrides.find(reference).await,
            None => None,
        }
    }

    /// The cache entry of `routed` in `scope` (loaded on a miss) and how it was found: the one
    /// cache probe of a lookup.
    async fn entry(
        &self,
        routed: &Routed,
        scope: Option<Scope>,
        credentials: &[CredentialCandidate],
    ) -> Result<(Entry, Answered), Error> {
        let immutable = routed.resolved.digest.is_some();
        self.inner
            .cache
            .get_or_load(&routed.image, scope, immutable, |stale| async {
                let request = routed.request(credentials, true);
                let loaded = self
                    .lookup(&request, stale)
                    .await
                    .inspect_err(|e| self.count_error(e))?;
                // A cold lookup: the image is verified in the background, when that runs.
                if let Some(queue) = self.inner.queue.get() {
                    if !loaded.entry.platforms().is_empty() {
                        queue.offer(routed, credentials, &loaded.entry.digest());
                    }
                }
                Ok(loaded)
            })
            .await
    }

    /// `image` parsed, after proxies, with the host configuration of its registry (an error is
    /// counted), each once: what a lookup, `noe inspect` and an artifact fetch build their
    /// request from, and what callers match credentials on.
    pub async fn routed(&self, image: &str) -> Result<Routed, Error> {
        let reference = Reference::parse(image).inspect_err(|e| self.count_error(e))?;
        self.route(image, reference).await
    }

    /// [`Resolver::routed`] for `image` already parsed as `reference`.
    async fn route(&self, image: &str, reference: Reference) -> Result<Routed, Error> {
        let resolved = proxies::apply(&self.inner.config.proxies, &reference);
        let hosts = self
            .hosts(&resolved)
            .await
            .inspect_err(|e| self.count_error(e))?;
        Ok(Routed {
            image: image.to_owned(),
            target: resolved.to_string(),
            reference,
            resolved,
            hosts,
        })
    }

    /// The host configuration of `target`'s registry: the provider's, else the default server.
    /// Asked once per routed image, not cached here: the provider keeps its own last good
    /// configuration per registry (`hosts.toml` is reloaded in the background).
    async fn hosts(&self, target: &Reference) -> Result<Arc<HostsConfig>, Error> {
        let inner = &*self.inner;
        if let Some(provider) = inner.config.hosts.as_ref() {
            if inner.metrics.configured_hosts_due() {
                let hosts = provider.configured_hosts().await;
                inner.metrics.set_configured_hosts(hosts);
            }
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
        Ok(Arc::new(hosts))
    }

    /// The verdicts this process knows (a source of platform corrections for the decider).
    pub fn verdicts(&self) -> Arc<crate::verify::Verdicts> {
        self.inner.verdicts.clone()
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
    noe_credentials::matching::image_matches(pattern, image)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
