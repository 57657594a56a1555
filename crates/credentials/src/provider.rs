//! Kubelet credential provider plugins (`--image-credential-provider-bin-dir` and
//! `--image-credential-provider-config`): executed as the kubelet executes them, their answers
//! cached per `cacheKeyType` and `cacheDuration`.

mod account;
mod config;
mod renewal;
mod response;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

pub use config::{
    parse_provider_config, ConfigError, CredentialProviderConfig, ProviderConfig, ProviderSkip,
    TokenAttributes, TokenCacheType, CONFIG_API_VERSIONS, EXEC_API_VERSIONS, TOKEN_API_VERSION,
};
pub use response::{
    parse_response, request_body, request_body_with, CacheKeyType, ProviderResponse, ResponseError,
};

use super::exec::{self, ExecError, ExecLimits};
use super::matching::{image_host, image_matches};
use crate::files::FileReader;
use crate::source::{
    PodIdentity, Request, ServiceAccountError, ServiceAccountInfo, ServiceAccountToken,
};
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
pub enum ProviderError {
    #[error("could not read credential provider config {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: crate::files::FileError,
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
    #[error("credential provider {name} got no service account token")]
    ServiceAccount {
        name: String,
        #[source]
        source: ServiceAccountError,
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

/// Who a plugin runs for: the node (`account: None`, empty key) or a pod's service account.
struct Identity<'a> {
    /// The part of the cache key naming the identity ([`account::cache_key`]).
    key: String,
    account: Option<Account<'a>>,
}

impl Identity<'_> {
    fn node() -> Self {
        Self {
            key: String::new(),
            account: None,
        }
    }
}

/// A pod's service account, as a plugin with `tokenAttributes` is run for it.
struct Account<'a> {
    pod: PodIdentity<'a>,
    name: &'a str,
    audience: &'a str,
    annotations: BTreeMap<String, String>,
    /// Requested before the cache is asked (`cacheType: Token`), else only to run the plugin.
    token: Option<ServiceAccountToken>,
}

struct Provider {
    config: ProviderConfig,
    /// Answers by key and the identity they were found with.
    cache: Mutex<HashMap<(CacheKey, String), (Instant, Auth)>>,
    /// One run at a time per provider: concurrent lookups wait and then read the cache.
    exec_lock: tokio::sync::Mutex<()>,
}

/// The configured credential provider plugins.
#[derive(Clone)]
pub struct ProviderSource {
    bin_dir: PathBuf,
    providers: Vec<Arc<Provider>>,
    limits: ExecLimits,
    /// What answers' lifetimes are measured on (tests move a manual one).
    clock: noe_core::clock::Clock,
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
    /// Plugins from an already parsed config; skipped providers are logged. A provider that
    /// asks for the pod's service account token (`tokenAttributes`) is skipped: see
    /// [`ProviderSource::with_service_account_tokens`].
    pub fn new(bin_dir: PathBuf, config: CredentialProviderConfig, limits: ExecLimits) -> Self {
        Self::with_service_account_tokens(bin_dir, config, limits, false)
    }

    /// [`ProviderSource::new`]; with `tokens` (`--credential-provider-sa-tokens`), a provider
    /// with `tokenAttributes` is kept and gets, for a pod's image, a token of the pod's service
    /// account and its annotations ([`Request::pod`]).
    pub fn with_service_account_tokens(
        bin_dir: PathBuf,
        mut config: CredentialProviderConfig,
        limits: ExecLimits,
        tokens: bool,
    ) -> Self {
        if !tokens {
            let (kept, needs): (Vec<_>, Vec<_>) = config
                .providers
                .into_iter()
                .partition(|p| p.token_attributes.is_none());
            config.providers = kept;
            config.skipped.extend(
                needs
                    .into_iter()
                    .map(|p| ProviderSkip::NeedsServiceAccountToken { name: p.name }),
            );
        }
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
            clock: noe_core::clock::Clock::system(),
        }
    }

    /// The same, answers' lifetimes measured on `clock` (tests move a manual one).
    #[must_use]
    pub fn with_clock(mut self, clock: noe_core::clock::Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Read the config file (YAML or JSON). An empty file configures no provider.
    pub async fn load(
        bin_dir: PathBuf,
        config_path: &Path,
        limits: ExecLimits,
    ) -> Result<Self, ProviderError> {
        Self::load_with(&FileReader::default(), bin_dir, config_path, limits, false).await
    }

    /// [`ProviderSource::load`], reading off the async workers with `files`' timeout.
    pub async fn load_with(
        files: &FileReader,
        bin_dir: PathBuf,
        config_path: &Path,
        limits: ExecLimits,
        service_account_tokens: bool,
    ) -> Result<Self, ProviderError> {
        let bytes = match files.read(config_path, MAX_CONFIG_BYTES).await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                return Err(ProviderError::Missing {
                    path: config_path.to_owned(),
                })
            }
            Err(crate::files::FileError::TooLarge { .. }) => {
                return Err(ProviderError::TooLarge {
                    path: config_path.to_owned(),
                    max: MAX_CONFIG_BYTES,
                })
            }
            Err(source) => {
                return Err(ProviderError::Read {
                    path: config_path.to_owned(),
                    source,
                })
            }
        };
        let text = String::from_utf8_lossy(&bytes);
        let config = parse_provider_config(&text).map_err(|source| ProviderError::Config {
            path: config_path.to_owned(),
            source,
        })?;
        Ok(Self::with_service_account_tokens(
            bin_dir,
            config,
            limits,
            service_account_tokens,
        ))
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
        self.candidates_for(Request::new(image)).await
    }

    /// [`ProviderSource::candidates`] for `request`: a provider with `tokenAttributes` runs
    /// for the pod's service account (its credentials are then only for this pod's scope,
    /// [`CredentialCandidate::in_scope`]), or without a token when the pod has none and none is
    /// required, or not at all (no account but one required, a required annotation missing, the
    /// account or its token not to be had).
    pub async fn candidates_for(&self, request: Request<'_>) -> Vec<CredentialCandidate> {
        let image = request.image;
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
            let mut identity = match &provider.config.token_attributes {
                None => Identity::node(),
                Some(attributes) => match identity(provider, attributes, request).await {
                    Some(identity) => identity,
                    None => continue,
                },
            };
            let (auth, until) = match self.lookup(provider, image, &mut identity).await {
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
            let source = match &identity.account {
                None => format!("credential-provider:{}", provider.config.name),
                Some(account) => format!(
                    "credential-provider:{} as serviceaccount {}/{}",
                    provider.config.name, account.pod.namespace, account.name
                ),
            };
            let expires = system_time(until, self.clock.now());
            for (_, credential) in matched {
                if !out
                    .iter()
                    .any(|c: &CredentialCandidate| &c.credential == credential)
                {
                    let candidate =
                        CredentialCandidate::new(&source, credential.clone()).until(expires);
                    out.push(if identity.account.is_some() {
                        candidate.in_scope()
                    } else {
                        let renewal = renewal::PluginRenewal {
                            source: self.clone(),
                            provider: Arc::clone(provider),
                            image: image.to_owned(),
                            name: source.clone(),
                        };
                        candidate.renewable(renewal.handle())
                    });
                }
            }
        }
        out
    }

    fn cached(provider: &Provider, image: &str, identity: &str, now: Instant) -> Option<Answer> {
        let cache = provider
            .cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        [
            CacheKey::Image(repository(image).to_owned()),
            CacheKey::Registry(image_host(image).to_owned()),
            CacheKey::Global,
        ]
        .into_iter()
        .find_map(|key| {
            cache
                .get(&(key, identity.to_owned()))
                .filter(|(expires, _)| *expires > now)
                .map(|(expires, auth)| (Arc::clone(auth), Some(*expires)))
        })
    }

    /// Keeps `auth` for `ttl`; the time it expires, `None` when it is not kept.
    fn store(
        provider: &Provider,
        key: CacheKey,
        identity: &str,
        ttl: Duration,
        auth: Auth,
        now: Instant,
    ) -> Option<Instant> {
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
        cache.insert((key, identity.to_owned()), (expires, auth));
        Some(expires)
    }

    async fn lookup(
        &self,
        provider: &Provider,
        image: &str,
        identity: &mut Identity<'_>,
    ) -> Result<Answer, RunError> {
        if let Some(answer) = Self::cached(provider, image, &identity.key, self.clock.now()) {
            return Ok(answer);
        }
        let _running = provider.exec_lock.lock().await;
        if let Some(answer) = Self::cached(provider, image, &identity.key, self.clock.now()) {
            return Ok(answer);
        }
        let name = provider.config.name.clone();
        let result = self.run(provider, image, identity).await;
        match result {
            Ok(response) => {
                let mut ttl = response
                    .cache_duration
                    .unwrap_or(provider.config.default_cache_duration);
                // Not past the token it was found with.
                if let Some(token) = identity.account.as_ref().and_then(|a| a.token.as_ref()) {
                    let left = token
                        .expires
                        .duration_since(SystemTime::now())
                        .unwrap_or(Duration::ZERO);
                    ttl = ttl.min(left);
                }
                let auth: Auth = Arc::new(response.auth);
                let mut until = None;
                if !ttl.is_zero() {
                    let key = match response.cache_key_type {
                        CacheKeyType::Image => CacheKey::Image(repository(image).to_owned()),
                        CacheKeyType::Registry => CacheKey::Registry(image_host(image).to_owned()),
                        CacheKeyType::Global => CacheKey::Global,
                    };
                    let now = self.clock.now();
                    until = Self::store(provider, key, &identity.key, ttl, Arc::clone(&auth), now);
                }
                Ok((auth, until))
            }
            Err(source) => {
                // Back off briefly so a broken plugin is not run for every admission.
                let _ = Self::store(
                    provider,
                    CacheKey::Image(repository(image).to_owned()),
                    &identity.key,
                    FAILURE_BACKOFF,
                    Arc::new(Vec::new()),
                    self.clock.now(),
                );
                Err(match source {
                    RunFailure::Exec(source) => RunError::Exec { name, source },
                    RunFailure::Response(source) => RunError::Response { name, source },
                    RunFailure::ServiceAccount(source) => RunError::ServiceAccount { name, source },
                })
            }
        }
    }

    async fn run(
        &self,
        provider: &Provider,
        image: &str,
        identity: &mut Identity<'_>,
    ) -> Result<ProviderResponse, RunFailure> {
        let config = &provider.config;
        if let Some(account) = &mut identity.account {
            if account.token.is_none() {
                let token = account
                    .pod
                    .accounts
                    .token(account.pod.namespace, account.name, account.audience)
                    .await
                    .map_err(RunFailure::ServiceAccount)?;
                account.token = Some(token);
            }
        }
        let body = match &identity.account {
            Some(Account {
                token: Some(token),
                annotations,
                ..
            }) => request_body_with(
                &config.api_version,
                image,
                Some((token.token.as_str(), annotations)),
            ),
            _ => request_body(&config.api_version, image),
        };
        let program = self.bin_dir.join(&config.name);
        let stdout = exec::run(&program, &config.args, &config.env, &body, self.limits)
            .await
            .map_err(RunFailure::Exec)?;
        parse_response(&stdout).map_err(RunFailure::Response)
    }
}

/// Who `provider` (with `attributes`) runs for in `request`, as the kubelet decides it
/// ([`account::plan`]); `None`: it is not run (logged).
async fn identity<'a>(
    provider: &Provider,
    attributes: &'a TokenAttributes,
    request: Request<'a>,
) -> Option<Identity<'a>> {
    let name = provider.config.name.as_str();
    let pod = request.pod;
    let account_name = pod
        .and_then(|p| p.service_account)
        .filter(|n| !n.is_empty());
    let found: Option<(PodIdentity<'a>, &'a str, Arc<ServiceAccountInfo>)> = match (
        pod,
        account_name,
    ) {
        (Some(pod), Some(account)) => match pod.accounts.get(pod.namespace, account).await {
            Ok(info) => Some((pod, account, info)),
            Err(error) => {
                tracing::warn!(provider = name, %error, "kubelet credential provider not run: the pod's service account cannot be read");
                return None;
            }
        },
        _ => None,
    };
    match account::plan(attributes, found.as_ref().map(|(_, _, info)| &**info)) {
        account::Plan::Skip(reason) => {
            tracing::debug!(
                provider = name,
                reason,
                "kubelet credential provider not run"
            );
            None
        }
        account::Plan::Anonymous => Some(Identity::node()),
        account::Plan::Account { annotations } => {
            let (pod, account_name, info) = found?;
            let token = if attributes.cache_type == TokenCacheType::Token {
                match pod
                    .accounts
                    .token(pod.namespace, account_name, &attributes.audience)
                    .await
                {
                    Ok(token) => Some(token),
                    Err(error) => {
                        tracing::warn!(provider = name, %error, "kubelet credential provider not run: no service account token");
                        return None;
                    }
                }
            } else {
                None
            };
            let key = account::cache_key(
                attributes.cache_type,
                pod.namespace,
                account_name,
                &info,
                &annotations,
                token.as_ref(),
            );
            Some(Identity {
                key,
                account: Some(Account {
                    pod,
                    name: account_name,
                    audience: &attributes.audience,
                    annotations,
                    token,
                }),
            })
        }
    }
}

/// The wall-clock time of `until` (`None`: now, the answer is good for this lookup only);
/// `now_instant` is now by the source's clock.
fn system_time(until: Option<Instant>, now_instant: Instant) -> SystemTime {
    let now = SystemTime::now();
    until
        .and_then(|until| now.checked_add(until.saturating_duration_since(now_instant)))
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
        request: Request<'a>,
    ) -> futures::future::BoxFuture<'a, Vec<CredentialCandidate>> {
        Box::pin(self.candidates_for(request))
    }
}

enum RunFailure {
    Exec(ExecError),
    Response(ResponseError),
    ServiceAccount(ServiceAccountError),
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
