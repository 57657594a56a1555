//! Registry and credential flags, shared by the server, `inspect` and `explain`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use noe_credentials::{SourcesConfig, DEFAULT_RELOAD_INTERVAL};
use noe_registry::overrides::{OverridesError, PlatformOverrides};
use noe_registry::shared::SharedConfig;

use super::parse::{non_empty, non_empty_path, read_file, ConfigError};
use crate::config::RegistrySettings;

#[derive(Clone, Debug, Args)]
#[command(next_help_heading = "Registries and credentials")]
pub struct RegistryArgs {
    /// Registry host rewrites `pattern=replacement`, comma separated, glob patterns, applied in order.
    #[arg(long, value_delimiter = ',', value_parser = parse_proxy)]
    pub registry_proxies: Vec<(String, String)>,

    /// Image patterns (kubelet `matchImages` syntax) never tried anonymously, comma separated.
    #[arg(long, value_delimiter = ',')]
    pub private_registries: Vec<String>,

    /// Directory of kubelet credential provider plugins (needs --image-credential-provider-config).
    #[arg(long, value_parser = super::parse::any_path)]
    pub image_credential_provider_bin_dir: Option<PathBuf>,

    /// kubelet CredentialProviderConfig file (needs --image-credential-provider-bin-dir).
    #[arg(long, value_parser = super::parse::any_path)]
    pub image_credential_provider_config: Option<PathBuf>,

    /// Clouds whose registries are authenticated with this pod's own workload identity: `ecr`
    /// (IRSA or EKS Pod Identity), `gcp` (GKE workload identity), `acr` (Azure workload
    /// identity); comma separated; empty: none.
    #[arg(long, value_delimiter = ',', value_parser = parse_cloud)]
    pub cloud_credentials: Vec<Option<noe_cloud::Provider>>,

    /// Run kubelet credential provider plugins that ask for a service account token
    /// (`tokenAttributes`, KEP-4412) with a token of each pod's own ServiceAccount (needs `get
    /// serviceaccounts` and `create serviceaccounts/token`); off: such plugins are skipped.
    #[arg(long)]
    pub credential_provider_sa_tokens: bool,

    /// Docker `config.json` file to read credentials from; repeatable (or comma separated); an
    /// empty value means no file. Default: noe's list (/var/lib/kubelet/config.json, $DOCKER_CONFIG/config.json,
    /// ~/.docker/config.json, /.docker/config.json, then the legacy .dockercfg files).
    #[arg(long, value_delimiter = ',')]
    pub docker_config_path: Vec<String>,

    /// containerd `config.toml` file or directory (incl. `certs.d`); repeatable (or comma
    /// separated); an empty value means none.
    #[arg(long, value_delimiter = ',', default_value = "/etc/containerd")]
    pub containerd_config_path: Vec<String>,

    /// `host:port` registries reached over plain HTTP, comma separated.
    #[arg(long, value_delimiter = ',')]
    pub insecure_registries: Vec<String>,

    /// Extra PEM CA bundle trusted for registries.
    #[arg(long, value_parser = super::parse::any_path)]
    pub registry_ca_file: Option<PathBuf>,

    /// Timeout of one registry request (Go duration).
    #[arg(long, default_value = "5s", value_parser = super::parse::positive_duration)]
    pub registry_timeout: Duration,

    /// CIDRs exempted from the metadata-address guard, comma separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_cidr)]
    pub allow_registry_cidrs: Vec<Option<ipnet::IpNet>>,

    /// Platform cache TTL for tags (Go duration).
    #[arg(long, default_value = "1h", value_parser = super::parse::duration)]
    pub cache_ttl: Duration,

    /// YAML list of `{images: [pattern...], platforms: [os/arch[/variant]... | "*"]}`: images
    /// whose platforms are stated here instead of read from their registry (kubelet `matchImages`
    /// patterns, first match wins); read again when it changes.
    #[arg(long, value_parser = super::parse::any_path)]
    pub platform_overrides: Option<PathBuf>,

    /// Maximum number of entries of the platform cache.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub cache_max_entries: u64,

    /// Requests per second to one registry host (client-side rate limit; 0: unlimited).
    #[arg(long, default_value_t = 50.0, value_parser = parse_qps)]
    pub registry_qps: f64,

    /// Requests one registry host may get at once before --registry-qps applies.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub registry_burst: u32,

    /// Distinct uncached images one admission looks up in registries; the others are answered
    /// as lookup errors (the warning says so).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_images_per_admission: u32,

    /// Registry lookups in flight at once across all admissions (each holds at most a few
    /// connections).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_concurrent_lookups: u32,

    /// Registry lookups in flight at once for one admission: its share of
    /// --max-concurrent-lookups, so a pod with many images leaves room for other pods.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_concurrent_lookups_per_admission: u32,

    /// Shared cache of what replicas learned: `redis://host:6379/0` or `rediss://` (Valkey or
    /// Redis); empty: none. Its password comes from --shared-cache-password-file or
    /// NOE_SHARED_CACHE_PASSWORD, never from the URL.
    #[arg(long, default_value = "")]
    pub shared_cache: String,

    /// File holding the shared cache's password (else NOE_SHARED_CACHE_PASSWORD, if set).
    #[arg(long, value_parser = super::parse::any_path)]
    pub shared_cache_password_file: Option<PathBuf>,

    /// File holding the install's secret key (at least 16 bytes) under which shared cache keys
    /// are HMACs (else NOE_SHARED_CACHE_KEY); the same on every replica.
    #[arg(long, value_parser = super::parse::any_path)]
    pub shared_cache_key_file: Option<PathBuf>,

    /// Extra PEM CA bundle trusted for a rediss:// shared cache.
    #[arg(long, value_parser = super::parse::any_path)]
    pub shared_cache_ca_file: Option<PathBuf>,

    /// Bound on each shared cache read and write (Go duration); past it the lookup goes on
    /// without the shared cache.
    #[arg(long, default_value = "10ms", value_parser = super::parse::positive_duration)]
    pub shared_cache_timeout: Duration,

    /// Compressed layer bytes one platform's verification reads at most (`64Mi`, `128MiB`,
    /// or bytes); past it the platform is `unverifiable: budget`.
    #[arg(long, default_value = "64Mi", value_parser = super::parse::byte_size)]
    pub verify_max_bytes: u64,

    /// Platforms verified at once in this process (each holds a thread and up to about 2 MiB
    /// of buffers, plus a zstd layer's window).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub verify_concurrency: u32,
}

/// The environment variable holding the shared cache's password (no flag: a flag's value is
/// visible in `ps`).
pub const SHARED_CACHE_PASSWORD_ENV: &str = "NOE_SHARED_CACHE_PASSWORD";
/// The environment variable holding the shared cache's HMAC key.
pub const SHARED_CACHE_KEY_ENV: &str = "NOE_SHARED_CACHE_KEY";

/// A rate: a finite number of requests per second, 0 or more.
fn parse_qps(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(qps) if qps.is_finite() && qps >= 0.0 => Ok(qps),
        _ => Err(format!(
            "invalid rate {text:?} (expected requests per second, e.g. 20 or 0.5; 0: unlimited)"
        )),
    }
}

/// `docker.io=proxy.corp`; an empty item (from `--registry-proxies=`) is allowed and ignored.
fn parse_cloud(text: &str) -> Result<Option<noe_cloud::Provider>, String> {
    match text.trim() {
        "" => Ok(None),
        name => name.parse().map(Some),
    }
}

fn parse_proxy(text: &str) -> Result<(String, String), String> {
    if text.trim().is_empty() {
        return Ok((String::new(), String::new()));
    }
    match text.split_once('=') {
        Some((from, to)) if !from.trim().is_empty() && !to.trim().is_empty() => {
            Ok((from.trim().to_owned(), to.trim().to_owned()))
        }
        _ => Err(format!(
            "invalid registry proxy {text:?} (expected registry=proxy, e.g. docker.io=proxy.corp)"
        )),
    }
}

/// A CIDR or a single address; an empty item is allowed and ignored.
fn parse_cidr(text: &str) -> Result<Option<ipnet::IpNet>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse::<ipnet::IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map(Some)
        .map_err(|_| format!("invalid CIDR {text:?}"))
}

impl RegistryArgs {
    /// `--cloud-credentials`, each provider once, in flag order.
    pub fn cloud(&self) -> Vec<noe_cloud::Provider> {
        let mut providers: Vec<noe_cloud::Provider> = Vec::new();
        for provider in self.cloud_credentials.iter().flatten() {
            if !providers.contains(provider) {
                providers.push(*provider);
            }
        }
        providers
    }

    pub fn proxies(&self) -> Vec<(String, String)> {
        self.registry_proxies
            .iter()
            .filter(|(from, _)| !from.is_empty())
            .cloned()
            .collect()
    }

    pub fn allow_cidrs(&self) -> Vec<ipnet::IpNet> {
        self.allow_registry_cidrs
            .iter()
            .flatten()
            .copied()
            .collect()
    }

    pub fn docker_config_paths(&self) -> Vec<PathBuf> {
        non_empty(&self.docker_config_path)
            .into_iter()
            .map(PathBuf::from)
            .collect()
    }

    /// `None` when `--docker-config-path` was not given (noe's candidate list applies);
    /// `Some(empty)` for `--docker-config-path=` (the chart's "no files").
    pub fn docker_config_paths_setting(&self) -> Option<Vec<PathBuf>> {
        (!self.docker_config_path.is_empty()).then(|| self.docker_config_paths())
    }

    pub fn containerd_config_paths(&self) -> Vec<PathBuf> {
        non_empty(&self.containerd_config_path)
            .into_iter()
            .map(PathBuf::from)
            .collect()
    }

    /// The typed configuration of the resolver and the credential sources (reads
    /// `--registry-ca-file`); refuses a credential provider flag without its pair.
    pub fn settings(&self) -> Result<RegistrySettings, ConfigError> {
        let provider_bin_dir = non_empty_path(&self.image_credential_provider_bin_dir);
        let provider_config = non_empty_path(&self.image_credential_provider_config);
        match (provider_bin_dir, provider_config) {
            (Some(_), None) => {
                return Err(ConfigError::Contradiction(
                    "--image-credential-provider-bin-dir needs --image-credential-provider-config"
                        .into(),
                ))
            }
            (None, Some(_)) => {
                return Err(ConfigError::Contradiction(
                    "--image-credential-provider-config needs --image-credential-provider-bin-dir"
                        .into(),
                ))
            }
            _ => {}
        }
        let extra_ca_pem = read_file("registry-ca-file", &self.registry_ca_file)?;
        let platform_overrides = match non_empty_path(&self.platform_overrides) {
            Some(path) => Some(std::sync::Arc::new(
                PlatformOverrides::load(path, DEFAULT_RELOAD_INTERVAL).map_err(|error| {
                    ConfigError::Invalid {
                        flag: "platform-overrides",
                        path: path.clone(),
                        reason: match error {
                            OverridesError::Invalid { reason, .. } => reason.to_string(),
                            OverridesError::Missing { .. } => "no such file".to_owned(),
                            OverridesError::Read { source, .. } => source.to_string(),
                            other => other.to_string(),
                        },
                    }
                })?,
            )),
            None => None,
        };
        for pattern in &self.private_registries {
            noe_credentials::matching::check_pattern(pattern).map_err(|reason| {
                ConfigError::Contradiction(format!("--private-registries: {reason}"))
            })?;
        }
        let shared_cache = self.shared_cache_settings()?;
        let resolver = noe_registry::Config {
            proxies: self.proxies(),
            insecure_registries: non_empty(&self.insecure_registries),
            extra_ca_pem,
            request_timeout: self.registry_timeout,
            allow_cidrs: self.allow_cidrs(),
            cache_ttl: self.cache_ttl,
            cache_max_entries: self.cache_max_entries,
            registry_qps: self.registry_qps,
            registry_burst: self.registry_burst,
            shared_cache,
            private_registries: non_empty(&self.private_registries),
            hosts: None,
            platform_overrides,
            // The sources' own, set where they are built.
            credentials_generation: None,
            clock: noe_core::clock::Clock::system(),
            verification: noe_registry::verify::VerifyConfig {
                max_bytes: self.verify_max_bytes,
                concurrency: usize::try_from(self.verify_concurrency).unwrap_or(1),
                ..noe_registry::verify::VerifyConfig::default()
            },
        };
        let sources = SourcesConfig {
            docker_config_paths: self.docker_config_paths_setting(),
            containerd_config_paths: Some(self.containerd_config_paths()),
            provider_bin_dir: provider_bin_dir.cloned(),
            provider_config: provider_config.cloned(),
            service_account_tokens: self.credential_provider_sa_tokens,
            ..Default::default()
        };
        let lookups = noe_webhook::resolve::LookupLimits {
            max_images: usize::try_from(self.max_images_per_admission).unwrap_or(usize::MAX),
            max_concurrent: usize::try_from(self.max_concurrent_lookups).unwrap_or(usize::MAX),
            max_concurrent_per_admission: usize::try_from(
                self.max_concurrent_lookups_per_admission,
            )
            .unwrap_or(usize::MAX),
        };
        Ok(RegistrySettings {
            resolver,
            sources,
            cloud: self.cloud(),
            lookups,
        })
    }
}

impl RegistryArgs {
    /// The shared cache's configuration (reads its password, key and CA files); `None` without
    /// `--shared-cache`.
    fn shared_cache_settings(&self) -> Result<Option<SharedConfig>, ConfigError> {
        let url = self.shared_cache.trim();
        if url.is_empty() {
            return Ok(None);
        }
        let password = match non_empty_path(&self.shared_cache_password_file) {
            Some(path) => Some(
                noe_registry::shared::read_password_file(path)
                    .map_err(|error| key_file_error("shared-cache-password-file", path, error))?,
            ),
            None => std::env::var(SHARED_CACHE_PASSWORD_ENV)
                .ok()
                .filter(|p| !p.is_empty()),
        };
        let (key, key_file_mode) = match non_empty_path(&self.shared_cache_key_file) {
            Some(path) => {
                let read = noe_registry::shared::read_key_file(path)
                    .map_err(|error| key_file_error("shared-cache-key-file", path, error))?;
                (read.key, read.mode)
            }
            None => (
                std::env::var_os(SHARED_CACHE_KEY_ENV)
                    .map(std::ffi::OsString::into_encoded_bytes)
                    .unwrap_or_default(),
                None,
            ),
        };
        if key.len() < noe_registry::shared::MIN_KEY_BYTES {
            return Err(ConfigError::Contradiction(format!(
                "--shared-cache needs the install's key of at least {} bytes, the same on every replica: --shared-cache-key-file or {SHARED_CACHE_KEY_ENV}",
                noe_registry::shared::MIN_KEY_BYTES
            )));
        }
        let ca_pem = read_file("shared-cache-ca-file", &self.shared_cache_ca_file)?;
        Ok(Some(SharedConfig {
            url: url.to_owned(),
            password,
            ca_pem,
            key,
            key_file_mode,
            timeout: self.shared_cache_timeout,
        }))
    }
}

/// A shared-cache key or password file that cannot be used, naming the flag.
fn key_file_error(
    flag: &'static str,
    path: &std::path::Path,
    error: noe_registry::shared::KeyFileError,
) -> ConfigError {
    ConfigError::Invalid {
        flag,
        path: path.to_path_buf(),
        reason: match error {
            noe_registry::shared::KeyFileError::Read { source, .. } => source.to_string(),
            other => other.to_string(),
        },
    }
}
