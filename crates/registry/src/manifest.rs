//! Manifests, indexes and image configs: media types, the `Accept` list, and the pure parsing that
//! turns a body into index entries or a config descriptor, and a config blob into a platform.

use std::collections::BTreeMap;

use serde::Deserialize;
use sha2::{Digest as _, Sha256, Sha512};

use noe_core::platform::WireFields;
use noe_core::Platform;

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
const DOCKER_SCHEMA1: &str = "application/vnd.docker.distribution.manifest.v1+json";
const DOCKER_SCHEMA1_SIGNED: &str = "application/vnd.docker.distribution.manifest.v1+prettyjws";
const REFERENCE_TYPE: &str = "vnd.docker.reference.type";
const ATTESTATION: &str = "attestation-manifest";

/// The four manifest types we understand; never schema1 (a registry converts a list to schema1
/// when `Accept` lacks the list type, losing every platform but one).
pub const ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
application/vnd.docker.distribution.manifest.list.v2+json, \
application/vnd.oci.image.manifest.v1+json, \
application/vnd.docker.distribution.manifest.v2+json";

/// True for OCI index and Docker manifest list.
pub fn is_index(media_type: &str) -> bool {
    media_type == OCI_INDEX || media_type == DOCKER_LIST
}

/// True for OCI and Docker v2 image manifests.
pub fn is_image_manifest(media_type: &str) -> bool {
    media_type == OCI_MANIFEST || media_type == DOCKER_MANIFEST
}

/// A content descriptor, as found in index entries and in a manifest's `config`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    #[serde(default)]
    pub media_type: Option<String>,
    pub digest: String,
    #[serde(default)]
    pub size: Option<i64>,
    #[serde(default)]
    pub platform: Option<DescriptorPlatform>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// `platform` of an index entry.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct DescriptorPlatform {
    #[serde(default)]
    pub architecture: String,
    #[serde(default)]
    pub os: String,
    #[serde(default)]
    pub variant: Option<String>,
    #[serde(default, rename = "os.version")]
    pub os_version: Option<String>,
    #[serde(default, rename = "os.features")]
    pub os_features: Vec<String>,
}

impl Descriptor {
    /// Attestations (BuildKit provenance/SBOM) are not runnable platforms.
    pub fn is_attestation(&self) -> bool {
        let unknown = self
            .platform
            .as_ref()
            .is_some_and(|p| p.os == "unknown" && p.architecture == "unknown");
        unknown
            || self
                .annotations
                .get(REFERENCE_TYPE)
                .is_some_and(|t| t == ATTESTATION)
    }

    /// The entry's platform, validated ([`Platform::from_wire`]); `None` when the entry states
    /// none (no `platform`, or an empty architecture).
    pub fn platform(&self) -> Result<Option<Platform>, ParseError> {
        let Some(p) = self
            .platform
            .as_ref()
            .filter(|p| !p.architecture.is_empty())
        else {
            return Ok(None);
        };
        Platform::from_wire(WireFields {
            os: &p.os,
            architecture: &p.architecture,
            variant: p.variant.as_deref(),
            os_version: p.os_version.as_deref(),
            os_features: &p.os_features,
        })
        .map(Some)
        .map_err(|e| ParseError::Invalid(e.to_string()))
    }
}

/// What a manifest body is.
#[derive(Clone, Debug, PartialEq)]
pub enum Parsed {
    /// An index or manifest list and its entries.
    Index(Vec<Descriptor>),
    /// A single image manifest and its config descriptor.
    Image(Descriptor),
    /// An OCI artifact (a manifest with `artifactType`, or whose config is not an image
    /// config: Helm charts, signatures, image-volume content): runs nowhere in particular.
    Artifact,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Shape {
    #[serde(default)]
    schema_version: Option<i64>,
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    manifests: Option<Vec<Descriptor>>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    artifact_type: Option<String>,
    #[serde(default)]
    fs_layers: Option<serde_json::Value>,
}

/// Why a body could not be used; the caller adds reference and registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    Invalid(String),
    Unsupported(String),
}

/// Determines the media type (Content-Type, else body `mediaType`, else shape) and parses.
pub fn parse(content_type: Option<&str>, body: &[u8]) -> Result<(String, Parsed), ParseError> {
    let shape: Shape = serde_json::from_slice(body)
        .map_err(|e| ParseError::Invalid(format!("not a JSON manifest ({e})")))?;
    let header = content_type
        .map(|ct| {
            ct.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|ct| is_index(ct) || is_image_manifest(ct) || is_schema1(ct));
    let media_type = header
        .or_else(|| shape.media_type.clone().filter(|m| !m.is_empty()))
        .or_else(|| {
            if shape.schema_version == Some(1) || shape.fs_layers.is_some() {
                Some(DOCKER_SCHEMA1.to_owned())
            } else if shape.manifests.is_some() {
                Some(OCI_INDEX.to_owned())
            } else if shape.config.is_some() {
                Some(OCI_MANIFEST.to_owned())
            } else {
                None
            }
        })
        .ok_or_else(|| ParseError::Invalid("neither an index nor an image manifest".into()))?;
    if is_index(&media_type) {
        let entries = shape
            .manifests
            .ok_or_else(|| ParseError::Invalid("index without `manifests`".into()))?;
        Ok((media_type, Parsed::Index(entries)))
    } else if is_image_manifest(&media_type) {
        let config = shape
            .config
            .ok_or_else(|| ParseError::Invalid("image manifest without `config`".into()))?;
        let artifact = shape.artifact_type.is_some_and(|t| !t.is_empty());
        if artifact || !is_image_config(&config) {
            return Ok((media_type, Parsed::Artifact));
        }
        Ok((media_type, Parsed::Image(config)))
    } else {
        Err(ParseError::Unsupported(media_type))
    }
}

fn is_schema1(media_type: &str) -> bool {
    media_type == DOCKER_SCHEMA1 || media_type == DOCKER_SCHEMA1_SIGNED
}

/// True when a config descriptor points to a runnable image config (not a Helm chart or other
/// artifact). A missing media type is accepted; the body decides.
pub fn is_image_config(descriptor: &Descriptor) -> bool {
    match descriptor.media_type.as_deref() {
        None | Some("") => true,
        Some(m) => m == OCI_CONFIG || m == DOCKER_CONFIG,
    }
}

/// The platform fields of an image config, as served.
#[derive(Deserialize)]
pub(crate) struct ConfigBody {
    #[serde(default)]
    pub(crate) architecture: String,
    #[serde(default)]
    pub(crate) os: String,
    #[serde(default)]
    pub(crate) variant: Option<String>,
    #[serde(default, rename = "os.version")]
    pub(crate) os_version: Option<String>,
    #[serde(default, rename = "os.features")]
    pub(crate) os_features: Vec<String>,
}

impl ConfigBody {
    /// The platform these fields state, validated ([`Platform::from_wire`]).
    pub(crate) fn platform(&self) -> Result<Platform, ParseError> {
        Platform::from_wire(WireFields {
            os: &self.os,
            architecture: &self.architecture,
            variant: self.variant.as_deref(),
            os_version: self.os_version.as_deref(),
            os_features: &self.os_features,
        })
        .map_err(|e| ParseError::Invalid(e.to_string()))
    }
}

/// Reads `os`, `architecture`, `variant` and `os.version` from an image config, validated
/// ([`Platform::from_wire`]); never assumes a default.
pub fn platform_from_config(body: &[u8]) -> Result<Platform, ParseError> {
    let config: ConfigBody = serde_json::from_slice(body)
        .map_err(|e| ParseError::Invalid(format!("not a JSON image config ({e})")))?;
    if config.architecture.is_empty() {
        return Err(ParseError::Invalid(
            "image config states no architecture".into(),
        ));
    }
    config.platform()
}

/// The `algorithm:hex` digest of `body` computed with the algorithm of `like` (sha256 default).
pub fn digest_of(body: &[u8], like: Option<&str>) -> String {
    if like.is_some_and(|d| d.starts_with("sha512:")) {
        format!("sha512:{}", hex::encode(Sha512::digest(body)))
    } else {
        format!("sha256:{}", hex::encode(Sha256::digest(body)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "manifest/tests.rs"]
mod tests;
