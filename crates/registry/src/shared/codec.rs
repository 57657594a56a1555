//! What the shared cache stores, as small JSON values, and their validation on the way back:
//! another replica (or whoever else can write to the server) wrote them, so they are read like
//! registry content: bounded, digests checked, platforms validated field by field.

use serde::{Deserialize, Serialize};

use noe_core::platform::{WireFields, MAX_PLATFORMS};
use noe_core::Platform;

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

/// A platform manifest's verification (immutable: its digest names its layers).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerdictValue {
    #[serde(rename = "p")]
    pub platform: Platform,
    #[serde(rename = "r")]
    pub report: noe_core::binary::Report,
    /// Compressed layer bytes the verification read.
    #[serde(rename = "b", default)]
    pub bytes: u64,
}

impl VerdictValue {
    /// The value, if its platform validates and its report is one a verification writes.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        use noe_core::binary::{Verdict, MAX_EVIDENCE_LEN};
        let value: Self = serde_json::from_slice(bytes).ok()?;
        let p = &value.platform;
        let platform = Platform::from_wire(WireFields {
            os: &p.os,
            architecture: &p.architecture,
            variant: p.variant.as_deref(),
            os_version: p.os_version.as_deref(),
            os_features: &[],
        })
        .ok()?;
        let report = &value.report;
        let text_ok =
            |text: &str, max: usize| text.len() <= max && !text.chars().any(char::is_control);
        let consistent = match report.verdict {
            Verdict::Unverifiable => report.reason.is_some(),
            Verdict::Verified | Verdict::Mismatch => {
                report.reason.is_none() && report.machine.is_some()
            }
        };
        if !consistent
            || !text_ok(&report.evidence, MAX_EVIDENCE_LEN)
            || !report
                .program
                .as_deref()
                .is_none_or(|p| text_ok(p, noe_core::binary::path::MAX_PATH_LEN))
        {
            return None;
        }
        Some(Self { platform, ..value })
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

    #[test]
    fn verdicts_round_trip_and_inconsistent_ones_are_refused() {
        use noe_core::binary::{Reason, Report, Verdict};
        let unverifiable = VerdictValue {
            platform: Platform::new("linux", "arm64", None),
            report: Report::unverifiable(Reason::NotElf, Some("/app.jar"), "a JAR"),
            bytes: 7,
        };
        assert_eq!(
            VerdictValue::decode(&unverifiable.encode()),
            Some(unverifiable.clone())
        );
        let mut no_reason = unverifiable.clone();
        no_reason.report.reason = None;
        assert!(VerdictValue::decode(&no_reason.encode()).is_none());
        let mut mismatch_without_machine = unverifiable.clone();
        mismatch_without_machine.report.reason = None;
        mismatch_without_machine.report.verdict = Verdict::Mismatch;
        assert!(VerdictValue::decode(&mismatch_without_machine.encode()).is_none());
        let mut long = unverifiable.clone();
        long.report.evidence = "x".repeat(1000);
        assert!(VerdictValue::decode(&long.encode()).is_none());
        let mut control = unverifiable;
        control.report.evidence = "a\u{7}b".into();
        assert!(VerdictValue::decode(&control.encode()).is_none());
        assert!(VerdictValue::decode(br#"{"p":{"os":"linux","architecture":"a b"},"r":{"verdict":"verified","evidence":""}}"#).is_none());
    }
}
