//! Docker `config.json` (and legacy `.dockercfg`) credentials: `auths` entries, `credHelpers` and
//! `credsStore` credential helpers. The same parser reads Kubernetes pull secrets
//! (`.dockerconfigjson` and `.dockercfg` payloads).

mod helper;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use serde::Deserialize;

pub use helper::{CredentialHelpers, HelperError};

use super::exec::ExecLimits;
use super::generation::Generation;
use super::matching::{
    config_key_matches, helper_server_url, image_host, is_docker_hub, normalize_config_key,
};
use super::reload::{Reloading, DEFAULT_RELOAD_INTERVAL};
use crate::files::FileReader;
use crate::matching::DOCKER_HUB;
use crate::source::FileSource;
use crate::{Credential, CredentialCandidate};

/// Largest docker config file we read.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Why a docker config could not be used. Never carries the file's content.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DockerConfigError {
    #[error("docker config is not valid JSON (line {line}, column {column})")]
    Malformed { line: usize, column: usize },
    #[error("docker config is not a JSON object")]
    NotAnObject,
    #[error("docker config is larger than {max} bytes")]
    TooLarge { max: u64 },
    #[error("could not read docker config")]
    Read(#[from] crate::files::FileError),
}

/// A parsed docker config: credentials per registry key, and the credential helpers to ask.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct DockerConfig {
    /// `(key as written, credential)`, in the file's key order.
    auths: Vec<(String, Credential)>,
    creds_store: Option<String>,
    cred_helpers: BTreeMap<String, String>,
    /// Entries that were present but unusable (bad base64, no secret): their keys only.
    skipped: Vec<String>,
}

impl std::fmt::Debug for DockerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerConfig")
            .field(
                "auths",
                &self.auths.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("creds_store", &self.creds_store)
            .field("cred_helpers", &self.cred_helpers)
            .field("skipped", &self.skipped)
            .finish()
    }
}

#[derive(Deserialize, Default)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
    #[serde(default)]
    registrytoken: Option<String>,
}

fn non_empty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

impl AuthEntry {
    fn has_any_field(&self) -> bool {
        self.auth.is_some()
            || self.username.is_some()
            || self.password.is_some()
            || self.identitytoken.is_some()
            || self.registrytoken.is_some()
    }

    /// The credential of an entry: identity token, else registry token, else `auth`, else
    /// `username`/`password`. `Err` when the entry has something that cannot be used.
    fn credential(&self) -> Result<Option<Credential>, ()> {
        if let Some(token) = non_empty(&self.identitytoken) {
            return Ok(Some(Credential::IdentityToken(token.to_owned())));
        }
        if let Some(token) = non_empty(&self.registrytoken) {
            return Ok(Some(Credential::RegistryToken(token.to_owned())));
        }
        if let Some(auth) = non_empty(&self.auth) {
            return decode_auth(auth).map(Some);
        }
        match (non_empty(&self.username), non_empty(&self.password)) {
            (Some(username), Some(password)) => Ok(Some(basic(username, password))),
            (None, None) => Ok(None),
            _ => Err(()),
        }
    }
}

/// The credential of one docker-style auth object (`auth`, `username`/`password`,
/// `identitytoken`, `registrytoken`), as also used by containerd's CRI `auth` tables.
/// `Err` when it has something unusable.
pub(crate) fn entry_credential(value: serde_json::Value) -> Result<Option<Credential>, ()> {
    let entry: AuthEntry = serde_json::from_value(value).map_err(|_| ())?;
    entry.credential()
}

/// Decode a docker `auth` field: base64 of `user:password` (padding optional). Line breaks are
/// ignored, as Go's decoder ignores them; any other whitespace makes the field unusable, as it
/// does for the kubelet.
fn decode_auth(auth: &str) -> Result<Credential, ()> {
    let cleaned: String = auth.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&cleaned)
        .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(&cleaned))
        .map_err(|_| ())?;
    let text = String::from_utf8(bytes).map_err(|_| ())?;
    let (username, password) = text.split_once(':').ok_or(())?;
    if username.is_empty() && password.is_empty() {
        return Err(());
    }
    Ok(basic(username, password))
}

/// A username/password pair; docker's `<token>` username means the password is an identity token.
pub(crate) fn basic(username: &str, password: &str) -> Credential {
    if username == "<token>" && !password.is_empty() {
        return Credential::IdentityToken(password.to_owned());
    }
    Credential::Basic {
        username: username.to_owned(),
        password: password.to_owned(),
    }
}

/// Parse a docker config: the `config.json` shape (`auths`, `credsStore`, `credHelpers`) or the
/// legacy `.dockercfg` shape (a top-level map of registry keys). Empty input (or only whitespace)
/// is an empty config. Entries that cannot be used are skipped and listed in [`DockerConfig::skipped`].
pub fn parse_docker_config(bytes: &[u8]) -> Result<DockerConfig, DockerConfigError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(DockerConfig::default());
    }
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| DockerConfigError::Malformed {
            line: e.line(),
            column: e.column(),
        })?;
    let serde_json::Value::Object(mut object) = value else {
        return Err(DockerConfigError::NotAnObject);
    };
    let mut config = DockerConfig::default();
    let modern = ["auths", "credsStore", "credHelpers"]
        .iter()
        .any(|k| object.contains_key(*k));
    let entries: Vec<(String, serde_json::Value)> = if modern {
        if let Some(serde_json::Value::String(store)) = object.remove("credsStore") {
            config.creds_store = Some(store).filter(|s| !s.is_empty());
        }
        if let Some(serde_json::Value::Object(helpers)) = object.remove("credHelpers") {
            for (key, helper) in helpers {
                match helper {
                    serde_json::Value::String(name) if !name.is_empty() => {
                        config.cred_helpers.insert(key, name);
                    }
                    _ => config.skipped.push(key),
                }
            }
        }
        match object.remove("auths") {
            Some(serde_json::Value::Object(auths)) => auths.into_iter().collect(),
            _ => Vec::new(),
        }
    } else {
        object.into_iter().collect()
    };
    for (key, value) in entries {
        let entry: Option<AuthEntry> = match value {
            serde_json::Value::Object(_) => serde_json::from_value(value).ok(),
            _ => None,
        };
        match entry {
            // Legacy files: only objects that look like credentials count.
            Some(entry) if !modern && !entry.has_any_field() => {}
            Some(entry) => match entry.credential() {
                Ok(Some(credential)) => config.auths.push((key, credential)),
                Ok(None) => {}
                Err(()) => config.skipped.push(key),
            },
            None if modern => config.skipped.push(key),
            None => {}
        }
    }
    Ok(config)
}

impl DockerConfig {
    /// Whether nothing at all is configured.
    pub fn is_empty(&self) -> bool {
        self.auths.is_empty() && self.creds_store.is_none() && self.cred_helpers.is_empty()
    }

    /// Keys of entries present but unusable (for a warning; never their content).
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }

    /// The `auths` keys (not the credentials).
    pub fn auth_keys(&self) -> impl Iterator<Item = &str> {
        self.auths.iter().map(|(k, _)| k.as_str())
    }

    /// The `auths` and `credHelpers` keys.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.auth_keys()
            .chain(self.cred_helpers.keys().map(String::as_str))
    }

    /// `credsStore`, if set.
    pub fn creds_store(&self) -> Option<&str> {
        self.creds_store.as_deref()
    }

    /// The `credHelpers` entry applying to `image`, if any (its helper name).
    pub fn cred_helper_for(&self, image: &str) -> Option<&str> {
        let mut keys: Vec<&String> = self
            .cred_helpers
            .keys()
            .filter(|key| config_key_matches(key, image))
            .collect();
        keys.sort_by_key(|key| std::cmp::Reverse(normalize_config_key(key)));
        keys.first()
            .and_then(|key| self.cred_helpers.get(*key))
            .map(String::as_str)
    }

    /// The `auths` credentials that apply to `image`, most specific key first (as the kubelet
    /// orders them), each named `source`. No helper is run. Docker Hub's host names in `image`
    /// (`index.docker.io/...`) mean `docker.io`, as they do in keys.
    pub fn auth_candidates(&self, image: &str, source: &str) -> Vec<CredentialCandidate> {
        let host = image_host(image);
        let hub_image;
        let image = if is_docker_hub(host) && host != DOCKER_HUB {
            hub_image = format!("{DOCKER_HUB}{}", &image[host.len()..]);
            hub_image.as_str()
        } else {
            image
        };
        let mut matched: Vec<(String, &Credential)> = self
            .auths
            .iter()
            .map(|(key, credential)| (normalize_config_key(key), credential))
            .filter(|(pattern, _)| super::matching::image_matches(pattern, image))
            .collect();
        // Stable: equal normalized keys keep the file order.
        matched.sort_by(|a, b| b.0.cmp(&a.0));
        let mut out: Vec<CredentialCandidate> = Vec::with_capacity(matched.len());
        for (_, credential) in matched {
            if !out.iter().any(|c| &c.credential == credential) {
                out.push(CredentialCandidate::new(source, credential.clone()));
            }
        }
        out
    }
}

/// noe's default list of docker config files, from the environment (`DOCKER_CONFIG`, `HOME`).
pub fn default_paths() -> Vec<PathBuf> {
    default_paths_from(
        std::env::var_os("DOCKER_CONFIG").as_deref().map(Path::new),
        std::env::var_os("HOME").as_deref().map(Path::new),
    )
}

/// noe's default list of docker config files, in noe's order: the kubelet's `config.json`,
/// `$DOCKER_CONFIG/config.json`, `~/.docker/config.json`, `/.docker/config.json`, then the legacy
/// `.dockercfg` files in the same places.
pub fn default_paths_from(docker_config: Option<&Path>, home: Option<&Path>) -> Vec<PathBuf> {
    let mut paths = vec![PathBuf::from("/var/lib/kubelet/config.json")];
    if let Some(dir) = docker_config {
        paths.push(dir.join("config.json"));
    }
    if let Some(home) = home {
        paths.push(home.join(".docker/config.json"));
    }
    paths.push(PathBuf::from("/.docker/config.json"));
    paths.push(PathBuf::from("/var/lib/kubelet/.dockercfg"));
    if let Some(home) = home {
        paths.push(home.join(".dockercfg"));
    }
    paths.push(PathBuf::from("/.dockercfg"));
    let mut unique = Vec::with_capacity(paths.len());
    for path in paths {
        if !unique.contains(&path) {
            unique.push(path);
        }
    }
    unique
}

/// Read a docker config file off the async workers, bounded by `files`' timeout. A missing file
/// is `Ok(None)`; an empty one an empty config.
pub async fn read_config_file(
    files: &FileReader,
    path: &Path,
) -> Result<Option<DockerConfig>, DockerConfigError> {
    match files.read(path, MAX_CONFIG_BYTES).await {
        Ok(Some(bytes)) => parse_docker_config(&bytes).map(Some),
        Ok(None) => Ok(None),
        Err(crate::files::FileError::TooLarge { max, .. }) => {
            Err(DockerConfigError::TooLarge { max })
        }
        Err(error) => Err(DockerConfigError::Read(error)),
    }
}

/// Credentials from docker config files and the credential helpers they name.
///
/// The files are read off the async workers, each with a timeout ([`FileReader`]), and reloaded
/// in the background: lookups use the last good contents and never wait for a file, except the
/// very first time (at most twice the read timeout). A file that cannot be read again keeps its
/// last good contents.
#[derive(Clone, derive_more::Debug)]
#[debug("DockerConfigSource {{ paths: {paths:?}, helpers: {helpers:?}, .. }}")]
pub struct DockerConfigSource {
    paths: Arc<Vec<PathBuf>>,
    helpers: CredentialHelpers,
    files: FileReader,
    loaded: Arc<Reloading<Vec<(PathBuf, DockerConfig)>>>,
    /// Bumped when a reload finds the files' contents changed.
    generation: Generation,
}

/// Read every file, concurrently; unreadable or malformed ones are logged (without content) and
/// skipped, or keep their `previous` contents when they could not be read at all.
async fn load_files(
    files: &FileReader,
    paths: &[PathBuf],
    previous: Option<&[(PathBuf, DockerConfig)]>,
) -> Vec<(PathBuf, DockerConfig)> {
    let reads = futures::future::join_all(paths.iter().map(|p| read_config_file(files, p))).await;
    let mut out = Vec::new();
    for (path, read) in paths.iter().zip(reads) {
        match read {
            Ok(Some(config)) => {
                if !config.skipped().is_empty() {
                    tracing::warn!(
                        path = %path.display(),
                        keys = ?config.skipped(),
                        "skipping unusable docker config entries"
                    );
                }
                out.push((path.clone(), config));
            }
            Ok(None) => {}
            Err(DockerConfigError::Read(error)) => {
                let kept = previous
                    .and_then(|files| files.iter().find(|(p, _)| p == path))
                    .cloned();
                tracing::warn!(path = %path.display(), %error, kept_previous = kept.is_some(), "docker config file not read");
                out.extend(kept);
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "skipping docker config file");
            }
        }
    }
    out
}

impl DockerConfigSource {
    /// Read `paths` (in order, again at most every 10 s); helpers are looked up in `helpers`'
    /// search path.
    pub fn new(paths: Vec<PathBuf>, helpers: CredentialHelpers) -> Self {
        Self::with_reload_interval(paths, helpers, DEFAULT_RELOAD_INTERVAL)
    }

    pub fn with_reload_interval(
        paths: Vec<PathBuf>,
        helpers: CredentialHelpers,
        every: std::time::Duration,
    ) -> Self {
        Self::with_options(paths, helpers, every, FileReader::default())
    }

    /// Reads with `files` (its timeout bounds each read), reloading every `every`.
    pub fn with_options(
        paths: Vec<PathBuf>,
        helpers: CredentialHelpers,
        every: std::time::Duration,
        files: FileReader,
    ) -> Self {
        let first_wait = files.timeout().saturating_mul(2);
        Self {
            paths: Arc::new(paths),
            helpers,
            files,
            loaded: Arc::new(Reloading::new(every, first_wait)),
            generation: Generation::default(),
        }
    }

    /// Its reload interval measured on `clock` (tests move a manual one); nothing is loaded yet.
    #[must_use]
    pub fn with_clock(mut self, clock: noe_core::clock::Clock) -> Self {
        self.loaded = Arc::new(self.loaded.on_clock(clock));
        self
    }

    /// Counts its changes in `generation` (shared with the other sources).
    #[must_use]
    pub fn with_generation(mut self, generation: Generation) -> Self {
        self.generation = generation;
        self
    }

    /// Read `paths`, running helpers found on `$PATH` with default limits.
    pub fn from_paths(paths: Vec<PathBuf>) -> Self {
        Self::new(
            paths,
            CredentialHelpers::new(CredentialHelpers::dirs_from_env(), ExecLimits::default()),
        )
    }

    /// The files read, in order.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// The parsed files, in order (the last good contents).
    async fn loaded(&self) -> Arc<Vec<(PathBuf, DockerConfig)>> {
        let paths = Arc::clone(&self.paths);
        let files = self.files.clone();
        let generation = self.generation.clone();
        self.loaded
            .get(|previous| async move {
                let loaded =
                    load_files(&files, &paths, previous.as_deref().map(Vec::as_slice)).await;
                generation.note(previous.as_deref(), &loaded);
                loaded
            })
            .await
    }

    /// Reads the files now (bounded by twice the read timeout), so the first lookup finds them
    /// loaded.
    pub async fn warm(&self) {
        self.loaded().await;
    }

    /// The candidates of one parsed config (helpers included). As with docker, a host that has a
    /// `credHelpers` entry is never looked up in `credsStore`.
    pub async fn config_candidates(
        &self,
        config: &DockerConfig,
        image: &str,
        source: &str,
    ) -> Vec<CredentialCandidate> {
        let server = helper_server_url(image_host(image));
        let mut out = Vec::new();
        let helper = config.cred_helper_for(image);
        if let Some(name) = helper {
            if let Some(candidate) = self.helper_candidate(name, &server).await {
                out.push(candidate);
            }
        }
        out.extend(config.auth_candidates(image, source));
        if let (Some(name), None) = (config.creds_store(), helper) {
            if let Some(candidate) = self.helper_candidate(name, &server).await {
                out.push(candidate);
            }
        }
        out
    }

    async fn helper_candidate(&self, name: &str, server: &str) -> Option<CredentialCandidate> {
        match self.helpers.get(name, server).await {
            Ok(Some(credential)) => Some(CredentialCandidate::new(
                format!("docker-credential-helper:{name}"),
                credential,
            )),
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(helper = name, server, %error, "docker credential helper failed");
                None
            }
        }
    }
}

impl FileSource for DockerConfigSource {
    const KIND: &'static str = "docker-config";

    /// The registry hosts the files name: `auths` and `credHelpers` keys (normalized, without
    /// path). `credsStore` names no host.
    async fn configured_hosts(&self) -> Vec<String> {
        let loaded = self.loaded().await;
        loaded
            .iter()
            .flat_map(|(_, config)| config.keys())
            .map(|key| image_host(&normalize_config_key(key)).to_owned())
            .filter(|host| !host.is_empty())
            .collect()
    }

    /// The candidates for `image` from every file, in file order. Within a file: the matching
    /// `credHelpers` helper, then matching `auths` entries (most specific first), then `credsStore`.
    /// Unreadable or malformed files are skipped with a warning.
    async fn candidates(&self, image: &str) -> Vec<CredentialCandidate> {
        let files = self.loaded().await;
        let mut out = Vec::new();
        for (path, config) in files.iter() {
            let source = format!("docker-config:{}", path.display());
            for candidate in self.config_candidates(config, image, &source).await {
                if !out
                    .iter()
                    .any(|c: &CredentialCandidate| c.credential == candidate.credential)
                {
                    out.push(candidate);
                }
            }
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
