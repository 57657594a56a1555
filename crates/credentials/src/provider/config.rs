//! `CredentialProviderConfig` (`kubelet.config.k8s.io/v1`, `v1beta1`, `v1alpha1`), YAML or JSON.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

/// Config API versions the kubelet accepts for `CredentialProviderConfig`.
pub const CONFIG_API_VERSIONS: &[&str] = &[
    "kubelet.config.k8s.io/v1",
    "kubelet.config.k8s.io/v1beta1",
    "kubelet.config.k8s.io/v1alpha1",
];

/// Exec protocol versions a provider may speak.
pub const EXEC_API_VERSIONS: &[&str] = &[
    "credentialprovider.kubelet.k8s.io/v1",
    "credentialprovider.kubelet.k8s.io/v1beta1",
    "credentialprovider.kubelet.k8s.io/v1alpha1",
];

/// Why a provider config cannot be used. Never carries the file's content.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("credential provider config is not valid YAML or JSON (line {line})")]
    Malformed { line: usize },
    #[error("credential provider config has apiVersion {found:?}, expected one of kubelet.config.k8s.io/v1, v1beta1, v1alpha1")]
    ApiVersion { found: String },
    #[error("credential provider config has kind {found:?}, expected CredentialProviderConfig")]
    Kind { found: String },
    #[error("credential provider config has an unknown field {field:?}")]
    UnknownField { field: String },
}

/// Why one provider entry is skipped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderSkip {
    #[error("provider name {name:?} is not a file name")]
    InvalidName { name: String },
    #[error("provider name {name:?} is used by more than one provider")]
    DuplicateName { name: String },
    #[error("provider {name} has an unknown field {field:?}")]
    UnknownField { name: String, field: String },
    #[error("provider {name} has no matchImages")]
    NoMatchImages { name: String },
    #[error("provider {name} has an invalid matchImages entry {pattern:?}")]
    InvalidMatchImage { name: String, pattern: String },
    #[error("provider {name} has no defaultCacheDuration")]
    NoCacheDuration { name: String },
    #[error("provider {name} has an invalid defaultCacheDuration")]
    InvalidCacheDuration { name: String },
    #[error("provider {name} speaks unsupported apiVersion {api_version:?}")]
    ApiVersion { name: String, api_version: String },
    #[error("provider {name} needs a service account token (tokenAttributes), which noe-rs cannot provide")]
    NeedsServiceAccountToken { name: String },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawConfig {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    providers: Vec<RawProvider>,
    /// Fields the kubelet does not know either (it decodes strictly).
    #[serde(flatten)]
    unknown: BTreeMap<String, yaml_serde::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawProvider {
    #[serde(default)]
    name: String,
    #[serde(default)]
    match_images: Vec<String>,
    #[serde(default)]
    default_cache_duration: Option<String>,
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: Vec<RawEnv>,
    #[serde(default)]
    token_attributes: Option<yaml_serde::Value>,
    #[serde(flatten)]
    unknown: BTreeMap<String, yaml_serde::Value>,
}

#[derive(Deserialize)]
struct RawEnv {
    name: String,
    #[serde(default)]
    value: String,
}

/// One usable credential provider plugin.
#[derive(Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    pub name: String,
    pub match_images: Vec<String>,
    pub default_cache_duration: Duration,
    pub api_version: String,
    pub args: Vec<String>,
    /// May hold secrets: not printed by `Debug`.
    pub env: Vec<(String, String)>,
}

impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("name", &self.name)
            .field("match_images", &self.match_images)
            .field("default_cache_duration", &self.default_cache_duration)
            .field("api_version", &self.api_version)
            .field("args", &self.args)
            .field(
                "env",
                &self.env.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// A parsed config: the usable providers, in order, and the ones skipped with why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CredentialProviderConfig {
    pub providers: Vec<ProviderConfig>,
    pub skipped: Vec<ProviderSkip>,
}

/// Parse a `CredentialProviderConfig` (YAML or JSON). An empty document has no providers.
pub fn parse_provider_config(text: &str) -> Result<CredentialProviderConfig, ConfigError> {
    if text.trim().is_empty() {
        return Ok(CredentialProviderConfig::default());
    }
    let raw: RawConfig = yaml_serde::from_str(text).map_err(|e| ConfigError::Malformed {
        line: e.location().map(|l| l.line()).unwrap_or(0),
    })?;
    if !CONFIG_API_VERSIONS.contains(&raw.api_version.as_str()) {
        return Err(ConfigError::ApiVersion {
            found: raw.api_version,
        });
    }
    if raw.kind != "CredentialProviderConfig" {
        return Err(ConfigError::Kind { found: raw.kind });
    }
    if let Some(field) = raw.unknown.into_keys().next() {
        return Err(ConfigError::UnknownField {
            field: bounded(&field),
        });
    }
    let mut config = CredentialProviderConfig::default();
    let names: Vec<String> = raw.providers.iter().map(|p| p.name.clone()).collect();
    for provider in raw.providers {
        // The kubelet refuses a config naming a plugin twice: neither entry is used.
        if names.iter().filter(|n| **n == provider.name).count() > 1 {
            config.skipped.push(ProviderSkip::DuplicateName {
                name: bounded(&provider.name),
            });
            continue;
        }
        match validate(provider) {
            Ok(provider) => config.providers.push(provider),
            Err(skip) => config.skipped.push(skip),
        }
    }
    Ok(config)
}

/// At most 128 characters of a name or field quoted in a skip reason.
fn bounded(text: &str) -> String {
    text.chars().take(128).collect()
}

/// A `matchImages` entry the kubelet accepts: `host[:port][/path]` without spaces or control
/// characters, `%` only as an escape, a numeric port, and well-formed globs in the host.
fn valid_match_image(pattern: &str) -> bool {
    let bytes = pattern.as_bytes();
    let escapes_ok = bytes.iter().enumerate().all(|(i, b)| {
        *b != b'%'
            || (bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    });
    if pattern.is_empty()
        || !escapes_ok
        || pattern.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return false;
    }
    let authority = pattern.split('/').next().unwrap_or_default();
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if !authority.starts_with('[') => {
            if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
                return false;
            }
            host
        }
        _ => authority,
    };
    !host.is_empty() && host.split('.').all(crate::glob::is_valid)
}

fn validate(raw: RawProvider) -> Result<ProviderConfig, ProviderSkip> {
    let name = bounded(&raw.name);
    if name.is_empty()
        || name == "."
        || name == ".."
        || name.contains(['/', '\\'])
        || name.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(ProviderSkip::InvalidName { name });
    }
    if let Some(field) = raw.unknown.into_keys().next() {
        return Err(ProviderSkip::UnknownField {
            name,
            field: bounded(&field),
        });
    }
    if raw.token_attributes.is_some() {
        return Err(ProviderSkip::NeedsServiceAccountToken { name });
    }
    let match_images: Vec<String> = raw
        .match_images
        .into_iter()
        .filter(|m| !m.trim().is_empty())
        .collect();
    if match_images.is_empty() {
        return Err(ProviderSkip::NoMatchImages { name });
    }
    if let Some(pattern) = match_images.iter().find(|p| !valid_match_image(p)) {
        return Err(ProviderSkip::InvalidMatchImage {
            name,
            pattern: bounded(pattern),
        });
    }
    let default_cache_duration = match raw.default_cache_duration.as_deref() {
        None => return Err(ProviderSkip::NoCacheDuration { name }),
        Some(text) => match crate::duration::parse(text) {
            Ok(duration) => duration,
            Err(_) => return Err(ProviderSkip::InvalidCacheDuration { name }),
        },
    };
    if !EXEC_API_VERSIONS.contains(&raw.api_version.as_str()) {
        return Err(ProviderSkip::ApiVersion {
            name,
            api_version: raw.api_version,
        });
    }
    Ok(ProviderConfig {
        name,
        match_images,
        default_cache_duration,
        api_version: raw.api_version,
        args: raw.args,
        env: raw.env.into_iter().map(|e| (e.name, e.value)).collect(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const YAML_V1: &str = r#"
apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: ecr-credential-provider
    matchImages:
      - "*.dkr.ecr.*.amazonaws.com"
      - "*.dkr.ecr.*.amazonaws.com.cn"
    defaultCacheDuration: "12h"
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    args: [get-credentials]
    env:
      - name: AWS_PROFILE
        value: hunter2-profile
"#;

    #[test]
    fn parses_yaml_v1() {
        let config = parse_provider_config(YAML_V1).unwrap();
        assert!(config.skipped.is_empty());
        let p = &config.providers[0];
        assert_eq!(p.name, "ecr-credential-provider");
        assert_eq!(p.match_images.len(), 2);
        assert_eq!(p.default_cache_duration, Duration::from_secs(12 * 3600));
        assert_eq!(p.api_version, "credentialprovider.kubelet.k8s.io/v1");
        assert_eq!(p.args, ["get-credentials"]);
        assert_eq!(
            p.env,
            [("AWS_PROFILE".to_owned(), "hunter2-profile".to_owned())]
        );
        assert!(!format!("{config:?}").contains("hunter2"));
    }

    #[test]
    fn parses_json_and_each_config_version() {
        for (config_version, exec_version) in [
            ("v1", "v1"),
            ("v1beta1", "v1beta1"),
            ("v1alpha1", "v1alpha1"),
        ] {
            let json = format!(
                r#"{{"apiVersion":"kubelet.config.k8s.io/{config_version}","kind":"CredentialProviderConfig","providers":[{{"name":"p","matchImages":["gcr.io"],"defaultCacheDuration":"0s","apiVersion":"credentialprovider.kubelet.k8s.io/{exec_version}"}}]}}"#
            );
            let config = parse_provider_config(&json).unwrap();
            assert_eq!(config.providers.len(), 1, "{json}");
            assert_eq!(config.providers[0].default_cache_duration, Duration::ZERO);
        }
    }

    #[test]
    fn rejects_bad_documents() {
        assert!(matches!(
            parse_provider_config("apiVersion: v1\nkind: Pod\n"),
            Err(ConfigError::ApiVersion { .. })
        ));
        assert!(matches!(
            parse_provider_config(
                "apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n"
            ),
            Err(ConfigError::Kind { .. })
        ));
        assert!(matches!(
            parse_provider_config("providers: [hunter2"),
            Err(ConfigError::Malformed { .. })
        ));
        let err = parse_provider_config("providers: [hunter2").unwrap_err();
        assert!(!format!("{err} {err:?}").contains("hunter2"));
        assert_eq!(
            parse_provider_config("  \n").unwrap(),
            CredentialProviderConfig::default()
        );
    }

    #[test]
    fn skips_invalid_providers_and_keeps_the_rest() {
        let yaml = r#"
apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: ../evil
    matchImages: ["gcr.io"]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
  - name: no-match
    matchImages: []
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
  - name: bad-duration
    matchImages: ["gcr.io"]
    defaultCacheDuration: forever
    apiVersion: credentialprovider.kubelet.k8s.io/v1
  - name: bad-version
    matchImages: ["gcr.io"]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v2
  - name: sa-token
    matchImages: ["gcr.io"]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    tokenAttributes:
      serviceAccountTokenAudience: my-audience
      requireServiceAccount: true
  - name: good
    matchImages: ["gcr.io"]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
  - name: twice
    matchImages: ["a.io"]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
  - name: twice
    matchImages: ["b.io"]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
  - name: typo
    matchImage: ["gcr.io"]
    matchImages: ["gcr.io"]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
  - name: with space
    matchImages: ["gcr.io"]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
  - name: bad-pattern
    matchImages: ["gcr.io", "%zz%.io"]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
  - name: no-duration
    matchImages: ["gcr.io"]
    apiVersion: credentialprovider.kubelet.k8s.io/v1
"#;
        let config = parse_provider_config(yaml).unwrap();
        assert_eq!(
            config
                .providers
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>(),
            ["good"]
        );
        assert!(matches!(
            config.skipped.as_slice(),
            [
                ProviderSkip::InvalidName { .. },
                ProviderSkip::NoMatchImages { .. },
                ProviderSkip::InvalidCacheDuration { .. },
                ProviderSkip::ApiVersion { .. },
                ProviderSkip::NeedsServiceAccountToken { .. },
                ProviderSkip::DuplicateName { .. },
                ProviderSkip::DuplicateName { .. },
                ProviderSkip::UnknownField { .. },
                ProviderSkip::InvalidName { .. },
                ProviderSkip::InvalidMatchImage { .. },
                ProviderSkip::NoCacheDuration { .. },
            ]
        ));
    }

    #[test]
    fn match_image_validity() {
        for good in [
            "gcr.io",
            "*.gcr.io",
            "registry.io:8080/team",
            "*.dkr.ecr.*.amazonaws.com",
            "reg[0-9].io",
            "registry.io/%41pp",
            "127.0.0.1:5000",
        ] {
            assert!(valid_match_image(good), "{good}");
        }
        for bad in [
            "",
            "%invalid%",
            "gcr .io",
            "gcr.io:",
            "gcr.io:80a",
            "reg[.io",
            "a\u{7}.io",
            "/path-only",
        ] {
            assert!(!valid_match_image(bad), "{bad}");
        }
    }

    #[test]
    fn unknown_top_level_fields_refuse_the_config() {
        let yaml =
            "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nprovider: []\n";
        assert!(matches!(
            parse_provider_config(yaml),
            Err(ConfigError::UnknownField { field }) if field == "provider"
        ));
    }
}
