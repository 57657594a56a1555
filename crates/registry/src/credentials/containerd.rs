//! containerd configuration (`--containerd-config-path`, files or directories): CRI registry
//! `auth` sections (config version 1, 2 and containerd 2.x), `imports` drop-ins, and the
//! `config_path` directories holding `hosts.toml` files (see [`hosts`]).

pub mod hosts;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use hosts::{
    default_server, host_dir, load_hosts, Capabilities, Endpoint, HostsConfig, HostsError,
};

use super::docker_config::entry_credential;
use super::matching::{config_key_matches, image_host, normalize_config_key};
use super::reload::{Reloading, DEFAULT_RELOAD_INTERVAL};
use crate::{Credential, CredentialCandidate};

/// The CRI plugin sections that carry `registry` settings: containerd 1.x config version 2,
/// containerd 2.x (version 3), and config version 1.
const CRI_PLUGINS: &[&str] = &[
    "io.containerd.grpc.v1.cri",
    "io.containerd.cri.v1.images",
    "cri",
];
/// Bound on `imports` nesting.
const MAX_IMPORT_DEPTH: usize = 4;
/// Largest file read.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// Why a containerd config file cannot be used. Never carries its content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("containerd config is not valid TOML")]
    Malformed,
}

/// What one containerd config file says about registries.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ContainerdConfig {
    /// `(registry host key, credential)` from `registry.configs."HOST".auth`.
    pub auths: Vec<(String, Credential)>,
    /// Hosts whose `auth` table is present but unusable.
    pub skipped: Vec<String>,
    /// `imports` as written.
    pub imports: Vec<String>,
    /// `registry.config_path`, split on `:`.
    pub config_path: Vec<PathBuf>,
    /// Deprecated `registry.mirrors."HOST".endpoint` lists (used when no `config_path` applies).
    pub mirrors: Vec<(String, Vec<String>)>,
}

impl std::fmt::Debug for ContainerdConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerdConfig")
            .field(
                "auths",
                &self
                    .auths
                    .iter()
                    .map(|(k, _)| k.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("skipped", &self.skipped)
            .field("imports", &self.imports)
            .field("config_path", &self.config_path)
            .field("mirrors", &self.mirrors)
            .finish()
    }
}

/// Parse a containerd `config.toml`. An empty file is an empty config.
pub fn parse_containerd_config(text: &str) -> Result<ContainerdConfig, Error> {
    let value: toml::Table = toml::from_str(text).map_err(|_| Error::Malformed)?;
    let mut config = ContainerdConfig::default();
    if let Some(imports) = value.get("imports").and_then(toml::Value::as_array) {
        config.imports = imports
            .iter()
            .filter_map(toml::Value::as_str)
            .map(str::to_owned)
            .collect();
    }
    let plugins = value.get("plugins").and_then(toml::Value::as_table);
    for plugin in CRI_PLUGINS {
        let Some(registry) = plugins
            .and_then(|p| p.get(*plugin))
            .and_then(|p| p.get("registry"))
            .and_then(toml::Value::as_table)
        else {
            continue;
        };
        if let Some(path) = registry.get("config_path").and_then(toml::Value::as_str) {
            config.config_path = std::env::split_paths(path)
                .filter(|p| !p.as_os_str().is_empty())
                .collect();
        }
        if let Some(mirrors) = registry.get("mirrors").and_then(toml::Value::as_table) {
            for (host, mirror) in mirrors {
                let endpoints: Vec<String> = mirror
                    .get("endpoint")
                    .and_then(toml::Value::as_array)
                    .map(|list| {
                        list.iter()
                            .filter_map(toml::Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                config.mirrors.push((host.clone(), endpoints));
            }
        }
        let Some(configs) = registry.get("configs").and_then(toml::Value::as_table) else {
            continue;
        };
        for (host, host_config) in configs {
            let Some(auth) = host_config.get("auth") else {
                continue;
            };
            let credential = serde_json::to_value(auth)
                .map_err(|_| ())
                .and_then(entry_credential);
            match credential {
                Ok(Some(credential)) => config.auths.push((host.clone(), credential)),
                Ok(None) => {}
                Err(()) => config.skipped.push(host.clone()),
            }
        }
    }
    Ok(config)
}

fn read_small(path: &Path) -> std::io::Result<Option<String>> {
    use std::io::Read;
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::other("file too large"));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| std::io::Error::other("not UTF-8"))
}

/// Expand one `imports` entry (relative to `dir`; `*`, `?`, `[...]` allowed in the file name).
fn expand_import(dir: &Path, pattern: &str) -> Vec<PathBuf> {
    let path = dir.join(pattern);
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    if !name.contains(['*', '?', '[']) {
        return vec![path];
    }
    let Some(parent) = path.parent() else {
        return Vec::new();
    };
    let mut matches: Vec<PathBuf> = std::fs::read_dir(parent)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|file| crate::glob::matches(name, file))
                })
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    matches.sort();
    matches
}

/// Everything read from the configured paths.
#[derive(Clone, Default)]
struct Loaded {
    /// `(source, host key, credential)` in order.
    auths: Vec<(String, String, Credential)>,
    /// `certs.d`-style roots, in order.
    host_roots: Vec<PathBuf>,
    /// Deprecated CRI mirrors, later files overriding earlier ones per host.
    mirrors: BTreeMap<String, Vec<String>>,
}

/// One top-level path: the main file, then its imports (later files override earlier ones per
/// host, as containerd merges them).
fn load_one(path: &Path, loaded: &mut Loaded) {
    let (file, default_root) = if path.is_dir() {
        (path.join("config.toml"), Some(path.join("certs.d")))
    } else {
        (path.to_owned(), None)
    };
    let mut auths: BTreeMap<String, (String, String, Credential)> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut config_path: Vec<PathBuf> = Vec::new();
    let mut queue: Vec<(PathBuf, usize)> = vec![(file, 0)];
    let mut seen: Vec<PathBuf> = Vec::new();
    while let Some((file, depth)) = queue.pop() {
        if seen.contains(&file) || depth > MAX_IMPORT_DEPTH {
            continue;
        }
        seen.push(file.clone());
        let text = match read_small(&file) {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            Err(error) => {
                tracing::warn!(path = %file.display(), %error, "skipping containerd config file");
                continue;
            }
        };
        let config = match parse_containerd_config(&text) {
            Ok(config) => config,
            Err(error) => {
                tracing::warn!(path = %file.display(), %error, "skipping containerd config file");
                continue;
            }
        };
        if !config.skipped.is_empty() {
            tracing::warn!(path = %file.display(), hosts = ?config.skipped, "skipping unusable containerd registry auth entries");
        }
        let source = format!("containerd:{}", file.display());
        for (host, credential) in config.auths {
            let key = normalize_config_key(&host);
            if !order.contains(&key) {
                order.push(key.clone());
            }
            auths.insert(key, (source.clone(), host, credential));
        }
        if !config.config_path.is_empty() {
            config_path = config.config_path;
        }
        for (host, endpoints) in config.mirrors {
            loaded.mirrors.insert(host, endpoints);
        }
        let dir = file.parent().map(Path::to_owned).unwrap_or_default();
        // Imports are processed in order: push reversed onto the stack.
        let imports: Vec<PathBuf> = config
            .imports
            .iter()
            .flat_map(|pattern| expand_import(&dir, pattern))
            .collect();
        for import in imports.into_iter().rev() {
            queue.push((import, depth + 1));
        }
    }
    for key in order {
        if let Some(entry) = auths.remove(&key) {
            loaded.auths.push(entry);
        }
    }
    if config_path.is_empty() {
        config_path.extend(default_root.filter(|root| root.is_dir()));
    }
    for root in config_path {
        if !loaded.host_roots.contains(&root) {
            loaded.host_roots.push(root);
        }
    }
}

/// Credentials and host configuration from containerd configuration files or directories.
#[derive(Clone)]
pub struct ContainerdSource {
    paths: Arc<Vec<PathBuf>>,
    loaded: Arc<Reloading<Loaded>>,
}

impl std::fmt::Debug for ContainerdSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerdSource")
            .field("paths", &self.paths)
            .finish_non_exhaustive()
    }
}

impl ContainerdSource {
    /// `paths` are `config.toml` files or directories holding `config.toml` (and `certs.d`).
    /// The files are read again at most every 10 s.
    pub fn new(paths: Vec<PathBuf>) -> Self {
        Self::with_reload_interval(paths, DEFAULT_RELOAD_INTERVAL)
    }

    pub fn with_reload_interval(paths: Vec<PathBuf>, every: Duration) -> Self {
        Self {
            paths: Arc::new(paths),
            loaded: Arc::new(Reloading::new(every)),
        }
    }

    async fn loaded(&self) -> Arc<Loaded> {
        let paths = Arc::clone(&self.paths);
        self.loaded
            .get(|| async move {
                tokio::task::spawn_blocking(move || {
                    let mut loaded = Loaded::default();
                    for path in paths.iter() {
                        load_one(path, &mut loaded);
                    }
                    loaded
                })
                .await
                .unwrap_or_default()
            })
            .await
    }

    /// Credentials whose registry host matches `image`'s, named `containerd:FILE`.
    pub async fn candidates(&self, image: &str) -> Vec<CredentialCandidate> {
        let loaded = self.loaded().await;
        let mut out: Vec<CredentialCandidate> = Vec::new();
        for (source, host, credential) in &loaded.auths {
            // CRI `configs` keys are registry hosts: compare hosts, never paths.
            if config_key_matches(host, image_host(image))
                && !out.iter().any(|c| &c.credential == credential)
            {
                out.push(CredentialCandidate::new(source, credential.clone()));
            }
        }
        out
    }

    /// The `certs.d`-style directories in use.
    pub async fn host_roots(&self) -> Vec<PathBuf> {
        self.loaded().await.host_roots.clone()
    }

    /// The host configuration of `registry` (`docker.io`, `127.0.0.1:5000`), if a `hosts.toml`
    /// (or `_default`) applies; unreadable files are logged and ignored.
    ///
    /// Without any `config_path` directory, the deprecated CRI `registry.mirrors` apply instead
    /// (the registry's own entry, else `"*"`): their endpoints in order, then the registry's
    /// default server unless listed.
    pub async fn hosts(&self, registry: &str) -> Option<HostsConfig> {
        let loaded = self.loaded().await;
        if loaded.host_roots.is_empty() {
            let endpoints = loaded
                .mirrors
                .get(registry)
                .or_else(|| loaded.mirrors.get("*"))?;
            return match HostsConfig::from_mirror_endpoints(registry, endpoints) {
                Ok(hosts) => Some(hosts),
                Err(error) => {
                    tracing::warn!(registry, %error, "ignoring containerd registry mirrors");
                    None
                }
            };
        }
        let roots = loaded.host_roots.clone();
        let registry_owned = registry.to_owned();
        let result = tokio::task::spawn_blocking(move || load_hosts(&roots, &registry_owned))
            .await
            .ok()?;
        match result {
            Ok(hosts) => hosts,
            Err(error) => {
                tracing::warn!(registry, %error, "ignoring containerd hosts.toml");
                None
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
