//! A platform an image can run on: `os/architecture[/variant]`, and the validation of the fields
//! a registry sends for one (a registry is named by any pod author: its strings are hostile).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest `os`, `architecture` or `variant` accepted from a registry. Real values (`linux`,
/// `windows`, `ppc64le`, `loong64`, `riscv64`, `v7`) are a few characters; 32 leaves room for
/// the unusual ones without letting a registry park megabytes in the cache.
pub const MAX_FIELD_LEN: usize = 32;
/// Longest `os.version` accepted (Windows builds look like `10.0.20348.2227`).
pub const MAX_OS_VERSION_LEN: usize = 64;
/// Most `os.features` entries accepted on one platform (each at most [`MAX_FIELD_LEN`]); they
/// are checked, not kept.
pub const MAX_OS_FEATURES: usize = 8;
/// Most distinct platforms one image may declare. Real multi-platform images have about ten
/// (Windows images a few more, one per `os.version`).
pub const MAX_PLATFORMS: usize = 64;

/// One platform of an image, as found in an index entry or an image config.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Platform {
    /// `linux`, `windows`, ... (may be empty when the registry does not say).
    pub os: String,
    /// `amd64`, `arm64`, `arm`, `s390x`, ...
    pub architecture: String,
    /// `v7`, `v8`, ... for ARM; `None` when absent or empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// `os.version` (Windows builds, matched against `node.kubernetes.io/windows-build`);
    /// `None` when absent or empty. Not part of the displayed form.
    #[serde(
        default,
        rename = "os.version",
        skip_serializing_if = "Option::is_none"
    )]
    pub os_version: Option<String>,
}

/// The architecture of [`Platform::any`]: never one a registry can send (`*` is refused by
/// [`Platform::from_wire`]), only what a platform override (`platforms: ["*"]`) says.
pub const ANY_ARCH: &str = "*";

impl Platform {
    /// Runs anywhere: an image a platform override declares arch-neutral. Displayed as `*`.
    pub fn any() -> Self {
        Self::new("", ANY_ARCH, None)
    }

    /// Whether this is [`Platform::any`].
    pub fn is_any(&self) -> bool {
        self.architecture == ANY_ARCH && self.os.is_empty()
    }

    /// A platform from its parts; an empty variant is stored as `None`.
    pub fn new(
        os: impl Into<String>,
        architecture: impl Into<String>,
        variant: Option<&str>,
    ) -> Self {
        Self {
            os: os.into(),
            architecture: architecture.into(),
            variant: variant.filter(|v| !v.is_empty()).map(str::to_owned),
            os_version: None,
        }
    }

    /// The same platform with `os.version`; an empty one is stored as `None`.
    pub fn with_os_version(mut self, os_version: Option<&str>) -> Self {
        self.os_version = os_version.filter(|v| !v.is_empty()).map(str::to_owned);
        self
    }

    /// A platform from the fields a registry sent (an index entry's `platform`, an image
    /// config), validated: `os`, `architecture` and `variant` at most [`MAX_FIELD_LEN`] bytes of
    /// `[A-Za-z0-9._-]`, stored lower-cased (as containerd normalizes them); `os.version` at
    /// most [`MAX_OS_VERSION_LEN`] of the same characters, kept as sent; at most
    /// [`MAX_OS_FEATURES`] `os.features`, checked like `os` and dropped. `architecture` must not
    /// be empty.
    pub fn from_wire(fields: WireFields<'_>) -> Result<Self, InvalidPlatform> {
        let WireFields {
            os,
            architecture,
            variant,
            os_version,
            os_features,
        } = fields;
        if architecture.is_empty() {
            return Err(InvalidPlatform::new("architecture", "is empty".into()));
        }
        check("os", os, MAX_FIELD_LEN)?;
        check("architecture", architecture, MAX_FIELD_LEN)?;
        if let Some(variant) = variant {
            check("variant", variant, MAX_FIELD_LEN)?;
        }
        if let Some(os_version) = os_version {
            check("os.version", os_version, MAX_OS_VERSION_LEN)?;
        }
        if os_features.len() > MAX_OS_FEATURES {
            return Err(InvalidPlatform::new(
                "os.features",
                format!(
                    "has {} entries (at most {MAX_OS_FEATURES})",
                    os_features.len()
                ),
            ));
        }
        for feature in os_features {
            check("os.features", feature, MAX_FIELD_LEN)?;
        }
        let variant = variant.map(str::to_ascii_lowercase);
        Ok(Self::new(
            os.to_ascii_lowercase(),
            architecture.to_ascii_lowercase(),
            variant.as_deref(),
        )
        .with_os_version(os_version))
    }

    /// Bytes this platform holds, its strings included (for the cache's byte bound).
    pub fn weight(&self) -> usize {
        let strings = self.os.len()
            + self.architecture.len()
            + self.variant.as_ref().map_or(0, String::len)
            + self.os_version.as_ref().map_or(0, String::len);
        std::mem::size_of::<Self>().saturating_add(strings)
    }
}

/// The platform fields as a registry sent them, borrowed from the parsed body.
#[derive(Clone, Copy, Debug, Default)]
pub struct WireFields<'a> {
    pub os: &'a str,
    pub architecture: &'a str,
    pub variant: Option<&'a str>,
    pub os_version: Option<&'a str>,
    pub os_features: &'a [String],
}

/// A platform field a registry sent that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("platform field {field} {reason}")]
pub struct InvalidPlatform {
    /// `os`, `architecture`, `variant`, `os.version` or `os.features`.
    pub field: &'static str,
    /// Why, quoting at most a short prefix of the value.
    pub reason: String,
}

impl InvalidPlatform {
    fn new(field: &'static str, reason: String) -> Self {
        Self { field, reason }
    }
}

fn check(field: &'static str, value: &str, max: usize) -> Result<(), InvalidPlatform> {
    if value.len() > max {
        return Err(InvalidPlatform::new(
            field,
            format!("is {} bytes long (at most {max})", value.len()),
        ));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if !value.chars().all(allowed) {
        return Err(InvalidPlatform::new(
            field,
            format!("{value:?} has characters outside [A-Za-z0-9._-]"),
        ));
    }
    Ok(())
}

/// `os/architecture[/variant]`; without an OS (some registries omit it), `architecture[/variant]`.
impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.os.is_empty() {
            write!(f, "{}/", self.os)?;
        }
        write!(f, "{}", self.architecture)?;
        if let Some(variant) = &self.variant {
            write!(f, "/{variant}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn displays_with_and_without_variant() {
        assert_eq!(
            Platform::new("linux", "arm", Some("v7")).to_string(),
            "linux/arm/v7"
        );
        assert_eq!(
            Platform::new("linux", "amd64", Some("")).to_string(),
            "linux/amd64"
        );
        assert_eq!(
            Platform::new("windows", "amd64", None).to_string(),
            "windows/amd64"
        );
        assert_eq!(Platform::new("", "amd64", None).to_string(), "amd64");
        assert_eq!(Platform::new("", "arm", Some("v7")).to_string(), "arm/v7");
        let windows = Platform::new("windows", "amd64", None).with_os_version(Some("10.0.20348.1"));
        assert_eq!(windows.to_string(), "windows/amd64");
        assert_eq!(windows.os_version.as_deref(), Some("10.0.20348.1"));
        assert_eq!(
            Platform::new("linux", "amd64", None).with_os_version(Some("")),
            Platform::new("linux", "amd64", None)
        );
    }

    #[test]
    fn wire_fields_are_validated() {
        let long = "a".repeat(MAX_FIELD_LEN + 1);
        let long_version = "1".repeat(MAX_OS_VERSION_LEN + 1);
        let features: Vec<String> = (0..=MAX_OS_FEATURES).map(|i| format!("f{i}")).collect();
        let bad_feature = vec!["win32k".to_owned(), "a b".to_owned()];
        let ok = |os, architecture, variant| WireFields {
            os,
            architecture,
            variant,
            ..WireFields::default()
        };
        // (fields, expected platform or the refused field)
        let cases: Vec<(WireFields<'_>, Result<&str, &str>)> = vec![
            (ok("linux", "amd64", None), Ok("linux/amd64")),
            (ok("linux", "arm", Some("v7")), Ok("linux/arm/v7")),
            (ok("Linux", "AMD64", Some("V8")), Ok("linux/amd64/v8")),
            (ok("", "riscv64", None), Ok("riscv64")),
            (ok("linux", "x86_64", Some("")), Ok("linux/x86_64")),
            (ok("linux", "", None), Err("architecture")),
            (ok("linux", &long, None), Err("architecture")),
            (ok(&long, "amd64", None), Err("os")),
            (ok("linux", "arm", Some(&long)), Err("variant")),
            (ok("linux", "amd\n64", None), Err("architecture")),
            (ok("linux", "amd64", Some("v7/x")), Err("variant")),
            (ok("lin\u{e9}x", "amd64", None), Err("os")),
            (
                WireFields {
                    os_version: Some("10.0.20348.2227"),
                    ..ok("windows", "amd64", None)
                },
                Ok("windows/amd64"),
            ),
            (
                WireFields {
                    os_version: Some(&long_version),
                    ..ok("windows", "amd64", None)
                },
                Err("os.version"),
            ),
            (
                WireFields {
                    os_features: &features,
                    ..ok("windows", "amd64", None)
                },
                Err("os.features"),
            ),
            (
                WireFields {
                    os_features: &bad_feature,
                    ..ok("windows", "amd64", None)
                },
                Err("os.features"),
            ),
        ];
        for (fields, expected) in cases {
            let got = Platform::from_wire(fields)
                .map(|p| p.to_string())
                .map_err(|e| e.field);
            assert_eq!(got.as_deref().map_err(|e| *e), expected, "{fields:?}");
        }
    }

    #[test]
    fn an_invalid_value_is_quoted_short() {
        let huge = "x".repeat(4 << 20);
        let error = Platform::from_wire(WireFields {
            os: "linux",
            architecture: &huge,
            ..WireFields::default()
        })
        .unwrap_err();
        assert!(error.to_string().len() < 100, "{error}");
        let odd = Platform::from_wire(WireFields {
            os: "linux",
            architecture: "a\u{1b}[31m",
            ..WireFields::default()
        })
        .unwrap_err();
        assert!(!odd.to_string().contains('\u{1b}'), "{odd}");
    }

    #[test]
    fn the_os_version_is_kept_as_sent() {
        let platform = Platform::from_wire(WireFields {
            os: "windows",
            architecture: "amd64",
            os_version: Some("10.0.17763.5329"),
            ..WireFields::default()
        })
        .unwrap();
        assert_eq!(platform.os_version.as_deref(), Some("10.0.17763.5329"));
        assert!(platform.weight() > std::mem::size_of::<Platform>());
    }
}
