//! Kubelet credential provider plugins (`--image-credential-provider-bin-dir` and
//! `--image-credential-provider-config`): executed as the kubelet executes them, their answers
//! cached per `cacheKeyType` and `cacheDuration`.

mod config;
mod response;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

pub use config::{
    parse_provider_config, ConfigError, CredentialProviderConfig, ProviderConfig, ProviderSkip,
    CONFIG_API_VERSIONS, EXEC_API_VERSIONS,
};
pub use response::{parse_response, request_body, CacheKeyType, ProviderResponse, ResponseError};

use super::exec::{self, ExecError, ExecLimits};
use super::matching::{image_host, image_matches};
use crate::files::FileReader;
use crate::{Credential, CredentialCandidate};

/// Largest provider config file we read.
const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// A failed plugin run is not retried for this long (for the same repository).
const FAILURE_BACKOFF: Duration = Duration::from_secs(5);
/// Bound on cached answers per provider.
const MAX_CACHE_ENTRIES: usize = 10_000;

/// Why the provider configuration cannot be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("could not read credential provider config {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: crate::files::Error,
    },
    #[error("credential provider config {path} does not exist")]
    Missing { path: PathBuf },
    #[error("credential provider config {path} is larger than {max} bytes")]
    TooLarge { path: PathBuf, max: u64 },
    #[error("invalid credential provider config {path}")]
    Config {
        path: PathBuf,
        #[source]
        source: ConfigError,
    },
}

/// Why one plugin run gave nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    #[error("credential provider {name} could not be run")]
    Exec {
        name: String,
        #[source]
        source: ExecError,
    },
    #[error("credential provider {name} answered badly")]
    Response {
        name: String,
        #[source]
        source: ResponseError,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum CacheKey {
    Image(String),
    Registry(String),
    Global,
}

type Auth = Arc<Vec<(String, Credential)>>;

/// A plugin's answer and until when it is used (`None`: for this lookup only, not cached).
type Answer = (Auth, Option<Instant>);

struct Provider {
    config: ProviderConfig,
    cache: Mutex<HashMap<CacheKey, (Instant, Auth)>>,
    /// One run at a time per provider: concurrent lookups wait and then read the cache.
    exec_lock: tokio::sync::Mutex<()>,
}

/// The configured credential provider plugins.
#[derive(Clone)]
pub struct ProviderSource {
    bin_dir: PathBuf,
    providers: Vec<Arc<Provider>>,
    limits: ExecLimits,
}

impl std::fmt::Debug for ProviderSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderSource")
            .field("bin_dir", &self.bin_dir)
            .field(
                "providers",
                &self
                    .providers
                    .iter()
                    .map(|p| p.config.name.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("limits", &self.limits)
            .finish()
    }
}

/// The repository of an image reference: without tag or digest (the kubelet's `Image` cache key).
fn repository(image: &str) -> &str {
    let image = image.split_once('@').map_or(image, |(name, _)| name);
    let last_slash = image.rfind('/').map_or(0, |i| i + 1);
    match image[last_slash..].find(':') {
        Some(colon) => &image[..last_slash + colon],
        None => image,
    }
}

impl ProviderSource {
    /// Plugins from an already parsed config; skipped providers are logged.
    pub fn new(bin_dir: PathBuf, config: CredentialProviderConfig, limits: ExecLimits) -> Self {
        for skip in &config.skipped {
            tracing::warn!(reason = %skip, "skipping kubelet credential provider");
        }
        Self {
            bin_dir,
            providers: config
                .providers
                .into_iter()
                .map(|config| {
                    Arc::new(Provider {
                        config,
                        cache: Mutex::new(HashMap::new()),
                        exec_lock: tokio::sync::Mutex::new(()),
                    })
                })
                .collect(),
            limits,
        }
    }

    /// Read the config file (YAML or JSON). An empty file configures no provider.
    pub async fn load(
        bin_dir: PathBuf,
        config_path: &Path,
        limits: ExecLimits,
    ) -> Result<Self, Error> {
        Self::load_with(&FileReader::default(), bin_dir, config_path, limits).await
    }

    /// [`ProviderSource::load`], reading off the async workers with `files`' timeout.
    pub async fn load_with(
        files: &FileReader,
        bin_dir: PathBuf,
        config_path: &Path,
        limits: ExecLimits,
    ) -> Result<Self, Error> {
        let bytes = match files.read(config_path, MAX_CONFIG_BYTES).await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                return Err(Error::Missing {
                    path: config_path.to_owned(),
                })
            }
            Err(crate::files::Error::TooLarge { .. }) => {
                return Err(Error::TooLarge {
                    path: config_path.to_owned(),
                    max: MAX_CONFIG_BYTES,
                })
            }
            Err(source) => {
                return Err(Error::Read {
                    path: config_path.to_owned(),
                    source,
                })
            }
        };
        let text = String::from_utf8_lossy(&bytes);
        let config = parse_provider_config(&text).map_err(|source| Error::Config {
            path: config_path.to_owned(),
            source,
        })?;
        Ok(Self::new(bin_dir, config, limits))
    }

    /// The registry hosts the providers' `matchImages` name (globs kept, paths dropped).
    pub fn configured_hosts(&self) -> Vec<String> {
        self.providers
            .iter()
            .flat_map(|p| p.config.match_images.iter())
            .map(|pattern| image_host(pattern).to_owned())
            .filter(|host| !host.is_empty())
            .collect()
    }

    /// Names of the usable providers, in order.
    pub fn provider_names(&self) -> impl Iterator<Item = &str> {
        self.providers.iter().map(|p| p.config.name.as_str())
    }

    /// Credentials for `image` from every provider whose `matchImages` matches it, in config
    /// order; within a provider, the response's `auth` keys matching the image, most specific first.
    pub async fn candidates(&self, image: &str) -> Vec<CredentialCandidate> {
        let mut out = Vec::new();
        for provider in &self.providers {
            if !provider
                .config
                .match_images
                .iter()
                .any(|pattern| image_matches(pattern, image))
            {
                continue;
            }
            let (auth, until) = match self.lookup(provider, image).await {
                Ok(answer) => answer,
                Err(error) => {
                    tracing::warn!(%error, "kubelet credential provider gave no credentials");
                    continue;
                }
            };
            let mut matched: Vec<&(String, Credential)> = auth
                .iter()
                .filter(|(pattern, _)| image_matches(pattern, image))
                .collect();
            matched.sort_by(|a, b| b.0.cmp(&a.0));
            let source = format!("credential-provider:{}", provider.config.name);
            let expires = system_time(until);
            for (_, credential) in matched {
                if !out
                    .iter()
                    .any(|c: &CredentialCandidate| &c.credential == credential)
                {
                    out.push(CredentialCandidate::new(&source, credential.clone()).until(expires));
                }
            }
        }
        out
    }

    fn cached(provider: &Provider, image: &str) -> Option<Answer> {
        let now = Instant::now();
        let cache = provider
            .cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        [
            CacheKey::Image(repository(image).to_owned()),
            CacheKey::Registry(image_host(image).to_owned()),
            CacheKey::Global,
        ]
        .iter()
        .find_map(|key| {
            cache
                .get(key)
                .filter(|(expires, _)| *expires > now)
                .map(|(expires, auth)| (Arc::clone(auth), Some(*expires)))
        })
    }

    /// Keeps `auth` for `ttl`; the time it expires, `None` when it is not kept.
    fn store(provider: &Provider, key: CacheKey, ttl: Duration, auth: Auth) -> Option<Instant> {
        let now = Instant::now();
        let expires = now.checked_add(ttl)?;
        let mut cache = provider
            .cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if cache.len() >= MAX_CACHE_ENTRIES {
            cache.retain(|_, (expires, _)| *expires > now);
            if cache.len() >= MAX_CACHE_ENTRIES {
                cache.clear();
            }
        }
        cache.insert(key, (expires, auth));
        Some(expires)
    }

    async fn lookup(&self, provider: &Provider, image: &str) -> Result<Answer, RunError> {
        if let Some(answer) = Self::cached(provider, image) {
            return Ok(answer);
        }
        let _running = provider.exec_lock.lock().await;
        if let Some(answer) = Self::cached(provider, image) {
            return Ok(answer);
        }
        let name = provider.config.name.clone();
        let result = self.run(provider, image).await;
        match result {
            Ok(response) => {
                let ttl = response
                    .cache_duration
                    .unwrap_or(provider.config.default_cache_duration);
                let auth: Auth = Arc::new(response.auth);
                let mut until = None;
                if !ttl.is_zero() {
                    let key = match response.cache_key_type {
                        CacheKeyType::Image => CacheKey::Image(repository(image).to_owned()),
                        CacheKeyType::Registry => CacheKey::Registry(image_host(image).to_owned()),
                        CacheKeyType::Global => CacheKey::Global,
                    };
                    until = Self::store(provider, key, ttl, Arc::clone(&auth));
                }
                Ok((auth, until))
            }
            Err(source) => {
                // Back off briefly so a broken plugin is not run for every admission.
                let _ = Self::store(
                    provider,
                    CacheKey::Image(repository(image).to_owned()),
                    FAILURE_BACKOFF,
                    Arc::new(Vec::new()),
                );
                Err(match source {
                    RunFailure::Exec(source) => RunError::Exec { name, source },
                    RunFailure::Response(source) => RunError::Response { name, source },
                })
            }
        }
    }

    async fn run(&self, provider: &Provider, image: &str) -> Result<ProviderResponse, RunFailure> {
        let config = &provider.config;
        let program = self.bin_dir.join(&config.name);
        let stdout = exec::run(
            &program,
            &config.args,
            &config.env,
            &request_body(&config.api_version, image),
            self.limits,
        )
        .await
        .map_err(RunFailure::Exec)?;
        parse_response(&stdout).map_err(RunFailure::Response)
    }
}

/// The wall-clock time of `until` (`None`: now, the answer is good for this lookup only).
fn system_time(until: Option<Instant>) -> SystemTime {
    let now = SystemTime::now();
    until
        .and_then(|until| now.checked_add(until.saturating_duration_since(Instant::now())))
        .unwrap_or(now)
}

impl crate::Source for ProviderSource {
    fn kind(&self) -> &'static str {
        "credential-provider"
    }

    /// A host some provider's `matchImages` names.
    fn serves(&self, host: &str) -> bool {
        self.providers
            .iter()
            .flat_map(|p| p.config.match_images.iter())
            .any(|pattern| image_matches(image_host(pattern), host))
    }

    fn configured_hosts(&self) -> futures::future::BoxFuture<'_, Vec<String>> {
        Box::pin(async { ProviderSource::configured_hosts(self) })
    }

    fn credentials<'a>(
        &'a self,
        request: crate::source::Request<'a>,
    ) -> futures::future::BoxFuture<'a, Vec<CredentialCandidate>> {
        Box::pin(self.candidates(request.image))
    }
}

enum RunFailure {
    Exec(ExecError),
    Response(ResponseError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories() {
        for (image, repo) in [
            ("gcr.io/p/app:1", "gcr.io/p/app"),
            ("gcr.io/p/app", "gcr.io/p/app"),
            ("127.0.0.1:5000/app:1", "127.0.0.1:5000/app"),
            ("127.0.0.1:5000/app", "127.0.0.1:5000/app"),
            ("gcr.io/p/app@sha256:abc", "gcr.io/p/app"),
            ("gcr.io/p/app:1@sha256:abc", "gcr.io/p/app"),
        ] {
            assert_eq!(repository(image), repo, "{image}");
        }
    }
}
