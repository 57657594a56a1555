//! `CredentialProviderConfig` (`kubelet.config.k8s.io/v1`, `v1beta1`, `v1alpha1`), YAML or JSON.

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
}

/// Why one provider entry is skipped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderSkip {
    #[error("provider name {name:?} is not a file name")]
    InvalidName { name: String },
    #[error("provider {name} has no matchImages")]
    NoMatchImages { name: String },
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
    token_attributes: Option<serde_yaml::Value>,
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
    let raw: RawConfig = serde_yaml::from_str(text).map_err(|e| ConfigError::Malformed {
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
    let mut config = CredentialProviderConfig::default();
    for provider in raw.providers {
        match validate(provider) {
            Ok(provider) => config.providers.push(provider),
            Err(skip) => config.skipped.push(skip),
        }
    }
    Ok(config)
}

fn validate(raw: RawProvider) -> Result<ProviderConfig, ProviderSkip> {
    let name = raw.name;
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '\0']) {
        return Err(ProviderSkip::InvalidName { name });
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
    let default_cache_duration = match raw.default_cache_duration.as_deref() {
        None => Duration::ZERO,
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
            ]
        ));
    }
}
