//! One entry of the learned store (docs/architecture.md, "Learned corrections"): a platform of
//! an image digest proven false, with its evidence. Its data key is a hash of the digest and
//! the platform, its value this JSON, at most [`MAX_ENTRY_BYTES`]:
//!
//! ```json
//! {"image":"registry.example/app:1","digest":"sha256:...","platform":"linux/arm64",
//!  "source":"exec-format-error","evidence":{"namespace":"shop","pod":"web-5d8f-x2v","container":"app",
//!  "node":"arm-1","message":"exec /app: exec format error","time":"2026-11-01T09:00:00Z"}}
//! ```
//!
//! Pure: parsing (a hand-edited value is refused with a reason, never a panic), the key, and
//! the bounds.

use noe_core::platform::WireFields;
use noe_core::truth::{Correction, Source};
use noe_core::Platform;
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::objects::cut;

/// The longest value of one entry (bytes of JSON).
pub const MAX_ENTRY_BYTES: usize = 1024;
/// The longest evidence message kept (bytes).
pub const MAX_MESSAGE_BYTES: usize = 256;
/// Longest image reference kept.
const MAX_IMAGE: usize = 512;
/// Longest namespace, pod, container or node name kept (object names are at most 253).
const MAX_NAME: usize = 253;

/// What proves an entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Evidence {
    /// The pod's namespace (exec format errors).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The pod.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub pod: String,
    /// The container.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub container: String,
    /// The node it ran on.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub node: String,
    /// What was read (a status message, a log line, a verification verdict), at most
    /// [`MAX_MESSAGE_BYTES`].
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When (RFC 3339, UTC): the crash's end, or the verification's.
    pub time: String,
}

/// One learned correction, as the store holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The image as the pod (or the lookup) wrote it; for people and `noe learned forget`.
    #[serde(default)]
    pub image: String,
    /// The digest the correction is for (`sha256:...`).
    pub digest: String,
    /// `os/arch[/variant]`.
    pub platform: String,
    /// `exec-format-error` or `verification`.
    pub source: Source,
    /// What proves it.
    #[serde(default)]
    pub evidence: Evidence,
}

/// Why a stored value is not used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Garbage(pub String);

/// Whether `digest` is a digest an image can have: `sha256:` and 64 lower-case hex digits, or
/// `sha512:` and 128.
pub fn is_digest(digest: &str) -> bool {
    let hex = |text: &str, len: usize| {
        text.len() == len
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    match digest.split_once(':') {
        Some(("sha256", rest)) => hex(rest, 64),
        Some(("sha512", rest)) => hex(rest, 128),
        _ => false,
    }
}

/// `os/arch[/variant]`, validated as a registry's platform fields are.
pub fn parse_platform(text: &str) -> Result<Platform, Garbage> {
    let parts: Vec<&str> = text.split('/').collect();
    let (os, architecture, variant) = match parts.as_slice() {
        [os, arch] => (*os, *arch, None),
        [os, arch, variant] if !variant.is_empty() => (*os, *arch, Some(*variant)),
        _ => return Err(Garbage("platform is not os/arch[/variant]".into())),
    };
    if os.is_empty() {
        return Err(Garbage("platform has no OS".into()));
    }
    Platform::from_wire(WireFields {
        os,
        architecture,
        variant,
        ..WireFields::default()
    })
    .map_err(|error| Garbage(error.to_string()))
}

/// The data key of the entry for `digest` and `platform`: 32 hex digits of
/// `sha256("DIGEST PLATFORM")` (a valid ConfigMap key, one per correction).
pub fn key(digest: &str, platform: &str) -> String {
    let hash = sha2::Sha256::digest(format!("{digest} {platform}").as_bytes());
    hex::encode(hash.get(..16).unwrap_or_default())
}

/// Seconds since the epoch of an RFC 3339 time.
pub fn epoch(time: &str) -> Option<i64> {
    k8s_openapi::chrono::DateTime::parse_from_rfc3339(time)
        .ok()
        .map(|time| time.timestamp())
}

/// An RFC 3339 time (UTC, seconds) from seconds since the epoch.
pub fn rfc3339(seconds: i64) -> String {
    k8s_openapi::chrono::DateTime::from_timestamp(seconds, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(k8s_openapi::chrono::SecondsFormat::Secs, true)
}

fn clean(text: &str, max: usize) -> String {
    let text: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    cut(text.trim(), max)
}

impl Entry {
    /// An entry, its strings stripped of control characters and cut to their bounds, the whole
    /// fitting [`MAX_ENTRY_BYTES`] (the message, then the image, then the names are shortened).
    pub fn new(
        image: &str,
        digest: &str,
        platform: &Platform,
        source: Source,
        evidence: Evidence,
    ) -> Self {
        let mut entry = Self {
            image: clean(image, MAX_IMAGE),
            digest: digest.to_owned(),
            platform: platform.to_string(),
            source,
            evidence: Evidence {
                namespace: clean(&evidence.namespace, MAX_NAME),
                pod: clean(&evidence.pod, MAX_NAME),
                container: clean(&evidence.container, MAX_NAME),
                node: clean(&evidence.node, MAX_NAME),
                message: clean(&evidence.message, MAX_MESSAGE_BYTES),
                time: clean(&evidence.time, 64),
            },
        };
        entry.fit();
        entry
    }

    /// Shortens the longest free-text fields until the JSON fits [`MAX_ENTRY_BYTES`].
    fn fit(&mut self) {
        for _ in 0..4 {
            let over = self.to_json().len().saturating_sub(MAX_ENTRY_BYTES);
            if over == 0 {
                return;
            }
            let field = [
                &mut self.evidence.message,
                &mut self.image,
                &mut self.evidence.pod,
                &mut self.evidence.node,
            ]
            .into_iter()
            .max_by_key(|field| field.len());
            if let Some(field) = field {
                // JSON escapes may make a byte cost more than one: cut a little more.
                let keep = field.len().saturating_sub(over.saturating_add(8));
                *field = cut(field, keep);
            }
        }
    }

    /// The stored value.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Its data key.
    pub fn key(&self) -> String {
        key(&self.digest, &self.platform)
    }

    /// Seconds since the epoch of its evidence (`i64::MIN` when unreadable: evicted first).
    pub fn time(&self) -> i64 {
        epoch(&self.evidence.time).unwrap_or(i64::MIN)
    }

    /// A stored value, checked: well-formed JSON of at most [`MAX_ENTRY_BYTES`], a digest, a
    /// platform, a known source, a readable time, and stored under its own key.
    pub fn parse(stored_key: &str, value: &str) -> Result<Self, Garbage> {
        if value.len() > MAX_ENTRY_BYTES {
            return Err(Garbage(format!(
                "value is {} bytes (at most {MAX_ENTRY_BYTES})",
                value.len()
            )));
        }
        let entry: Self = serde_json::from_str(value).map_err(|error| {
            Garbage(format!("not an entry: {}", clean(&error.to_string(), 200)))
        })?;
        if !is_digest(&entry.digest) {
            return Err(Garbage(
                "digest is not sha256:<64 hex> or sha512:<128 hex>".into(),
            ));
        }
        parse_platform(&entry.platform)?;
        if epoch(&entry.evidence.time).is_none() {
            return Err(Garbage("evidence.time is not an RFC 3339 time".into()));
        }
        if entry.key() != stored_key {
            return Err(Garbage(
                "stored under a key that is not its digest's and platform's".into(),
            ));
        }
        let fields = [
            &entry.image,
            &entry.evidence.namespace,
            &entry.evidence.pod,
            &entry.evidence.container,
            &entry.evidence.node,
            &entry.evidence.message,
        ];
        if fields
            .iter()
            .any(|field| field.chars().any(char::is_control))
        {
            return Err(Garbage("a field holds control characters".into()));
        }
        Ok(entry)
    }

    /// The correction it makes: its platform of its digest, with the evidence in words
    /// (`pod shop/web container app on node arm-1 at 2026-...: exec /app: exec format error`).
    pub fn correction(&self) -> Option<Correction> {
        let platform = parse_platform(&self.platform).ok()?;
        Some(Correction::new(
            self.digest.clone(),
            platform,
            self.source,
            &self.evidence_words(),
        ))
    }

    /// The evidence in one line.
    pub fn evidence_words(&self) -> String {
        let Evidence {
            namespace,
            pod,
            container,
            node,
            message,
            time,
        } = &self.evidence;
        let mut words = Vec::new();
        if !pod.is_empty() {
            words.push(format!("pod {namespace}/{pod}"));
        }
        if !container.is_empty() {
            words.push(format!("container {container}"));
        }
        if !node.is_empty() {
            words.push(format!("on node {node}"));
        }
        words.push(format!("at {time}"));
        let mut text = words.join(" ");
        if !message.is_empty() {
            text.push_str(": ");
            text.push_str(message);
        }
        text
    }
}
