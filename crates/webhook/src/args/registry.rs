//! Registry and credential flags, shared by the server, `inspect` and `explain`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::duration;

#[derive(Clone, Debug, Args)]
pub struct RegistryArgs {
    /// Registry host rewrites `pattern=replacement`, comma separated, glob patterns, applied in order.
    #[arg(long, env = "NOE_REGISTRY_PROXIES", value_delimiter = ',', value_parser = parse_proxy)]
    pub registry_proxies: Vec<(String, String)>,

    /// Image patterns (kubelet `matchImages` syntax) never tried anonymously, comma separated.
    #[arg(long, env = "NOE_PRIVATE_REGISTRIES", value_delimiter = ',')]
    pub private_registries: Vec<String>,

    /// Directory of kubelet credential provider plugins (needs --image-credential-provider-config).
    #[arg(long, env = "NOE_IMAGE_CREDENTIAL_PROVIDER_BIN_DIR", value_parser = super::any_path)]
    pub image_credential_provider_bin_dir: Option<PathBuf>,

    /// kubelet CredentialProviderConfig file (needs --image-credential-provider-bin-dir).
    #[arg(long, env = "NOE_IMAGE_CREDENTIAL_PROVIDER_CONFIG", value_parser = super::any_path)]
    pub image_credential_provider_config: Option<PathBuf>,

    /// Docker `config.json` file to read credentials from; repeatable (or comma separated); an
    /// empty value means no file. Default: noe's list (/var/lib/kubelet/config.json, $DOCKER_CONFIG/config.json,
    /// ~/.docker/config.json, /.docker/config.json, then the legacy .dockercfg files).
    #[arg(long, env = "NOE_DOCKER_CONFIG_PATH", value_delimiter = ',')]
    pub docker_config_path: Vec<String>,

    /// containerd `config.toml` file or directory (incl. `certs.d`); repeatable (or comma
    /// separated); an empty value means none.
    #[arg(
        long,
        env = "NOE_CONTAINERD_CONFIG_PATH",
        value_delimiter = ',',
        default_value = "/etc/containerd"
    )]
    pub containerd_config_path: Vec<String>,

    /// `host:port` registries reached over plain HTTP, comma separated.
    #[arg(long, env = "NOE_INSECURE_REGISTRIES", value_delimiter = ',')]
    pub insecure_registries: Vec<String>,

    /// Extra PEM CA bundle trusted for registries.
    #[arg(long, env = "NOE_REGISTRY_CA_FILE", value_parser = super::any_path)]
    pub registry_ca_file: Option<PathBuf>,

    /// Timeout of one registry request (Go duration).
    #[arg(long, env = "NOE_REGISTRY_TIMEOUT", default_value = "5s", value_parser = duration::parse)]
    pub registry_timeout: Duration,

    /// CIDRs exempted from the metadata-address guard, comma separated.
    #[arg(long, env = "NOE_ALLOW_REGISTRY_CIDRS", value_delimiter = ',', value_parser = parse_cidr)]
    pub allow_registry_cidrs: Vec<Option<ipnet::IpNet>>,

    /// Platform cache TTL for tags (Go duration).
    #[arg(long, env = "NOE_CACHE_TTL", default_value = "1h", value_parser = duration::parse)]
    pub cache_ttl: Duration,

    /// Maximum number of entries of the platform cache.
    #[arg(long, env = "NOE_CACHE_MAX_ENTRIES", default_value_t = 100_000)]
    pub cache_max_entries: u64,
}

/// `docker.io=proxy.corp`; an empty item (from `--registry-proxies=`) is allowed and ignored.
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

/// Non-empty, trimmed items of a comma list.
pub fn non_empty(items: &[String]) -> Vec<String> {
    items
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn non_empty_path(path: &Option<PathBuf>) -> Option<&PathBuf> {
    path.as_ref().filter(|p| !p.as_os_str().is_empty())
}

impl RegistryArgs {
    /// The kubelet credential provider `(bin dir, config file)`, when both are set.
    pub fn credential_provider(&self) -> Option<(PathBuf, PathBuf)> {
        Some((
            non_empty_path(&self.image_credential_provider_bin_dir)?.clone(),
            non_empty_path(&self.image_credential_provider_config)?.clone(),
        ))
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

    /// The resolver configuration (reads `--registry-ca-file`).
    pub fn resolver_config(&self) -> Result<noe_registry::Config, String> {
        let extra_ca_pem = match non_empty_path(&self.registry_ca_file) {
            Some(path) => Some(std::fs::read(path).map_err(|error| {
                format!("cannot read --registry-ca-file {}: {error}", path.display())
            })?),
            None => None,
        };
        Ok(noe_registry::Config {
            proxies: self.proxies(),
            insecure_registries: non_empty(&self.insecure_registries),
            extra_ca_pem,
            request_timeout: self.registry_timeout,
            allow_cidrs: self.allow_cidrs(),
            cache_ttl: self.cache_ttl,
            cache_max_entries: self.cache_max_entries,
            private_registries: non_empty(&self.private_registries),
            hosts: None,
        })
    }

    /// Registry hosts named by the flags (allowed as `registry` metric label values).
    pub fn configured_hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = non_empty(&self.insecure_registries);
        for (from, to) in self.proxies() {
            hosts.push(to);
            if !from.contains(['*', '?', '[']) {
                hosts.push(from);
            }
        }
        for pattern in non_empty(&self.private_registries) {
            let host = pattern.split('/').next().unwrap_or_default();
            if !host.is_empty() && !host.contains(['*', '?', '[']) {
                hosts.push(host.to_owned());
            }
        }
        hosts.sort();
        hosts.dedup();
        hosts
    }

    /// The resolver (metrics registered on `metrics`) and the node-level credential sources.
    pub async fn build(
        &self,
        metrics: &prometheus::Registry,
    ) -> Result<(noe_registry::Resolver, noe_registry::credentials::Sources), String> {
        let (provider_bin_dir, provider_config) = match self.credential_provider() {
            Some((bin, config)) => (Some(bin), Some(config)),
            None => (None, None),
        };
        let sources =
            noe_registry::credentials::Sources::new(noe_registry::credentials::SourcesConfig {
                docker_config_paths: self.docker_config_paths_setting(),
                containerd_config_paths: Some(self.containerd_config_paths()),
                provider_bin_dir,
                provider_config,
                ..Default::default()
            })
            .await
            .map_err(|error| error.to_string())?;
        // containerd's certs.d hosts.toml mirrors apply to the registry after proxies; every
        // source's hosts are `registry` label values.
        let config = noe_registry::Config {
            hosts: Some(std::sync::Arc::new(sources.clone())),
            ..self.resolver_config()?
        };
        let resolver =
            noe_registry::Resolver::new(config, metrics).map_err(|error| error.to_string())?;
        Ok((resolver, sources))
    }

    /// Contradictions clap cannot see.
    pub fn validate(&self) -> Result<(), String> {
        match (
            non_empty_path(&self.image_credential_provider_bin_dir),
            non_empty_path(&self.image_credential_provider_config),
        ) {
            (Some(_), None) => Err(
                "--image-credential-provider-bin-dir needs --image-credential-provider-config"
                    .into(),
            ),
            (None, Some(_)) => Err(
                "--image-credential-provider-config needs --image-credential-provider-bin-dir"
                    .into(),
            ),
            _ => Ok::<(), String>(()),
        }?;
        if self.cache_max_entries == 0 {
            return Err("--cache-max-entries must be at least 1".into());
        }
        if self.registry_timeout.is_zero() {
            return Err("--registry-timeout must be above zero".into());
        }
        Ok(())
    }
}
