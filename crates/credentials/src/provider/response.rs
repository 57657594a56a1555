//! The exec protocol: `CredentialProviderRequest` out, `CredentialProviderResponse` in
//! (`credentialprovider.kubelet.k8s.io/v1`, `v1beta1`, `v1alpha1`).

use std::time::Duration;

use serde::Deserialize;

use super::config::EXEC_API_VERSIONS;
use crate::Credential;

/// What the cached answer of a plugin is keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheKeyType {
    Image,
    Registry,
    Global,
}

/// A plugin's answer.
#[derive(Clone, PartialEq, Eq, derive_more::Debug)]
pub struct ProviderResponse {
    pub cache_key_type: CacheKeyType,
    /// `None`: use the provider's `defaultCacheDuration`.
    pub cache_duration: Option<Duration>,
    /// `(pattern, credential)` in the order the plugin wrote them.
    #[debug("{:?}", auth.iter().map(|(key, _)| key).collect::<Vec<_>>())]
    pub auth: Vec<(String, Credential)>,
}

/// Why a plugin's answer is discarded. Never carries its content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResponseError {
    #[error("response is not valid JSON (line {line}, column {column})")]
    Malformed { line: usize, column: usize },
    #[error("response has apiVersion {found:?}, not a credentialprovider.kubelet.k8s.io version")]
    ApiVersion { found: String },
    #[error("response has kind {found:?}, expected CredentialProviderResponse")]
    Kind { found: String },
    #[error("response has cacheKeyType {found:?}, expected Image, Registry or Global")]
    CacheKeyType { found: String },
    #[error("response has an invalid cacheDuration")]
    CacheDuration,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawResponse {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    cache_key_type: String,
    #[serde(default)]
    cache_duration: Option<String>,
    #[serde(default)]
    auth: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Deserialize)]
struct RawAuth {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
}

/// The request sent on the plugin's stdin.
pub fn request_body(api_version: &str, image: &str) -> Vec<u8> {
    request_body_with(api_version, image, None)
}

/// The request sent on the plugin's stdin, with the pod's service account token and the
/// annotations the provider asked for, as the kubelet sends them (`serviceAccountToken`,
/// `serviceAccountAnnotations`, both left out when empty).
pub fn request_body_with(
    api_version: &str,
    image: &str,
    service_account: Option<(&str, &std::collections::BTreeMap<String, String>)>,
) -> Vec<u8> {
    let mut body = serde_json::json!({
        "apiVersion": api_version,
        "kind": "CredentialProviderRequest",
        "image": image,
    });
    if let (Some((token, annotations)), Some(object)) = (service_account, body.as_object_mut()) {
        if !token.is_empty() {
            object.insert("serviceAccountToken".into(), token.into());
        }
        if !annotations.is_empty() {
            object.insert(
                "serviceAccountAnnotations".into(),
                serde_json::json!(annotations),
            );
        }
    }
    body.to_string().into_bytes()
}

/// Parse and validate a plugin's stdout.
pub fn parse_response(bytes: &[u8]) -> Result<ProviderResponse, ResponseError> {
    let raw: RawResponse = serde_json::from_slice(bytes).map_err(|e| ResponseError::Malformed {
        line: e.line(),
        column: e.column(),
    })?;
    if !EXEC_API_VERSIONS.contains(&raw.api_version.as_str()) {
        return Err(ResponseError::ApiVersion {
            found: truncate(raw.api_version),
        });
    }
    if raw.kind != "CredentialProviderResponse" {
        return Err(ResponseError::Kind {
            found: truncate(raw.kind),
        });
    }
    let cache_key_type = match raw.cache_key_type.as_str() {
        "Image" => CacheKeyType::Image,
        "Registry" => CacheKeyType::Registry,
        "Global" => CacheKeyType::Global,
        _ => {
            return Err(ResponseError::CacheKeyType {
                found: truncate(raw.cache_key_type),
            })
        }
    };
    let cache_duration = match raw.cache_duration.as_deref() {
        None => None,
        Some(text) => Some(crate::duration::parse(text).map_err(|_| ResponseError::CacheDuration)?),
    };
    let mut auth = Vec::new();
    for (pattern, value) in raw.auth.unwrap_or_default() {
        // A malformed entry is dropped, the others are kept.
        let Ok(entry) = serde_json::from_value::<RawAuth>(value) else {
            continue;
        };
        if entry.username.is_empty() && entry.password.is_empty() {
            continue;
        }
        auth.push((
            pattern,
            Credential::Basic {
                username: entry.username,
                password: entry.password,
            },
        ));
    }
    Ok(ProviderResponse {
        cache_key_type,
        cache_duration,
        auth,
    })
}

fn truncate(mut s: String) -> String {
    if s.len() > 64 {
        let mut end = 64;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn responses_table() {
        let ok = |key, duration: Option<u64>, auth: &[(&str, &str, &str)]| {
            Ok(ProviderResponse {
                cache_key_type: key,
                cache_duration: duration.map(Duration::from_secs),
                auth: auth
                    .iter()
                    .map(|(p, u, pw)| {
                        (
                            (*p).to_owned(),
                            Credential::Basic {
                                username: (*u).to_owned(),
                                password: (*pw).to_owned(),
                            },
                        )
                    })
                    .collect(),
            })
        };
        let cases: Vec<(&str, Result<ProviderResponse, ResponseError>)> = vec![
            (
                r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Registry","cacheDuration":"6h","auth":{"*.dkr.ecr.*.amazonaws.com":{"username":"AWS","password":"pw"}}}"#,
                ok(
                    CacheKeyType::Registry,
                    Some(6 * 3600),
                    &[("*.dkr.ecr.*.amazonaws.com", "AWS", "pw")],
                ),
            ),
            (
                r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1beta1","kind":"CredentialProviderResponse","cacheKeyType":"Image","auth":{"gcr.io":{"username":"u","password":"p"}}}"#,
                ok(CacheKeyType::Image, None, &[("gcr.io", "u", "p")]),
            ),
            (
                r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1alpha1","kind":"CredentialProviderResponse","cacheKeyType":"Global","cacheDuration":"0s","auth":null}"#,
                ok(CacheKeyType::Global, Some(0), &[]),
            ),
            (
                r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Image","auth":{"a.io":{"username":"","password":""},"b.io":"x","c.io":{"username":"u","password":"p"}}}"#,
                ok(CacheKeyType::Image, None, &[("c.io", "u", "p")]),
            ),
            (
                r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Repository","auth":{}}"#,
                Err(ResponseError::CacheKeyType {
                    found: "Repository".into(),
                }),
            ),
            (
                r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","auth":{}}"#,
                Err(ResponseError::CacheKeyType { found: "".into() }),
            ),
            (
                r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Image","cacheDuration":"soon"}"#,
                Err(ResponseError::CacheDuration),
            ),
            (
                r#"{"apiVersion":"v1","kind":"CredentialProviderResponse","cacheKeyType":"Image"}"#,
                Err(ResponseError::ApiVersion { found: "v1".into() }),
            ),
            (
                r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"Status","cacheKeyType":"Image"}"#,
                Err(ResponseError::Kind {
                    found: "Status".into(),
                }),
            ),
        ];
        for (json, expected) in cases {
            assert_eq!(parse_response(json.as_bytes()), expected, "{json}");
        }
        assert!(matches!(
            parse_response(b"password: hunter2"),
            Err(ResponseError::Malformed { .. })
        ));
    }

    #[test]
    fn request_shape() {
        let body = request_body("credentialprovider.kubelet.k8s.io/v1", "gcr.io/p/app:1");
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"gcr.io/p/app:1"})
        );
    }

    #[test]
    fn debug_hides_passwords() {
        let response = parse_response(br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Image","auth":{"gcr.io":{"username":"u","password":"hunter2"}}}"#).unwrap();
        assert!(!format!("{response:?}").contains("hunter2"));
    }
}
