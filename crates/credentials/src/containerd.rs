//! containerd configuration (`--containerd-config-path`, files or directories): CRI registry
//! `auth` sections (config version 1, 2 and containerd 2.x), `imports` drop-ins, and where the
//! host configuration is ([`ContainerdSource::host_source`]: the `config_path` directories
//! holding `hosts.toml` files, or the deprecated CRI mirrors), which the registry reads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::docker_config::entry_credential;
use super::generation::Generation;
use super::matching::{config_key_matches, image_host, normalize_config_key};
use super::reload::{Reloading, DEFAULT_RELOAD_INTERVAL};
use crate::files::FileReader;
use crate::source::FileSource;
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
pub enum ContainerdError {
    #[error("containerd config is not valid TOML")]
    Malformed,
}

/// What one containerd config file says about registries.
#[derive(Clone, Default, PartialEq, Eq, derive_more::Debug)]
pub struct ContainerdConfig {
    /// `(registry host key, credential)` from `registry.configs."HOST".auth`.
    #[debug("{:?}", auths.iter().map(|(key, _)| key).collect::<Vec<_>>())]
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

/// Parse a containerd `config.toml`. An empty file is an empty config.
pub fn parse_containerd_config(text: &str) -> Result<ContainerdConfig, ContainerdError> {
    let value: toml::Table = toml::from_str(text).map_err(|_| ContainerdError::Malformed)?;
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

/// A config file's text (runs inside [`FileReader::run`]); `Ok(None)` when missing.
fn read_small(path: &Path) -> Result<Option<String>, crate::files::FileError> {
    let Some(bytes) = crate::files::read_blocking(path, MAX_FILE_BYTES)? else {
        return Ok(None);
    };
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| crate::files::FileError::Io {
            path: path.to_owned(),
            source: Arc::new(std::io::Error::other("not UTF-8")),
        })
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
#[derive(Clone, Default, PartialEq)]
struct Loaded {
    /// `(source, host key, credential)` in order.
    auths: Vec<(String, String, Credential)>,
    /// `certs.d`-style roots, in order.
    host_roots: Vec<PathBuf>,
    /// Deprecated CRI mirrors, later files overriding earlier ones per host.
    mirrors: BTreeMap<String, Vec<String>>,
    /// Registry hosts with a directory under a `certs.d`-style root (`_port` read as `:port`).
    host_dirs: Vec<String>,
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
            loaded.host_dirs.extend(host_dir_names(&root));
            loaded.host_roots.push(root);
        }
    }
}

/// Bound on the host directories listed per `certs.d` root.
const MAX_HOST_DIRS: usize = 1024;

/// The registry hosts of a `certs.d` root's directories (`_default` excluded, `host_port` as
/// `host:port`).
fn host_dir_names(root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|name| name != "_default")
        .map(|name| match name.rsplit_once('_') {
            Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
                format!("{host}:{port}")
            }
            _ => name,
        })
        .take(MAX_HOST_DIRS)
        .collect()
}

/// Where containerd's configuration says a registry's host configuration comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostSource {
    /// `certs.d`-style directories (`config_path`, or `certs.d` beside a configuration
    /// directory), in order: the registry's `hosts.toml` (or `_default`) is read from them.
    Dirs(Vec<PathBuf>),
    /// No such directory: the deprecated CRI `registry.mirrors` endpoints of the registry (its
    /// own entry, else `"*"`), in order.
    Mirrors(Vec<String>),
    /// Neither: the registry's default server only.
    None,
}

/// Credentials, and where the host configuration is, from containerd configuration files or
/// directories.
///
/// Every file is read off the async workers with a timeout ([`FileReader`]) and reloaded in the
/// background: lookups use the last good configuration and never wait for a file, except the
/// very first time (at most twice the read timeout).
#[derive(Clone, derive_more::Debug)]
#[debug("ContainerdSource {{ paths: {paths:?}, .. }}")]
pub struct ContainerdSource {
    paths: Arc<Vec<PathBuf>>,
    files: FileReader,
    every: Duration,
    loaded: Arc<Reloading<Loaded>>,
    /// Bumped when a reload finds the configuration changed.
    generation: Generation,
}

impl ContainerdSource {
    /// `paths` are `config.toml` files or directories holding `config.toml` (and `certs.d`).
    /// The files are read again at most every 10 s.
    pub fn new(paths: Vec<PathBuf>) -> Self {
        Self::with_reload_interval(paths, DEFAULT_RELOAD_INTERVAL)
    }

    pub fn with_reload_interval(paths: Vec<PathBuf>, every: Duration) -> Self {
        Self::with_options(paths, every, FileReader::default())
    }

    /// Reads with `files` (its timeout bounds each read), reloading every `every`.
    pub fn with_options(paths: Vec<PathBuf>, every: Duration, files: FileReader) -> Self {
        let first_wait = files.timeout().saturating_mul(2);
        Self {
            paths: Arc::new(paths),
            loaded: Arc::new(Reloading::new(every, first_wait)),
            files,
            every,
            generation: Generation::default(),
        }
    }

    /// Counts its changes in `generation` (shared with the other sources).
    #[must_use]
    pub fn with_generation(mut self, generation: Generation) -> Self {
        self.generation = generation;
        self
    }

    async fn loaded(&self) -> Arc<Loaded> {
        let paths = Arc::clone(&self.paths);
        let files = self.files.clone();
        let generation = self.generation.clone();
        self.loaded
            .get(|previous| async move {
                let label = paths
                    .first()
                    .cloned()
                    .unwrap_or_else(|| PathBuf::from("containerd configuration"));
                let read = Arc::clone(&paths);
                let result = files
                    .run(&label, move || {
                        let mut loaded = Loaded::default();
                        for path in read.iter() {
                            load_one(path, &mut loaded);
                        }
                        loaded
                    })
                    .await;
                match result {
                    Ok(loaded) => {
                        generation.note(previous.as_deref(), &loaded);
                        loaded
                    }
                    Err(error) => {
                        tracing::warn!(%error, "containerd configuration not read again; keeping what was read before");
                        previous.map(|p| (*p).clone()).unwrap_or_default()
                    }
                }
            })
            .await
    }

    /// Reads the configuration now (bounded by twice the read timeout), so the first lookup
    /// finds it loaded.
    pub async fn warm(&self) {
        self.loaded().await;
    }

    /// The `certs.d`-style directories in use.
    pub async fn host_roots(&self) -> Vec<PathBuf> {
        self.loaded().await.host_roots.clone()
    }

    /// Where the host configuration of `registry` (`docker.io`, `127.0.0.1:5000`) comes from,
    /// per the last good load: the `certs.d`-style directories when any is configured (or
    /// present), else the deprecated CRI `registry.mirrors` (the registry's own entry, else
    /// `"*"`).
    pub async fn host_source(&self, registry: &str) -> HostSource {
        let loaded = self.loaded().await;
        if !loaded.host_roots.is_empty() {
            return HostSource::Dirs(loaded.host_roots.clone());
        }
        match loaded
            .mirrors
            .get(registry)
            .or_else(|| loaded.mirrors.get("*"))
        {
            Some(endpoints) => HostSource::Mirrors(endpoints.clone()),
            None => HostSource::None,
        }
    }

    /// The reader every file of this configuration is read with (its timeout bounds each read).
    pub fn files(&self) -> &FileReader {
        &self.files
    }

    /// How often the files are read again.
    pub fn reload_interval(&self) -> Duration {
        self.every
    }
}

impl FileSource for ContainerdSource {
    const KIND: &'static str = "containerd";

    /// The registry hosts this configuration names: CRI `auth` keys, deprecated mirror hosts, and
    /// the `certs.d` directories (`host` or `host_port`) present at the last load.
    async fn configured_hosts(&self) -> Vec<String> {
        let loaded = self.loaded().await;
        loaded
            .auths
            .iter()
            .map(|(_, host, _)| image_host(&normalize_config_key(host)).to_owned())
            .chain(loaded.mirrors.keys().cloned())
            .chain(loaded.host_dirs.iter().cloned())
            .collect()
    }

    /// Credentials whose registry host matches `image`'s, named `containerd:FILE`.
    async fn candidates(&self, image: &str) -> Vec<CredentialCandidate> {
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
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
