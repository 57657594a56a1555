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
    #[error("provider {name} needs the pod's service account token (tokenAttributes): enable --credential-provider-sa-tokens")]
    NeedsServiceAccountToken { name: String },
    #[error("provider {name} has invalid tokenAttributes: {reason}")]
    InvalidTokenAttributes { name: String, reason: String },
}

/// The exec protocol version that may carry a service account token.
pub const TOKEN_API_VERSION: &str = "credentialprovider.kubelet.k8s.io/v1";

/// What a plugin's cached answer is keyed by besides its `cacheKeyType`, for a provider that
/// gets the pod's service account token (KEP-4412 `tokenAttributes.cacheType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TokenCacheType {
    /// The token itself: an answer is reused only with the same token, and not past it.
    Token,
    /// The service account (namespace, name, UID) and the annotations passed.
    ServiceAccount,
}

/// A provider's `tokenAttributes`: it gets a token of the pod's own service account, for this
/// audience, and these annotations of the service account, in its `CredentialProviderRequest`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenAttributes {
    /// `serviceAccountTokenAudience`.
    pub audience: String,
    /// `requireServiceAccount`: without a service account the plugin is not run.
    pub require_service_account: bool,
    /// `requiredServiceAccountAnnotationKeys`: a service account lacking one of them gets no
    /// credential from this plugin (the plugin is not run).
    pub required_annotation_keys: Vec<String>,
    /// `optionalServiceAccountAnnotationKeys`: passed when present.
    pub optional_annotation_keys: Vec<String>,
    /// `cacheType`.
    pub cache_type: TokenCacheType,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawTokenAttributes {
    #[serde(default)]
    service_account_token_audience: String,
    #[serde(default)]
    require_service_account: Option<bool>,
    #[serde(default)]
    required_service_account_annotation_keys: Vec<String>,
    #[serde(default)]
    optional_service_account_annotation_keys: Vec<String>,
    #[serde(default)]
    cache_type: String,
    #[serde(flatten)]
    unknown: BTreeMap<String, yaml_serde::Value>,
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
#[derive(Clone, PartialEq, Eq, derive_more::Debug)]
pub struct ProviderConfig {
    pub name: String,
    pub match_images: Vec<String>,
    pub default_cache_duration: Duration,
    pub api_version: String,
    pub args: Vec<String>,
    /// May hold secrets: not printed by `Debug`.
    #[debug("{:?}", env.iter().map(|(key, _)| key).collect::<Vec<_>>())]
    pub env: Vec<(String, String)>,
    /// Set: the plugin gets the pod's service account token (`--credential-provider-sa-tokens`).
    pub token_attributes: Option<TokenAttributes>,
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
    let token_attributes = match raw.token_attributes {
        None => None,
        Some(value) => {
            let invalid = |reason: &str| ProviderSkip::InvalidTokenAttributes {
                name: name.clone(),
                reason: reason.to_owned(),
            };
            if raw.api_version != TOKEN_API_VERSION {
                return Err(invalid(
                    "only credentialprovider.kubelet.k8s.io/v1 may carry a service account token",
                ));
            }
            let raw: RawTokenAttributes = yaml_serde::from_value(value)
                .map_err(|_| invalid("not an object of the documented fields"))?;
            Some(token_attributes(raw).map_err(|reason| invalid(&reason))?)
        }
    };
    Ok(ProviderConfig {
        name,
        match_images,
        default_cache_duration,
        api_version: raw.api_version,
        args: raw.args,
        env: raw.env.into_iter().map(|e| (e.name, e.value)).collect(),
        token_attributes,
    })
}

/// Most annotation keys one provider may ask for.
const MAX_ANNOTATION_KEYS: usize = 64;

/// `tokenAttributes` as the kubelet validates them: an audience, `requireServiceAccount` set
/// (and `true` when annotations are required), a `cacheType`, annotation keys that are
/// qualified names, each listed once, never both required and optional.
fn token_attributes(raw: RawTokenAttributes) -> Result<TokenAttributes, String> {
    if let Some(field) = raw.unknown.into_keys().next() {
        return Err(format!("unknown field {:?}", bounded(&field)));
    }
    let audience = raw.service_account_token_audience;
    if audience.trim().is_empty() {
        return Err("serviceAccountTokenAudience is required".into());
    }
    if audience.len() > 253 || audience.chars().any(char::is_control) {
        return Err("serviceAccountTokenAudience is not a valid audience".into());
    }
    let Some(require_service_account) = raw.require_service_account else {
        return Err("requireServiceAccount is required".into());
    };
    let required = raw.required_service_account_annotation_keys;
    let optional = raw.optional_service_account_annotation_keys;
    if !required.is_empty() && !require_service_account {
        return Err(
            "requireServiceAccount must be true when requiredServiceAccountAnnotationKeys is set"
                .into(),
        );
    }
    if required.len() + optional.len() > MAX_ANNOTATION_KEYS {
        return Err(format!("more than {MAX_ANNOTATION_KEYS} annotation keys"));
    }
    let mut seen: Vec<&str> = Vec::new();
    for key in required.iter().chain(&optional) {
        if !is_qualified_name(key) {
            return Err(format!("{:?} is not a valid annotation key", bounded(key)));
        }
        if seen.contains(&key.as_str()) {
            return Err(format!("annotation key {:?} is listed twice", bounded(key)));
        }
        seen.push(key);
    }
    let cache_type = match raw.cache_type.as_str() {
        "Token" => TokenCacheType::Token,
        "ServiceAccount" => TokenCacheType::ServiceAccount,
        "" => return Err("cacheType is required (Token or ServiceAccount)".into()),
        other => {
            return Err(format!(
                "cacheType {:?} is not Token or ServiceAccount",
                bounded(other)
            ))
        }
    };
    Ok(TokenAttributes {
        audience,
        require_service_account,
        required_annotation_keys: required,
        optional_annotation_keys: optional,
        cache_type,
    })
}

/// A Kubernetes qualified name (an annotation key): an optional DNS-1123 subdomain prefix and
/// `/`, then 1-63 alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric.
fn is_qualified_name(key: &str) -> bool {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    });
    let edge = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_alphanumeric());
    prefix_ok
        && !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && edge(name.bytes().next())
        && edge(name.bytes().last())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
