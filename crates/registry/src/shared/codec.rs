//! What the shared cache stores, as small JSON values, and their validation on the way back:
//! another replica (or whoever else can write to the server) wrote them, so they are read like
//! registry content: bounded, digests checked, platforms validated field by field.

use serde::{Deserialize, Serialize};

use crate::platform::{WireFields, MAX_PLATFORMS};
use crate::Platform;

/// Longest media type kept from the shared cache.
const MAX_MEDIA_TYPE: usize = 128;

/// A tag's (or digest reference's) manifest digest, and when it stops being fresh (Unix ms).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagValue {
    #[serde(rename = "d")]
    pub digest: String,
    #[serde(rename = "e")]
    pub expires_unix_ms: u64,
}

/// The platforms of a manifest digest (immutable).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DigestValue {
    #[serde(rename = "m")]
    pub media_type: String,
    #[serde(rename = "p")]
    pub platforms: Vec<Platform>,
}

impl TagValue {
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let value: Self = serde_json::from_slice(bytes).ok()?;
        crate::reference::validate_digest(&value.digest).ok()?;
        Some(value)
    }
}

impl DigestValue {
    /// The value, if every field is one a registry could have sent us.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let value: Self = serde_json::from_slice(bytes).ok()?;
        if value.media_type.len() > MAX_MEDIA_TYPE
            || value.media_type.chars().any(char::is_control)
            || value.platforms.len() > MAX_PLATFORMS
        {
            return None;
        }
        let mut platforms = value
            .platforms
            .iter()
            .map(|p| {
                Platform::from_wire(WireFields {
                    os: &p.os,
                    architecture: &p.architecture,
                    variant: p.variant.as_deref(),
                    os_version: p.os_version.as_deref(),
                    os_features: &[],
                })
                .ok()
            })
            .collect::<Option<Vec<_>>>()?;
        platforms.sort();
        platforms.dedup();
        Some(Self {
            media_type: value.media_type,
            platforms,
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

impl TagValue {
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_hostile_ones_are_refused() {
        let tag = TagValue {
            digest: format!("sha256:{}", "ab".repeat(32)),
            expires_unix_ms: 42,
        };
        assert_eq!(TagValue::decode(&tag.encode()), Some(tag));
        let platforms = DigestValue {
            media_type: crate::manifest::OCI_INDEX.to_owned(),
            platforms: vec![
                Platform::new("linux", "amd64", None),
                Platform::new("windows", "amd64", None).with_os_version(Some("10.0.20348.2227")),
            ],
        };
        let back = DigestValue::decode(&platforms.encode()).unwrap();
        assert_eq!(back.platforms.len(), 2);
        for hostile in [
            &br#"{"d":"not a digest","e":1}"#[..],
            br#"{"d":"sha256:zz","e":1}"#,
            b"\xff\xfe",
            br#"{"m":"x","p":[{"os":"linux","architecture":""}]}"#,
            br#"{"m":"x","p":[{"os":"linux","architecture":"amd 64"}]}"#,
            br#"{"m":"x\u0007","p":[]}"#,
        ] {
            assert!(TagValue::decode(hostile).is_none() || hostile.starts_with(b"{\"m\""));
            assert!(DigestValue::decode(hostile).is_none(), "{hostile:?}");
        }
        let many = DigestValue {
            media_type: "x".into(),
            platforms: (0..65)
                .map(|i| Platform::new("linux", format!("a{i}"), None))
                .collect(),
        };
        assert!(DigestValue::decode(&many.encode()).is_none());
    }
}
