//! Docker `config.json` files (the `kubernetes.io/dockerconfigjson` format) for credential tests.

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Map, Value};

/// Builds a docker `config.json`: `{"auths": {HOST: {...}}}`.
///
/// ```
/// let json = noe_test_support::DockerConfig::new()
///     .auth("127.0.0.1:5000", "alice", "s3cret")
///     .identity_token("ghcr.io", "refresh-me")
///     .to_json();
/// assert_eq!(json["auths"]["127.0.0.1:5000"]["auth"], "YWxpY2U6czNjcmV0");
/// ```
#[derive(Clone, Default)]
pub struct DockerConfig {
    auths: Map<String, Value>,
    extra: Map<String, Value>,
}

impl std::fmt::Debug for DockerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerConfig")
            .field("hosts", &self.auths.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl DockerConfig {
    /// An empty config.
    pub fn new() -> Self {
        Self::default()
    }

    /// `auth: base64(user:password)` for `host` (a host, `host:port`, or a URL / pattern key).
    pub fn auth(mut self, host: &str, user: &str, password: &str) -> Self {
        let auth = STANDARD.encode(format!("{user}:{password}"));
        self.auths.insert(host.to_owned(), json!({ "auth": auth }));
        self
    }

    /// Separate `username` / `password` fields for `host`.
    pub fn username_password(mut self, host: &str, user: &str, password: &str) -> Self {
        self.auths.insert(
            host.to_owned(),
            json!({ "username": user, "password": password }),
        );
        self
    }

    /// An `identitytoken` (OAuth2 refresh token) for `host`, with the `<token>` user docker
    /// writes.
    pub fn identity_token(mut self, host: &str, token: &str) -> Self {
        let auth = STANDARD.encode("<token>:");
        self.auths.insert(
            host.to_owned(),
            json!({ "auth": auth, "identitytoken": token }),
        );
        self
    }

    /// A `registrytoken` (sent as Bearer as is) for `host`.
    pub fn registry_token(mut self, host: &str, token: &str) -> Self {
        self.auths
            .insert(host.to_owned(), json!({ "registrytoken": token }));
        self
    }

    /// Any entry for `host`, as given.
    pub fn raw_entry(mut self, host: &str, entry: Value) -> Self {
        self.auths.insert(host.to_owned(), entry);
        self
    }

    /// A top-level key such as `credsStore` or `credHelpers`.
    pub fn top_level(mut self, key: &str, value: Value) -> Self {
        self.extra.insert(key.to_owned(), value);
        self
    }

    /// The JSON document.
    pub fn to_json(&self) -> Value {
        let mut root = self.extra.clone();
        root.insert("auths".to_owned(), Value::Object(self.auths.clone()));
        Value::Object(root)
    }

    /// The legacy `.dockercfg` form (`kubernetes.io/dockercfg`): the `auths` map alone.
    pub fn to_legacy_json(&self) -> Value {
        Value::Object(self.auths.clone())
    }

    /// Writes `config.json` into `dir` and returns its path.
    pub fn write_to(&self, dir: &Path) -> anyhow::Result<PathBuf> {
        let path = dir.join("config.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&self.to_json())?)?;
        Ok(path)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_entry_kind() {
        let config = DockerConfig::new()
            .auth("a.example", "u", "p")
            .username_password("b.example", "u2", "p2")
            .identity_token("c.example", "refresh")
            .registry_token("d.example", "bearer")
            .top_level("credsStore", json!("desktop"));
        let json = config.to_json();
        assert_eq!(json["auths"]["a.example"]["auth"], "dTpw");
        assert_eq!(json["auths"]["b.example"]["password"], "p2");
        assert_eq!(json["auths"]["c.example"]["identitytoken"], "refresh");
        assert_eq!(json["auths"]["c.example"]["auth"], "PHRva2VuPjo=");
        assert_eq!(json["auths"]["d.example"]["registrytoken"], "bearer");
        assert_eq!(json["credsStore"], "desktop");
        assert_eq!(config.to_legacy_json()["a.example"]["auth"], "dTpw");
        assert!(!format!("{config:?}").contains("dTpw"));

        let dir = tempfile::tempdir().unwrap();
        let path = config.write_to(dir.path()).unwrap();
        let read: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        assert_eq!(read, json);
    }
}
