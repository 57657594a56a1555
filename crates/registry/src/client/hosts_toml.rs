//! Where a registry is reached, in containerd's registry host configuration
//! (`certs.d/HOST/hosts.toml`, `_default/hosts.toml`): the mirrors to try for a registry, in
//! order, then the registry itself, each with its TLS files ([`super::host_tls`]).

use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::host_tls::{docker_cert_dir, read_tls_files, ClientCert, SharedTlsFiles};
use noe_credentials::matching::is_docker_hub;

/// Why a `hosts.toml` cannot be used. Never carries the file's content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostsError {
    #[error("hosts.toml is not valid TOML")]
    Malformed,
    #[error("hosts.toml names an invalid host URL {url:?}")]
    InvalidUrl { url: String },
    #[error("hosts.toml has an invalid client entry (a path, or a [certificate, key] pair)")]
    InvalidClient,
    #[error("hosts.toml has an invalid dial_timeout {value:?}")]
    InvalidDialTimeout { value: String },
    #[error("hosts.toml cannot be read: {reason}")]
    Unreadable { reason: String },
}

/// What a host may be used for (containerd `capabilities`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Capabilities {
    /// Resolve a tag to a digest (serve manifests by tag).
    pub resolve: bool,
    /// Serve content by digest (manifests and blobs).
    pub pull: bool,
    pub push: bool,
}

impl Capabilities {
    pub const ALL: Self = Self {
        resolve: true,
        pull: true,
        push: true,
    };

    fn from_list(list: &[String]) -> Self {
        let has = |name: &str| list.iter().any(|c| c.eq_ignore_ascii_case(name));
        Self {
            resolve: has("resolve"),
            pull: has("pull"),
            push: has("push"),
        }
    }
}

/// One place to fetch from.
#[derive(Clone, PartialEq, Eq, Hash, derive_more::Debug)]
pub struct Endpoint {
    /// `scheme://host[:port][/path]`, as configured (scheme defaulted to `https`).
    #[debug("{:?}", url.as_str())]
    pub url: url::Url,
    pub capabilities: Capabilities,
    /// When set, `url`'s path is the API root itself; otherwise `/v2` is appended.
    pub override_path: bool,
    /// Extra CA files (PEM) trusted for this host.
    pub ca: Vec<PathBuf>,
    /// Client certificates presented to this host (mTLS).
    pub client: Vec<ClientCert>,
    /// Bound on connecting to this host (capped by the request timeout).
    pub dial_timeout: Option<Duration>,
    /// The contents of the `ca` and `client` files, read with the host configuration; `None`
    /// until read ([`load_hosts`] reads them).
    pub tls_files: Option<SharedTlsFiles>,
    pub skip_verify: bool,
    /// Header values sent as they are, to this host only. May hold secrets: not in `Debug`.
    #[debug("{:?}", headers.iter().map(|(key, _)| key).collect::<Vec<_>>())]
    pub headers: Vec<(String, Vec<String>)>,
    /// False for the registry's own server, true for a mirror.
    pub mirror: bool,
}

impl Endpoint {
    /// The distribution API root: `https://mirror/v2`, `https://mirror/prefix/v2`, or the path
    /// itself with `override_path` (no trailing slash).
    pub fn api_base(&self) -> String {
        let mut base = self.url.clone();
        let path = self.url.path().trim_end_matches('/').to_owned();
        if self.override_path {
            base.set_path(&path);
        } else {
            base.set_path(&format!("{path}/v2"));
        }
        base.as_str().trim_end_matches('/').to_owned()
    }

    /// The reference to look credentials up with when fetching `image` from this endpoint: a
    /// mirror's own host with the image's path (a mirror gets only credentials matched for its
    /// host); the registry's server keeps the image as it is.
    pub fn credential_image(&self, image: &str) -> String {
        if !self.mirror {
            return image.to_owned();
        }
        let path = image.find('/').map_or("", |i| &image[i..]);
        format!("{}{path}", self.host())
    }

    /// `host[:port]` of the endpoint (what credentials are matched against).
    pub fn host(&self) -> String {
        match (self.url.host_str(), self.url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            _ => String::new(),
        }
    }
}

/// The host configuration of one registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostsConfig {
    /// The registry host it is for (`docker.io`, `127.0.0.1:5000`).
    pub registry: String,
    /// Mirrors in order, then the server.
    endpoints: Vec<Endpoint>,
}

/// The default server of a registry host: `https://HOST`, `https://registry-1.docker.io` for
/// Docker Hub.
pub fn default_server(registry: &str) -> String {
    if is_docker_hub(registry) {
        "https://registry-1.docker.io".to_owned()
    } else {
        format!("https://{registry}")
    }
}

fn parse_url(text: &str) -> Result<url::Url, HostsError> {
    let with_scheme = if text.contains("://") {
        text.to_owned()
    } else {
        format!("https://{text}")
    };
    let url = url::Url::parse(&with_scheme).map_err(|_| HostsError::InvalidUrl {
        url: text.to_owned(),
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(HostsError::InvalidUrl {
            url: text.to_owned(),
        });
    }
    Ok(url)
}

#[derive(Deserialize, Default)]
struct RawHost {
    #[serde(default)]
    capabilities: Option<Vec<String>>,
    #[serde(default)]
    ca: Option<OneOrMany>,
    #[serde(default)]
    skip_verify: Option<bool>,
    #[serde(default)]
    override_path: Option<bool>,
    #[serde(default)]
    client: Option<toml::Value>,
    #[serde(default)]
    dial_timeout: Option<String>,
    #[serde(default, deserialize_with = "ordered_map")]
    header: Vec<(String, OneOrMany)>,
}

#[derive(Deserialize, Default)]
struct RawHosts {
    #[serde(default)]
    server: Option<String>,
    #[serde(default, deserialize_with = "ordered_map")]
    host: Vec<(String, RawHost)>,
    #[serde(flatten)]
    top: RawHost,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            Self::One(s) => vec![s],
            Self::Many(v) => v,
        }
    }
}

/// A TOML table as a list of entries in document order.
fn ordered_map<'de, D, V>(deserializer: D) -> Result<Vec<(String, V)>, D::Error>
where
    D: Deserializer<'de>,
    V: Deserialize<'de>,
{
    struct Ordered<V>(PhantomData<V>);
    impl<'de, V: Deserialize<'de>> Visitor<'de> for Ordered<V> {
        type Value = Vec<(String, V)>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a table")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(entry) = map.next_entry()? {
                out.push(entry);
            }
            Ok(out)
        }
    }
    deserializer.deserialize_map(Ordered(PhantomData))
}

/// containerd's `client`: `"both.pem"`, `["a.pem", "b.pem"]` or `[["cert", "key"], ...]` (a
/// pair's key may be `""`: the key is in the certificate file). Relative paths are resolved
/// against `base`.
fn client_certs(value: Option<toml::Value>, base: &Path) -> Result<Vec<ClientCert>, HostsError> {
    use toml::Value;
    let single = |path: &str| ClientCert {
        cert: base.join(path),
        key: None,
    };
    match value {
        None => Ok(Vec::new()),
        Some(Value::String(path)) => Ok(vec![single(&path)]),
        Some(Value::Array(entries)) => entries
            .into_iter()
            .map(|entry| match entry {
                Value::String(path) => Ok(single(&path)),
                Value::Array(pair) if (1..=2).contains(&pair.len()) => {
                    let cert = pair[0].as_str().ok_or(HostsError::InvalidClient)?;
                    let key = match pair.get(1) {
                        None => None,
                        Some(key) => Some(key.as_str().ok_or(HostsError::InvalidClient)?),
                    };
                    Ok(ClientCert {
                        cert: base.join(cert),
                        key: key.filter(|k| !k.is_empty()).map(|k| base.join(k)),
                    })
                }
                _ => Err(HostsError::InvalidClient),
            })
            .collect(),
        Some(_) => Err(HostsError::InvalidClient),
    }
}

fn endpoint(
    url: url::Url,
    raw: RawHost,
    mirror: bool,
    base: &Path,
) -> Result<Endpoint, HostsError> {
    let dial_timeout = match raw.dial_timeout {
        None => None,
        Some(text) => Some(noe_credentials::duration::parse(&text).map_err(|_| {
            HostsError::InvalidDialTimeout {
                value: text.chars().take(64).collect(),
            }
        })?),
    };
    Ok(Endpoint {
        url,
        capabilities: raw
            .capabilities
            .as_deref()
            .map_or(Capabilities::ALL, Capabilities::from_list),
        override_path: raw.override_path.unwrap_or(false),
        ca: raw
            .ca
            .map(OneOrMany::into_vec)
            .unwrap_or_default()
            .into_iter()
            .map(|ca| base.join(ca))
            .collect(),
        client: client_certs(raw.client, base)?,
        dial_timeout,
        tls_files: None,
        skip_verify: raw.skip_verify.unwrap_or(false),
        headers: raw
            .header
            .into_iter()
            .map(|(k, v)| (k, v.into_vec()))
            .collect(),
        mirror,
    })
}

impl HostsConfig {
    /// No `hosts.toml`: the registry's default server only.
    pub fn default_for(registry: &str) -> Result<Self, HostsError> {
        let url = parse_url(&default_server(registry))?;
        Ok(Self {
            registry: registry.to_owned(),
            endpoints: vec![endpoint(url, RawHost::default(), false, Path::new(""))?],
        })
    }

    /// From the deprecated CRI `registry.mirrors."HOST".endpoint` list: the endpoints in order
    /// (the one equal to the default server is the server), then the default server if absent.
    pub fn from_mirror_endpoints(registry: &str, endpoints: &[String]) -> Result<Self, HostsError> {
        let server = parse_url(&default_server(registry))?;
        let mut out = Vec::with_capacity(endpoints.len() + 1);
        let mut has_server = false;
        for text in endpoints {
            let url = parse_url(text)?;
            let is_server = url.host_str() == server.host_str()
                && url.port_or_known_default() == server.port_or_known_default();
            has_server |= is_server;
            out.push(endpoint(
                url,
                RawHost::default(),
                !is_server,
                Path::new(""),
            )?);
        }
        if !has_server {
            out.push(endpoint(server, RawHost::default(), false, Path::new(""))?);
        }
        Ok(Self {
            registry: registry.to_owned(),
            endpoints: out,
        })
    }

    /// Parse `hosts.toml` for `registry`. Relative `ca` paths are resolved against `dir` (the
    /// file's directory).
    pub fn parse(registry: &str, text: &str, dir: &Path) -> Result<Self, HostsError> {
        let raw: RawHosts = toml::from_str(text).map_err(|_| HostsError::Malformed)?;
        let mut endpoints = Vec::with_capacity(raw.host.len() + 1);
        for (url, host) in raw.host {
            endpoints.push(endpoint(parse_url(&url)?, host, true, dir)?);
        }
        let server = match raw.server.as_deref().filter(|s| !s.is_empty()) {
            Some(server) => parse_url(server)?,
            None => parse_url(&default_server(registry))?,
        };
        endpoints.push(endpoint(server, raw.top, false, dir)?);
        Ok(Self {
            registry: registry.to_owned(),
            endpoints,
        })
    }

    /// All endpoints: mirrors in order, then the server.
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// The endpoints usable for a manifest lookup: by tag needs `resolve`, by digest needs `pull`.
    pub fn endpoints_for(&self, by_digest: bool) -> Vec<&Endpoint> {
        self.endpoints
            .iter()
            .filter(|e| {
                if by_digest {
                    e.capabilities.pull
                } else {
                    e.capabilities.resolve
                }
            })
            .collect()
    }

    /// The server (the last endpoint).
    pub fn server(&self) -> Option<&Endpoint> {
        self.endpoints.last()
    }

    /// Reads the `ca` and `client` files of every endpoint that names some (blocking: only
    /// inside [`noe_credentials::files::FileReader::run`]). A file that cannot be read makes its endpoint
    /// fail with the reason when used.
    pub fn read_tls_files(&mut self) {
        for endpoint in &mut self.endpoints {
            if !endpoint.ca.is_empty() || !endpoint.client.is_empty() {
                endpoint.tls_files = Some(Arc::new(read_tls_files(&endpoint.ca, &endpoint.client)));
            }
        }
    }
}

/// The directory holding the host configuration of `registry` under the `certs.d`-style roots:
/// the first root with a `registry` directory, else the first with a `_default` one.
pub fn host_dir(roots: &[PathBuf], registry: &str) -> Option<PathBuf> {
    let names = [registry.to_owned(), registry.replace(':', "_")];
    roots
        .iter()
        .find_map(|root| {
            names
                .iter()
                .map(|name| root.join(name))
                .find(|dir| dir.is_dir())
        })
        .or_else(|| {
            roots
                .iter()
                .map(|root| root.join("_default"))
                .find(|dir| dir.is_dir())
        })
}

/// Largest `hosts.toml` read.
const MAX_HOSTS_TOML_BYTES: u64 = 1 << 20;

/// The host configuration for `registry` from `certs.d`-style roots, with the contents of the
/// TLS files it names. `Ok(None)` when no directory applies. A directory without `hosts.toml`
/// (docker's layout) contributes its `*.crt` files as CAs of the server and its `*.cert` files
/// (with the `*.key` of the same name) as client certificates. Blocking: only inside
/// [`noe_credentials::files::FileReader::run`].
pub fn load_hosts(roots: &[PathBuf], registry: &str) -> Result<Option<HostsConfig>, HostsError> {
    let Some(dir) = host_dir(roots, registry) else {
        return Ok(None);
    };
    let file = dir.join("hosts.toml");
    let mut config = match noe_credentials::files::read_blocking(&file, MAX_HOSTS_TOML_BYTES) {
        Ok(Some(bytes)) => {
            let text = String::from_utf8(bytes).map_err(|_| HostsError::Malformed)?;
            HostsConfig::parse(registry, &text, &dir)?
        }
        Ok(None) => {
            let mut config = HostsConfig::default_for(registry)?;
            let (ca, client) = docker_cert_dir(&dir);
            if let Some(server) = config.endpoints.last_mut() {
                server.ca = ca;
                server.client = client;
            }
            config
        }
        Err(error) => {
            return Err(HostsError::Unreadable {
                reason: error.to_string(),
            })
        }
    };
    config.read_tls_files();
    Ok(Some(config))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
