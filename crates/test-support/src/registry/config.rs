//! The YAML configuration given to `docker-registry serve`.

use std::path::Path;

/// Token authentication settings (`auth.token`).
#[derive(Debug, Clone)]
pub(crate) struct TokenConfig {
    pub(crate) realm: String,
    pub(crate) service: String,
    pub(crate) issuer: String,
}

/// Which `auth` section the registry gets.
#[derive(Debug, Clone)]
pub(crate) enum AuthConfig {
    None,
    Htpasswd,
    Token(TokenConfig),
}

/// Quotes a string as a YAML double-quoted scalar (JSON strings are valid YAML).
fn quote(value: &str) -> String {
    serde_json::Value::String(value.to_owned()).to_string()
}

fn quote_path(path: &Path) -> String {
    quote(&path.to_string_lossy())
}

/// How the registry serves TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tls {
    Off,
    On,
    /// TLS that requires a client certificate issued by `client-ca.crt` (`http.tls.clientcas`).
    RequireClientCert,
}

/// Renders the configuration. `dir` holds the storage, htpasswd, token root and TLS files.
pub(crate) fn render(dir: &Path, port: u16, auth: &AuthConfig, tls: Tls) -> String {
    let mut yaml = format!(
        "version: 0.1
log:
  level: info
  formatter: text
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
health:
  storagedriver:
    enabled: false
http:
  addr: {addr}
  secret: noe-rs-test-secret
",
        storage = quote_path(&dir.join("storage")),
        addr = quote(&format!("127.0.0.1:{port}")),
    );
    if tls != Tls::Off {
        yaml.push_str(&format!(
            "  tls:\n    certificate: {}\n    key: {}\n",
            quote_path(&dir.join("tls.crt")),
            quote_path(&dir.join("tls.key")),
        ));
    }
    if tls == Tls::RequireClientCert {
        yaml.push_str(&format!(
            "    clientcas:\n      - {}\n",
            quote_path(&dir.join("client-ca.crt")),
        ));
    }
    match auth {
        AuthConfig::None => {}
        AuthConfig::Htpasswd => yaml.push_str(&format!(
            "auth:\n  htpasswd:\n    realm: noe-test-basic\n    path: {}\n",
            quote_path(&dir.join("htpasswd")),
        )),
        AuthConfig::Token(token) => yaml.push_str(&format!(
            "auth:\n  token:\n    realm: {}\n    service: {}\n    issuer: {}\n    rootcertbundle: {}\n",
            quote(&token.realm),
            quote(&token.service),
            quote(&token.issuer),
            quote_path(&dir.join("token-root.pem")),
        )),
    }
    yaml
}
