//! The two wire formats of the lookup endpoint, each a pure function from a request body to
//! the keys and from the answers to a response body:
//!
//! - Gatekeeper's external data (`externaldata.gatekeeper.sh/v1beta1`): a `ProviderRequest`
//!   `{"request":{"keys":[...]}}` is answered with a `ProviderResponse` holding one item per key
//!   sent, in order, the key echoed as sent, `value` `{"platforms":[...],"digest":"..."}` or a
//!   per-key `error` with a class prefix, `idempotent: true`; `systemError` only when the whole
//!   request fails.
//! - Kyverno (`apiCall` with `method: POST`, CEL `http.Post`): `{"images":[...]}` is answered
//!   with `{"images":{ref:{"platforms","digest","error"}},"common":[...],"architectures":[...],
//!   "complete":bool}` (`architectures`: those of `common`, for policies that compare a pod's
//!   `kubernetes.io/arch` without parsing platform strings).

use std::borrow::Cow;
use std::collections::BTreeMap;

use bytes::Bytes;
use noe_core::Platform;
use noe_registry::cache::Digest;
use serde::{Deserialize, Serialize};

/// Gatekeeper's external-data API version, in requests and responses.
pub const GATEKEEPER_API_VERSION: &str = "externaldata.gatekeeper.sh/v1beta1";

/// Keys (images) one request may name at most.
pub const MAX_KEYS: usize = 256;

/// Why a whole request is refused (400): the body is not the engine's request, or names too
/// many keys.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Invalid {
    #[error("the body is not a {expected}: {reason}")]
    Malformed {
        expected: &'static str,
        reason: String,
    },
    #[error("apiVersion {found:?} is not {GATEKEEPER_API_VERSION}")]
    ApiVersion { found: String },
    #[error("kind {found:?} is not ProviderRequest")]
    Kind { found: String },
    #[error("{count} keys, at most {MAX_KEYS} per request")]
    TooManyKeys { count: usize },
}

/// A key as sent: borrowed from the request body, owned only when the body escaped one of its
/// characters.
pub type Key<'a> = Cow<'a, str>;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProviderRequest<'a> {
    #[serde(default, borrow)]
    api_version: Cow<'a, str>,
    #[serde(default, borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    request: ProviderRequestBody<'a>,
}

#[derive(Deserialize)]
struct ProviderRequestBody<'a> {
    #[serde(default, borrow)]
    keys: Bounded<'a>,
}

#[derive(Deserialize)]
struct KyvernoRequest<'a> {
    #[serde(default, borrow)]
    images: Bounded<'a>,
}

/// A list of strings that stops collecting past [`MAX_KEYS`] (a 1 MiB body of short strings
/// holds many more), remembering how many there were.
#[derive(Default)]
struct Bounded<'a> {
    keys: Vec<Key<'a>>,
    count: usize,
}

/// One string of a [`Bounded`] list, borrowed from the body when it holds no escape.
struct Borrowed<'a>(Key<'a>);

impl<'de> Deserialize<'de> for Borrowed<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Borrowed<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                v: &'de str,
            ) -> Result<Self::Value, E> {
                Ok(Borrowed(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Borrowed(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Borrowed(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Bounded<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = Bounded<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of strings")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Bounded<'a>, A::Error> {
                let mut bounded = Bounded::default();
                while let Some(Borrowed(key)) = seq.next_element::<Borrowed<'de>>()? {
                    bounded.count = bounded.count.saturating_add(1);
                    if bounded.keys.len() < MAX_KEYS {
                        bounded.keys.push(key);
                    }
                }
                Ok(bounded)
            }
        }
        deserializer.deserialize_seq(Visitor(std::marker::PhantomData))
    }
}

impl<'a> Bounded<'a> {
    fn keys(self) -> Result<Vec<Key<'a>>, Invalid> {
        if self.count > MAX_KEYS {
            return Err(Invalid::TooManyKeys { count: self.count });
        }
        Ok(self.keys)
    }
}

/// The keys of a Gatekeeper `ProviderRequest`, as sent.
pub fn gatekeeper_keys(body: &[u8]) -> Result<Vec<Key<'_>>, Invalid> {
    let request: ProviderRequest =
        serde_json::from_slice(body).map_err(|error| Invalid::Malformed {
            expected: "ProviderRequest",
            reason: error.to_string(),
        })?;
    if request.api_version != GATEKEEPER_API_VERSION {
        return Err(Invalid::ApiVersion {
            found: cut(&request.api_version),
        });
    }
    if request.kind != "ProviderRequest" {
        return Err(Invalid::Kind {
            found: cut(&request.kind),
        });
    }
    request.request.keys.keys()
}

/// The images of a Kyverno request, as sent.
pub fn kyverno_keys(body: &[u8]) -> Result<Vec<Key<'_>>, Invalid> {
    let request: KyvernoRequest =
        serde_json::from_slice(body).map_err(|error| Invalid::Malformed {
            expected: r#"{"images": [...]} object"#,
            reason: error.to_string(),
        })?;
    request.images.keys()
}

/// What is known of one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyAnswer {
    Found {
        platforms: std::sync::Arc<[Platform]>,
        /// `sha256:...`; empty when a platform override answered.
        digest: Digest,
    },
    /// `class: message` (see [`super::images::KeyError`]).
    Failed(String),
}

/// Platforms serialized as their strings (`linux/arm64/v8`), written straight into the answer.
#[derive(Clone, Copy)]
struct Shown<'a>(&'a [Platform]);

impl Serialize for Shown<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct One<'a>(&'a Platform);
        impl Serialize for One<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self.0)
            }
        }
        serializer.collect_seq(self.0.iter().map(One))
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ProviderResponse<'a> {
    api_version: &'static str,
    kind: &'static str,
    response: ResponseBody<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponseBody<'a> {
    idempotent: bool,
    /// A whole-request failure has no item.
    items: [(); 0],
    #[serde(skip_serializing_if = "str::is_empty")]
    system_error: &'a str,
}

/// Bytes of an answer item besides its strings (`{"key":…,"value":{"platforms":[…],
/// "digest":…}}`), to size the answer once.
const ITEM_OVERHEAD: usize = 48;
/// Bytes of one platform string besides its text (quotes, separators).
const PLATFORM_OVERHEAD: usize = 6;
/// Distinct platform lists one answer remembers having written (images mostly share a few).
const MAX_LISTS_REUSED: usize = 8;

/// The `ProviderResponse` for `keys` (as sent, repeats included) and `answer` (what is known
/// of the `i`th key), written straight into one buffer: the keys, platforms, digests and errors
/// escaped as JSON strings, no intermediate structure per key.
pub fn gatekeeper_response<'a>(
    keys: &[impl AsRef<str>],
    answer: impl Fn(usize) -> Option<&'a KeyAnswer>,
) -> Bytes {
    const HEAD: &[u8] = br#"{"apiVersion":"externaldata.gatekeeper.sh/v1beta1","kind":"ProviderResponse","response":{"idempotent":true,"items":["#;
    const NOT_ANSWERED: &str = "internal: not answered";
    let answers: Vec<Option<&KeyAnswer>> = (0..keys.len()).map(answer).collect();
    let size = keys
        .iter()
        .zip(&answers)
        .map(|(key, answer)| {
            let key = key.as_ref();
            let value = match answer {
                Some(KeyAnswer::Found { platforms, digest }) => platforms
                    .iter()
                    .map(|p| {
                        p.os.len()
                            .saturating_add(p.architecture.len())
                            .saturating_add(p.variant.as_ref().map_or(0, String::len))
                            .saturating_add(PLATFORM_OVERHEAD)
                    })
                    .fold(digest.text_len(), usize::saturating_add),
                Some(KeyAnswer::Failed(error)) => error.len(),
                None => NOT_ANSWERED.len(),
            };
            key.len()
                .saturating_add(value)
                .saturating_add(ITEM_OVERHEAD)
        })
        .fold(HEAD.len().saturating_add(4), usize::saturating_add);
    let mut out: Vec<u8> = Vec::with_capacity(size);
    out.extend_from_slice(HEAD);
    // Platform lists already written (the cache shares one list among the images that have it):
    // copied from where they were written rather than escaped again.
    let mut written: Vec<(&std::sync::Arc<[Platform]>, std::ops::Range<usize>)> = Vec::new();
    for (i, (key, answer)) in keys.iter().zip(&answers).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(br#"{"key":"#);
        push_string(&mut out, key.as_ref());
        match answer {
            Some(KeyAnswer::Found { platforms, digest }) => {
                out.extend_from_slice(br#","value":{"platforms":"#);
                match written
                    .iter()
                    .find(|(list, _)| std::sync::Arc::ptr_eq(list, platforms))
                {
                    Some((_, range)) => out.extend_from_within(range.clone()),
                    None => {
                        let start = out.len();
                        out.push(b'[');
                        for (j, platform) in platforms.iter().enumerate() {
                            if j > 0 {
                                out.push(b',');
                            }
                            push_platform(&mut out, platform);
                        }
                        out.push(b']');
                        if written.len() < MAX_LISTS_REUSED {
                            written.push((platforms, start..out.len()));
                        }
                    }
                }
                out.extend_from_slice(br#","digest":"#);
                push_digest(&mut out, digest);
                out.extend_from_slice(b"}}");
            }
            Some(KeyAnswer::Failed(error)) => {
                out.extend_from_slice(br#","error":"#);
                push_string(&mut out, error);
                out.push(b'}');
            }
            None => {
                out.extend_from_slice(br#","error":"#);
                push_string(&mut out, NOT_ANSWERED);
                out.push(b'}');
            }
        }
    }
    out.extend_from_slice(b"]}}");
    Bytes::from(out)
}

/// Appends `text` as a JSON string, escaped as `serde_json` escapes it.
fn push_string(out: &mut Vec<u8>, text: &str) {
    out.push(b'"');
    push_escaped(out, text);
    out.push(b'"');
}

/// Appends a digest as a JSON string: a `sha256:` one straight from its bytes (hexadecimal
/// digits need no escaping), any other escaped.
fn push_digest(out: &mut Vec<u8>, digest: &Digest) {
    match digest.sha256_text() {
        Some(text) => {
            out.push(b'"');
            out.extend_from_slice(&text);
            out.push(b'"');
        }
        None => digest.with_text(|text| push_string(out, text)),
    }
}

/// Appends a platform's displayed form (`os/arch/variant`) as a JSON string.
fn push_platform(out: &mut Vec<u8>, platform: &Platform) {
    out.push(b'"');
    if !platform.os.is_empty() {
        push_escaped(out, &platform.os);
        out.push(b'/');
    }
    push_escaped(out, &platform.architecture);
    if let Some(variant) = &platform.variant {
        out.push(b'/');
        push_escaped(out, variant);
    }
    out.push(b'"');
}

/// Appends `text`'s characters, escaped for a JSON string: `"`, `\` and control characters
/// (short forms where JSON has them, `\u00XX` otherwise); everything else as it is.
fn push_escaped(out: &mut Vec<u8>, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = text.as_bytes();
    // Without an early exit, so the check runs on whole vectors (keys and digests are short).
    let plain = !bytes.iter().fold(false, |seen, &b| {
        seen | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if plain {
        out.extend_from_slice(bytes);
        return;
    }
    for &b in bytes {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..=0x1f => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX.get(usize::from(b >> 4)).copied().unwrap_or(b'0'),
                HEX.get(usize::from(b & 0xf)).copied().unwrap_or(b'0'),
            ]),
            _ => out.push(b),
        }
    }
}

/// A `ProviderResponse` whose whole request failed: no item, `systemError` set.
pub fn gatekeeper_system_error(error: &str) -> Bytes {
    to_json(&ProviderResponse {
        api_version: GATEKEEPER_API_VERSION,
        kind: "ProviderResponse",
        response: ResponseBody {
            idempotent: true,
            items: [],
            system_error: error,
        },
    })
}

#[derive(Serialize)]
struct KyvernoResponse<'a> {
    images: BTreeMap<&'a str, KyvernoImage<'a>>,
    common: Shown<'a>,
    architectures: Vec<&'a str>,
    complete: bool,
}

#[derive(Serialize)]
struct KyvernoImage<'a> {
    platforms: Shown<'a>,
    digest: String,
    error: &'a str,
}

/// The Kyverno answer: every image with its platforms, digest and error (empty strings and
/// lists when unknown), the platforms common to every image whose lookup succeeded, and
/// whether every lookup did.
pub fn kyverno_response<'a>(
    keys: &'a [impl AsRef<str>],
    answer: impl Fn(usize) -> Option<&'a KeyAnswer>,
) -> Bytes {
    let mut images = BTreeMap::new();
    let mut found: Vec<&[Platform]> = Vec::new();
    let mut complete = true;
    for (i, key) in keys.iter().enumerate() {
        let image = match answer(i) {
            Some(KeyAnswer::Found { platforms, digest }) => {
                found.push(platforms);
                KyvernoImage {
                    platforms: Shown(platforms),
                    digest: digest.to_string(),
                    error: "",
                }
            }
            Some(KeyAnswer::Failed(error)) => {
                complete = false;
                KyvernoImage {
                    platforms: Shown(&[]),
                    digest: String::new(),
                    error,
                }
            }
            None => {
                complete = false;
                KyvernoImage {
                    platforms: Shown(&[]),
                    digest: String::new(),
                    error: "internal: not answered",
                }
            }
        };
        images.insert(key.as_ref(), image);
    }
    let common = common(&found);
    let mut architectures: Vec<&str> = Vec::new();
    for platform in &common {
        if !architectures.contains(&platform.architecture.as_str()) {
            architectures.push(&platform.architecture);
        }
    }
    to_json(&KyvernoResponse {
        images,
        common: Shown(&common),
        architectures,
        complete,
    })
}

/// A refused Kyverno request's body.
pub fn kyverno_error(error: &str) -> Bytes {
    to_json(&serde_json::json!({ "error": error }))
}

/// The platforms every list holds (an image whose platforms are `*`, arch-neutral, constrains
/// nothing), in the order of the first constraining list; empty without one.
pub fn common(lists: &[&[Platform]]) -> Vec<Platform> {
    let constraining: Vec<&[Platform]> = lists
        .iter()
        .copied()
        .filter(|list| !list.iter().any(Platform::is_any))
        .collect();
    let Some((first, rest)) = constraining.split_first() else {
        return Vec::new();
    };
    let mut common: Vec<Platform> = Vec::new();
    for platform in *first {
        if rest.iter().all(|list| list.contains(platform)) && !common.contains(platform) {
            common.push(platform.clone());
        }
    }
    common
}

fn to_json(value: &impl Serialize) -> Bytes {
    // Serializing these types (strings, lists, maps with string keys) cannot fail.
    Bytes::from(serde_json::to_vec(value).unwrap_or_default())
}

/// Text from the wire shown in an error: at most 64 characters.
fn cut(text: &str) -> String {
    text.chars().take(64).collect()
}

/// The error classes of per-key errors (`class: message`).
pub mod class {
    pub const INVALID: &str = "invalid";
    pub const NOT_FOUND: &str = "notfound";
    pub const AUTH: &str = "auth";
    pub const TIMEOUT: &str = "timeout";
    pub const UNAVAILABLE: &str = "unavailable";
    pub const REGISTRY: &str = "registry";
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn platform(text: &str) -> Platform {
        let parts: Vec<&str> = text.split('/').collect();
        Platform::new(parts[0], parts[1], parts.get(2).copied())
    }

    #[test]
    fn gatekeeper_requests() {
        let ok = br#"{"apiVersion":"externaldata.gatekeeper.sh/v1beta1","kind":"ProviderRequest","request":{"keys":["nginx","nginx"," x "]}}"#;
        assert_eq!(gatekeeper_keys(ok).unwrap(), ["nginx", "nginx", " x "]);
        // Keys are borrowed from the body, decoded when escaped.
        let escaped = br#"{"apiVersion":"externaldata.gatekeeper.sh/v1beta1","kind":"ProviderRequest","request":{"keys":["plain","a\"b\u00e9"]}}"#;
        let keys = gatekeeper_keys(escaped).unwrap();
        assert!(matches!(keys[0], Cow::Borrowed("plain")), "{keys:?}");
        assert_eq!(keys[1], "a\"b\u{e9}");
        let empty = br#"{"apiVersion":"externaldata.gatekeeper.sh/v1beta1","kind":"ProviderRequest","request":{}}"#;
        assert!(gatekeeper_keys(empty).unwrap().is_empty());
        let cases: &[(&[u8], &str)] = &[
            (b"", "not a ProviderRequest"),
            (b"[]", "not a ProviderRequest"),
            (br#"{"apiVersion":"externaldata.gatekeeper.sh/v1alpha1","kind":"ProviderRequest","request":{"keys":[]}}"#, "v1alpha1"),
            (br#"{"apiVersion":"externaldata.gatekeeper.sh/v1beta1","kind":"Pod","request":{"keys":[]}}"#, "kind \"Pod\""),
            (br#"{"apiVersion":"externaldata.gatekeeper.sh/v1beta1","kind":"ProviderRequest","request":{"keys":[1]}}"#, "not a ProviderRequest"),
        ];
        for (body, want) in cases {
            let error = gatekeeper_keys(body).unwrap_err().to_string();
            assert!(error.contains(want), "{error}");
        }
    }

    #[test]
    fn at_most_256_keys() {
        let keys = |n: usize| {
            let keys: Vec<String> = (0..n).map(|i| format!("\"i{i}\"")).collect();
            format!(r#"{{"images":[{}]}}"#, keys.join(","))
        };
        assert_eq!(kyverno_keys(keys(256).as_bytes()).unwrap().len(), 256);
        assert_eq!(
            kyverno_keys(keys(257).as_bytes()).unwrap_err(),
            Invalid::TooManyKeys { count: 257 }
        );
        assert!(kyverno_keys(b"{}").unwrap().is_empty());
        assert!(kyverno_keys(br#"{"images":"nginx"}"#).is_err());
    }

    #[test]
    fn gatekeeper_answers_every_key_as_sent() {
        let found = KeyAnswer::Found {
            platforms: Arc::from(vec![platform("linux/amd64"), platform("linux/arm64/v8")]),
            digest: "sha256:abc".into(),
        };
        let failed = KeyAnswer::Failed("notfound: gone".to_owned());
        // Another image with the same (shared) platform list: the list is copied, its digest not.
        let sharing = match &found {
            KeyAnswer::Found { platforms, .. } => KeyAnswer::Found {
                platforms: platforms.clone(),
                digest: "sha256:c".into(),
            },
            KeyAnswer::Failed(_) => unreachable!(),
        };
        let keys = vec![
            "a".to_owned(),
            "b".to_owned(),
            "a".to_owned(),
            "c".to_owned(),
        ];
        let body = gatekeeper_response(&keys, |i| match keys[i].as_str() {
            "a" => Some(&found),
            "c" => Some(&sharing),
            _ => Some(&failed),
        });
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "apiVersion": "externaldata.gatekeeper.sh/v1beta1",
                "kind": "ProviderResponse",
                "response": {
                    "idempotent": true,
                    "items": [
                        {"key": "a", "value": {"platforms": ["linux/amd64", "linux/arm64/v8"], "digest": "sha256:abc"}},
                        {"key": "b", "error": "notfound: gone"},
                        {"key": "a", "value": {"platforms": ["linux/amd64", "linux/arm64/v8"], "digest": "sha256:abc"}},
                        {"key": "c", "value": {"platforms": ["linux/amd64", "linux/arm64/v8"], "digest": "sha256:c"}},
                    ]
                }
            })
        );
        let system: serde_json::Value =
            serde_json::from_slice(&gatekeeper_system_error("bad")).unwrap();
        assert_eq!(system["response"]["systemError"], "bad");
        assert_eq!(system["response"]["items"], serde_json::json!([]));
    }

    /// The answer is written by hand: its strings are escaped exactly as `serde_json` escapes
    /// them, hostile ones included, and it parses as the structure it stands for.
    #[test]
    fn hand_written_answers_escape_like_serde_json() {
        let hostile = [
            "",
            "nginx:1.27",
            "quote\"back\\slash",
            "controls \u{0}\u{8}\u{9}\u{a}\u{c}\u{d}\u{1b}\u{1f}\u{7f}",
            "é ✓ \u{2028} 🦀",
        ];
        for text in hostile {
            let mut out = Vec::new();
            push_string(&mut out, text);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(text).unwrap(),
                "{text:?}"
            );
        }
        let odd = Platform::new("li\"nux", "arm\n64", Some("v\u{1}8"));
        let mut out = Vec::new();
        push_platform(&mut out, &odd);
        assert_eq!(out, serde_json::to_vec(&odd.to_string()).unwrap());
        let mut out = Vec::new();
        push_platform(&mut out, &Platform::new("", "amd64", None));
        assert_eq!(out, br#""amd64""#);

        let found = KeyAnswer::Found {
            platforms: Arc::from(vec![odd.clone(), platform("linux/amd64")]),
            digest: "sha256:\"d".into(),
        };
        let keys: Vec<String> = hostile.iter().map(|k| (*k).to_owned()).collect();
        let body = gatekeeper_response(&keys, |i| (!keys[i].is_empty()).then_some(&found));
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let items = json["response"]["items"].as_array().unwrap();
        assert_eq!(items.len(), hostile.len());
        for (item, key) in items.iter().zip(hostile) {
            assert_eq!(item["key"], key);
        }
        assert_eq!(items[0]["error"], "internal: not answered");
        assert_eq!(
            items[1]["value"],
            serde_json::json!({"platforms": [odd.to_string(), "linux/amd64"], "digest": "sha256:\"d"})
        );
        assert!(json["response"].get("systemError").is_none());
    }

    #[test]
    fn kyverno_answers_and_common_platforms() {
        let a = KeyAnswer::Found {
            platforms: Arc::from(vec![platform("linux/amd64"), platform("linux/arm64")]),
            digest: "sha256:a".into(),
        };
        let b = KeyAnswer::Found {
            platforms: Arc::from(vec![platform("linux/arm64"), platform("linux/s390x")]),
            digest: "sha256:b".into(),
        };
        let neutral = KeyAnswer::Found {
            platforms: Arc::from(vec![Platform::any()]),
            digest: "".into(),
        };
        let failed = KeyAnswer::Failed("auth: denied".to_owned());
        let keys: Vec<String> = ["a", "b", "n"].iter().map(|k| (*k).to_owned()).collect();
        let lookup = |key: &str| match key {
            "a" => Some(&a),
            "b" => Some(&b),
            "n" => Some(&neutral),
            _ => Some(&failed),
        };
        let json: serde_json::Value =
            serde_json::from_slice(&kyverno_response(&keys, |i| lookup(&keys[i]))).unwrap();
        assert_eq!(json["common"], serde_json::json!(["linux/arm64"]));
        assert_eq!(json["architectures"], serde_json::json!(["arm64"]));
        assert_eq!(json["complete"], true);
        assert_eq!(json["images"]["a"]["digest"], "sha256:a");
        assert_eq!(json["images"]["a"]["error"], "");

        let keys: Vec<String> = ["a", "x"].iter().map(|k| (*k).to_owned()).collect();
        let json: serde_json::Value =
            serde_json::from_slice(&kyverno_response(&keys, |i| lookup(&keys[i]))).unwrap();
        assert_eq!(json["complete"], false);
        assert_eq!(json["images"]["x"]["error"], "auth: denied");
        assert_eq!(json["images"]["x"]["platforms"], serde_json::json!([]));
        assert_eq!(
            json["common"],
            serde_json::json!(["linux/amd64", "linux/arm64"])
        );
    }
}
