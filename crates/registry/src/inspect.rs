//! What `noe inspect` shows beyond platforms, as crane, regctl, skopeo and `docker buildx
//! imagetools inspect` do: the manifest or index exactly as served, each platform's child
//! digest, one platform selected with `os/arch[/variant][:os.version]`, and the image config
//! summary of that platform. The pure half (types, parsing, bounds); the fetching is
//! `resolver/inspect_step.rs`, through the same hosts, credentials, TLS and limits as a lookup.
//!
//! Everything here comes from a registry any pod author may name: each string is bounded, each
//! list capped (what was cut is said), the config blob read within the client's body cap.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::manifest::{ConfigBody, Descriptor, ParseError};
use crate::Resolution;
use noe_core::platform::{WireFields, MAX_FIELD_LEN, MAX_OS_VERSION_LEN};
use noe_core::Platform;

/// Index entries listed; an index with more lists these and says how many there were.
pub const MAX_CHILDREN: usize = 128;
/// Longest string of an image config shown (entrypoint argument, label value, user, ...).
pub const MAX_STRING: usize = 1024;
/// Most entries of an image config list or map shown (entrypoint, cmd, ports, labels).
pub const MAX_ITEMS: usize = 64;
/// Longest media type or digest of an index entry shown.
const MAX_DESCRIPTOR_FIELD: usize = 160;

/// What to fetch beyond the manifest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Want {
    /// Select this platform: an index's matching child (its manifest and config), or a single
    /// image whose config matches.
    pub platform: Option<PlatformSpec>,
    /// Fetch the selected image's config blob (always done with `platform`).
    pub config: bool,
    /// Only the digest is wanted: without `platform`, a `HEAD` of the manifest answers when
    /// the registry names the digest (no registry counts a HEAD as a pull), and the
    /// [`Inspection`] then carries the digest alone ([`Inspection::digest_only`]).
    pub digest_only: bool,
}

/// A platform as `--platform` names it: `os/arch[/variant][:os.version]` (the syntax of crane's
/// and docker's `--platform`, with go-containerregistry's `:os.version` suffix).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlatformSpec {
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
    pub os_version: Option<String>,
}

impl PlatformSpec {
    /// Parses `os/arch[/variant][:os.version]`; fields are lower-cased (not `os.version`) and
    /// checked as a registry's would be.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (path, os_version) = match text.split_once(':') {
            Some((path, version)) => (path, Some(version)),
            None => (text, None),
        };
        let parts: Vec<&str> = path.split('/').collect();
        let (os, architecture, variant) = match parts.as_slice() {
            [os, arch] => (*os, *arch, None),
            [os, arch, variant] => (*os, *arch, Some(*variant)),
            _ => {
                return Err(format!(
                    "{:?} is not os/arch[/variant][:os.version] (e.g. linux/arm64, linux/arm/v7)",
                    crate::error::bounded(text, 64)
                ))
            }
        };
        let empty =
            |what: &str| format!("{what} is empty in {:?}", crate::error::bounded(text, 64));
        if os.is_empty() {
            return Err(empty("the OS"));
        }
        if variant == Some("") {
            return Err(empty("the variant"));
        }
        if os_version == Some("") {
            return Err(empty("os.version"));
        }
        let platform = Platform::from_wire(WireFields {
            os,
            architecture,
            variant,
            os_version,
            os_features: &[],
        })
        .map_err(|e| e.to_string())?;
        Ok(Self {
            os: platform.os,
            architecture: platform.architecture,
            variant: platform.variant,
            os_version: platform.os_version,
        })
    }

    /// Whether `platform` is this one: the same OS and architecture; the variant when one is
    /// named (`arm64` without a variant is `arm64/v8`); `os.version` when one is named.
    pub fn matches(&self, platform: &Platform) -> bool {
        let variant = |arch: &str, variant: Option<&str>| match (arch, variant) {
            ("arm64", None) => Some("v8".to_owned()),
            (_, v) => v.map(str::to_owned),
        };
        platform.os == self.os
            && platform.architecture == self.architecture
            && (self.variant.is_none()
                || variant(&platform.architecture, platform.variant.as_deref())
                    == variant(&self.architecture, self.variant.as_deref()))
            && (self.os_version.is_none() || platform.os_version == self.os_version)
    }
}

impl std::fmt::Display for PlatformSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(variant) = &self.variant {
            write!(f, "/{variant}")?;
        }
        if let Some(version) = &self.os_version {
            write!(f, ":{version}")?;
        }
        Ok(())
    }
}

/// One manifest, index or config blob exactly as served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// The media type the registry gave (`Content-Type`, else the body's, else its shape); a
    /// config blob's is its descriptor's.
    pub media_type: String,
    /// `sha256:...` of `raw` (verified when fetched by digest).
    pub digest: String,
    /// The bytes, at most the client's body cap.
    pub raw: Bytes,
}

/// One entry of an index, as the index states it (children are not fetched to list them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Child {
    /// Bounded; as stated by the index.
    pub digest: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
    /// `os/arch[/variant]`; `None` when the entry states none (or an invalid one).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "platform_string"
    )]
    pub platform: Option<Platform>,
    #[serde(rename = "os.version", skip_serializing_if = "Option::is_none")]
    pub os_version: Option<String>,
    #[serde(rename = "os.features", skip_serializing_if = "Vec::is_empty")]
    pub os_features: Vec<String>,
    /// A BuildKit attestation (provenance, SBOM): not a runnable platform.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub attestation: bool,
}

fn platform_string<S: serde::Serializer>(
    platform: &Option<Platform>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match platform {
        Some(platform) => s.serialize_str(&platform.to_string()),
        None => s.serialize_none(),
    }
}

/// The entries of an index, at most [`MAX_CHILDREN`], and how many it has.
pub fn children(entries: &[Descriptor]) -> (Vec<Child>, usize) {
    let listed = entries
        .iter()
        .take(MAX_CHILDREN)
        .map(|entry| {
            let platform = entry.platform().ok().flatten();
            let stated = entry.platform.as_ref();
            let os_features = stated
                .map(|p| {
                    p.os_features
                        .iter()
                        .take(noe_core::platform::MAX_OS_FEATURES)
                        .map(|f| crate::error::bounded(f, MAX_FIELD_LEN).into_owned())
                        .collect()
                })
                .unwrap_or_default();
            Child {
                digest: crate::error::bounded(&entry.digest, MAX_DESCRIPTOR_FIELD).into_owned(),
                media_type: entry
                    .media_type
                    .as_deref()
                    .map(|m| crate::error::bounded(m, MAX_DESCRIPTOR_FIELD).into_owned()),
                size: entry.size,
                os_version: platform.as_ref().and_then(|p| p.os_version.clone()),
                platform,
                os_features,
                attestation: entry.is_attestation(),
            }
        })
        .collect();
    (listed, entries.len())
}

/// The first runnable entry matching `spec` (index order, as crane picks).
pub fn choose<'a>(children: &'a [Child], spec: &PlatformSpec) -> Option<&'a Child> {
    children.iter().find(|child| {
        !child.attestation && child.platform.as_ref().is_some_and(|p| spec.matches(p))
    })
}

/// The runnable platforms an index's entries state, in index order, each once.
pub fn available(children: &[Child]) -> Vec<Platform> {
    let mut found: Vec<Platform> = Vec::new();
    for platform in children
        .iter()
        .filter(|c| !c.attestation)
        .filter_map(|c| c.platform.as_ref())
    {
        if !found.contains(platform) {
            found.push(platform.clone());
        }
    }
    found
}

/// The summary of an image config: its platform and how it runs. `Env` is left out (images
/// carry secrets there more often than they should); `crane config` or `--raw --config` shows
/// the blob whole.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageConfig {
    pub os: String,
    pub architecture: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    #[serde(rename = "os.version", skip_serializing_if = "Option::is_none")]
    pub os_version: Option<String>,
    #[serde(rename = "os.features", skip_serializing_if = "Vec::is_empty")]
    pub os_features: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cmd: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exposed_ports: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_signal: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Some string or list was cut to [`MAX_STRING`] / [`MAX_ITEMS`].
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

#[derive(Deserialize)]
struct ConfigFile {
    /// The fields a lookup reads, read the same way.
    #[serde(flatten)]
    platform: ConfigBody,
    #[serde(default)]
    created: Option<String>,
    #[serde(default)]
    config: Option<RunConfig>,
}

/// The image config's `config` (Docker's capitalised keys, which OCI keeps).
#[derive(Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RunConfig {
    #[serde(default)]
    entrypoint: Option<Vec<String>>,
    #[serde(default)]
    cmd: Option<Vec<String>>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    working_dir: Option<String>,
    #[serde(default)]
    exposed_ports: Option<BTreeMap<String, serde_json::Value>>,
    #[serde(default)]
    stop_signal: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
}

/// Cuts strings and lists to their bounds, noting that something was cut.
struct Bounds {
    truncated: bool,
}

impl Bounds {
    fn string(&mut self, text: String) -> String {
        if text.len() <= MAX_STRING {
            return text;
        }
        self.truncated = true;
        crate::error::bounded(&text, MAX_STRING).into_owned()
    }

    fn optional(&mut self, text: Option<String>) -> Option<String> {
        text.filter(|t| !t.is_empty()).map(|t| self.string(t))
    }

    fn list(&mut self, items: impl ExactSizeIterator<Item = String>) -> Vec<String> {
        if items.len() > MAX_ITEMS {
            self.truncated = true;
        }
        items
            .take(MAX_ITEMS)
            .map(|item| self.string(item))
            .collect()
    }
}

/// The summary of an image config blob; its platform fields are validated as a lookup's are
/// (the same [`Platform::from_wire`]), the rest bounded.
pub fn summarize_config(body: &[u8]) -> Result<ImageConfig, ParseError> {
    let file: ConfigFile = serde_json::from_slice(body)
        .map_err(|e| ParseError::Invalid(format!("not a JSON image config ({e})")))?;
    let platform = file.platform.platform()?;
    let run = file.config.unwrap_or_default();
    let mut bounds = Bounds { truncated: false };
    let entrypoint = run.entrypoint.map(|e| bounds.list(e.into_iter()));
    let cmd = run.cmd.map(|c| bounds.list(c.into_iter()));
    let exposed_ports = bounds.list(run.exposed_ports.unwrap_or_default().into_keys());
    let labels = run.labels.unwrap_or_default();
    if labels.len() > MAX_ITEMS {
        bounds.truncated = true;
    }
    let labels = labels
        .into_iter()
        .take(MAX_ITEMS)
        .map(|(key, value)| (bounds.string(key), bounds.string(value)))
        .collect();
    Ok(ImageConfig {
        os: platform.os,
        architecture: platform.architecture,
        variant: platform.variant,
        os_version: platform
            .os_version
            .map(|v| crate::error::bounded(&v, MAX_OS_VERSION_LEN).into_owned()),
        // Checked by `from_wire` (count and characters).
        os_features: file.platform.os_features,
        created: bounds.optional(file.created),
        entrypoint,
        cmd,
        user: bounds.optional(run.user),
        working_dir: bounds.optional(run.working_dir),
        exposed_ports,
        stop_signal: bounds.optional(run.stop_signal),
        labels,
        truncated: bounds.truncated,
    })
}

/// The config blob of an image, as served and summarized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub served: Served,
    pub summary: ImageConfig,
}

/// The image [`Want::platform`] (or [`Want::config`]) selected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selected {
    /// Its platform: the index entry's, or the config's for a single image.
    pub platform: Platform,
    /// Its image manifest: the index's child, or the top manifest itself.
    pub manifest: Served,
    /// `None` for an artifact (its config is not an image config).
    pub config: Option<Config>,
}

/// What the selection found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pick {
    Selected(Box<Selected>),
    /// No runnable entry (or single image) matches; these platforms are there.
    Missing {
        available: Vec<Platform>,
    },
}

/// What `noe inspect` learned of one image.
#[derive(Clone, Debug)]
pub struct Inspection {
    /// What a lookup answers (the same walk of the same manifest: the platforms the webhook
    /// would use).
    pub resolution: Resolution,
    /// The top-level manifest or index exactly as served.
    pub manifest: Served,
    /// An index's entries (at most [`MAX_CHILDREN`]); empty for a single manifest.
    pub children: Vec<Child>,
    /// How many entries the index has.
    pub children_total: usize,
    /// A single image's config digest.
    pub config_digest: Option<String>,
    /// With [`Want::platform`] or [`Want::config`].
    pub pick: Option<Pick>,
    /// A `HEAD` answered [`Want::digest_only`]: the digest is known, nothing else (no body, no
    /// platforms, no media type).
    pub digest_only: bool,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "inspect/tests.rs"]
mod tests;
