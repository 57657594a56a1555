//! A platform an image can run on: `os/architecture[/variant]`.

use std::fmt;

use serde::{Deserialize, Serialize};

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
}

impl Platform {
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
        }
    }
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
    }
}
