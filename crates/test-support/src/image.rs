//! Building image manifests, configs and indexes in memory (no I/O): used to push fixtures to
//! the real registry and to script the fake one.

use anyhow::bail;
use serde_json::{json, Value};

use crate::push::sha256_digest;

/// Media types used by the fixtures.
pub mod media_types {
    /// OCI image index.
    pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
    /// OCI image manifest.
    pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
    /// OCI image config.
    pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
    /// OCI gzip layer.
    pub const OCI_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
    /// Docker manifest list.
    pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
    /// Docker image manifest v2 schema 2.
    pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
    /// Docker image config.
    pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
    /// Docker gzip layer.
    pub const DOCKER_LAYER: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";
    /// in-toto attestation layer (buildkit).
    pub const IN_TOTO: &str = "application/vnd.in-toto+json";
    /// The `Accept` value listing the four manifest types (never schema 1).
    pub const ACCEPT_ALL: &str = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";
}

use media_types::*;

/// OCI or Docker media types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// OCI image manifest / index.
    Oci,
    /// Docker manifest v2 / manifest list.
    Docker,
}

impl Flavor {
    /// The single-image manifest media type.
    pub fn manifest_type(self) -> &'static str {
        match self {
            Self::Oci => OCI_MANIFEST,
            Self::Docker => DOCKER_MANIFEST,
        }
    }

    /// The index / list media type.
    pub fn index_type(self) -> &'static str {
        match self {
            Self::Oci => OCI_INDEX,
            Self::Docker => DOCKER_LIST,
        }
    }
}

/// A pushed manifest (image or index) as an index entry would describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Descriptor {
    /// Manifest media type.
    pub media_type: String,
    /// `sha256:...` of the manifest bytes.
    pub digest: String,
    /// Size of the manifest bytes.
    pub size: usize,
    /// Config blob digest (images only).
    pub config_digest: Option<String>,
}

/// One entry of an index built with [`build_index`] or pushed with [`crate::push_index`].
#[derive(Debug, Clone)]
pub struct IndexEntry {
    /// The child.
    pub descriptor: Descriptor,
    /// `os/arch[/variant]`, or None to leave out `platform` (optional in OCI).
    pub platform: Option<String>,
    /// Entry annotations.
    pub annotations: Vec<(String, String)>,
}

impl IndexEntry {
    /// An entry with a platform and no annotations.
    pub fn new(descriptor: &Descriptor, platform: Option<&str>) -> Self {
        Self {
            descriptor: descriptor.clone(),
            platform: platform.map(str::to_owned),
            annotations: Vec::new(),
        }
    }
}

/// The JSON `platform` object of `os/arch[/variant]`; `windows/*` gets an `os.version`.
pub fn platform_json(platform: &str) -> anyhow::Result<Value> {
    let parts: Vec<&str> = platform.split('/').collect();
    let (os, architecture, variant) = match parts.as_slice() {
        [os, arch] => (*os, *arch, None),
        [os, arch, variant] => (*os, *arch, Some(*variant)),
        _ => bail!("platform {platform:?} is not os/arch[/variant]"),
    };
    let mut value = json!({"architecture": architecture, "os": os});
    if let Some(variant) = variant {
        value["variant"] = variant.into();
    }
    if os == "windows" {
        value["os.version"] = "10.0.20348.2227".into();
    }
    Ok(value)
}

/// An image built in memory: its blobs and manifest.
#[derive(Debug, Clone)]
pub struct BuiltImage {
    /// The single layer's bytes (not a real tarball; registries do not look).
    pub layer: Vec<u8>,
    /// The config blob: `os`, `architecture`, `variant`, `rootfs`.
    pub config: Vec<u8>,
    /// The manifest bytes.
    pub manifest: Vec<u8>,
    /// The manifest's descriptor (with the config digest).
    pub descriptor: Descriptor,
}

/// Builds a tiny image for `platform` whose layer content depends on `seed` (so images with the
/// same platform in different repositories differ).
pub fn build_image(seed: &str, platform: &str, flavor: Flavor) -> anyhow::Result<BuiltImage> {
    let layer = format!("noe-rs test layer {seed} {platform}").into_bytes();
    let layer_digest = sha256_digest(&layer);
    let mut config = platform_json(platform)?;
    config["config"] = json!({"Env": ["PATH=/usr/bin"]});
    config["rootfs"] = json!({"type": "layers", "diff_ids": [layer_digest]});
    let (config_type, layer_type) = match flavor {
        Flavor::Oci => (OCI_CONFIG, OCI_LAYER),
        Flavor::Docker => (DOCKER_CONFIG, DOCKER_LAYER),
    };
    let config = serde_json::to_vec(&config)?;
    let config_digest = sha256_digest(&config);
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": flavor.manifest_type(),
        "config": {"mediaType": config_type, "digest": config_digest, "size": config.len()},
        "layers": [{"mediaType": layer_type, "digest": layer_digest, "size": layer.len()}],
    }))?;
    let descriptor = Descriptor {
        media_type: flavor.manifest_type().to_owned(),
        digest: sha256_digest(&manifest),
        size: manifest.len(),
        config_digest: Some(config_digest),
    };
    Ok(BuiltImage {
        layer,
        config,
        manifest,
        descriptor,
    })
}

/// `application/vnd.oci.empty.v1+json`: the config of an OCI 1.1 artifact.
pub const OCI_EMPTY: &str = "application/vnd.oci.empty.v1+json";

/// Builds an OCI 1.1 artifact: `artifactType`, the empty config `{}` and one layer (what
/// `oras push --artifact-type` makes; image volumes may reference one). `config` holds `{}`.
pub fn build_artifact(seed: &str, artifact_type: &str) -> anyhow::Result<BuiltImage> {
    let layer = format!("noe-rs test artifact {seed}").into_bytes();
    let config = b"{}".to_vec();
    let config_digest = sha256_digest(&config);
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": artifact_type,
        "config": {"mediaType": OCI_EMPTY, "digest": config_digest, "size": config.len()},
        "layers": [{"mediaType": "application/octet-stream", "digest": sha256_digest(&layer), "size": layer.len()}],
    }))?;
    Ok(built(layer, config, manifest, OCI_MANIFEST, config_digest))
}

/// Builds an image whose config is `config` as given (e.g. without `architecture`, or with
/// hostile fields), with one small layer.
pub fn build_image_with_config(
    seed: &str,
    config: &Value,
    flavor: Flavor,
) -> anyhow::Result<BuiltImage> {
    let layer = format!("noe-rs test layer {seed}").into_bytes();
    let config = serde_json::to_vec(config)?;
    let config_digest = sha256_digest(&config);
    let (config_type, layer_type) = match flavor {
        Flavor::Oci => (OCI_CONFIG, OCI_LAYER),
        Flavor::Docker => (DOCKER_CONFIG, DOCKER_LAYER),
    };
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": flavor.manifest_type(),
        "config": {"mediaType": config_type, "digest": config_digest, "size": config.len()},
        "layers": [{"mediaType": layer_type, "digest": sha256_digest(&layer), "size": layer.len()}],
    }))?;
    Ok(built(
        layer,
        config,
        manifest,
        flavor.manifest_type(),
        config_digest,
    ))
}

fn built(
    layer: Vec<u8>,
    config: Vec<u8>,
    manifest: Vec<u8>,
    media_type: &str,
    config_digest: String,
) -> BuiltImage {
    let descriptor = Descriptor {
        media_type: media_type.to_owned(),
        digest: sha256_digest(&manifest),
        size: manifest.len(),
        config_digest: Some(config_digest),
    };
    BuiltImage {
        layer,
        config,
        manifest,
        descriptor,
    }
}

/// Builds a buildkit-style attestation manifest (config `unknown/unknown`, one in-toto layer).
pub fn build_attestation() -> anyhow::Result<BuiltImage> {
    let layer = br#"{"_type":"https://in-toto.io/Statement/v0.1","predicateType":"https://spdx.dev/Document","subject":[]}"#.to_vec();
    let layer_digest = sha256_digest(&layer);
    let config = serde_json::to_vec(&json!({
        "architecture": "unknown",
        "os": "unknown",
        "config": {},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    }))?;
    let config_digest = sha256_digest(&config);
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": config.len()},
        "layers": [{
            "mediaType": IN_TOTO,
            "digest": layer_digest,
            "size": layer.len(),
            "annotations": {"in-toto.io/predicate-type": "https://spdx.dev/Document"},
        }],
    }))?;
    let descriptor = Descriptor {
        media_type: OCI_MANIFEST.to_owned(),
        digest: sha256_digest(&manifest),
        size: manifest.len(),
        config_digest: Some(config_digest),
    };
    Ok(BuiltImage {
        layer,
        config,
        manifest,
        descriptor,
    })
}

/// The index entry marking `attestation` as the attestation of `subject` (buildkit's shape).
pub fn attestation_entry(attestation: &Descriptor, subject: &Descriptor) -> IndexEntry {
    let mut entry = IndexEntry::new(attestation, Some("unknown/unknown"));
    entry.annotations = vec![
        (
            "vnd.docker.reference.digest".to_owned(),
            subject.digest.clone(),
        ),
        (
            "vnd.docker.reference.type".to_owned(),
            "attestation-manifest".to_owned(),
        ),
    ];
    entry
}

/// Builds an index (OCI) or manifest list (Docker) of `entries`; returns its bytes and
/// descriptor.
pub fn build_index(
    flavor: Flavor,
    entries: &[IndexEntry],
) -> anyhow::Result<(Vec<u8>, Descriptor)> {
    let manifests = entries
        .iter()
        .map(|entry| {
            let mut value = json!({
                "mediaType": entry.descriptor.media_type,
                "digest": entry.descriptor.digest,
                "size": entry.descriptor.size,
            });
            if let Some(platform) = &entry.platform {
                value["platform"] = platform_json(platform)?;
            }
            if !entry.annotations.is_empty() {
                value["annotations"] = entry
                    .annotations
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                    .collect::<serde_json::Map<_, _>>()
                    .into();
            }
            Ok(value)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let body = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": flavor.index_type(),
        "manifests": manifests,
    }))?;
    let descriptor = Descriptor {
        media_type: flavor.index_type().to_owned(),
        digest: sha256_digest(&body),
        size: body.len(),
        config_digest: None,
    };
    Ok((body, descriptor))
}
