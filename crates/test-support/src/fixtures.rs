//! Images pushed into a [`Registry`] for tests: generic helpers and the standard set.

use anyhow::{bail, Context as _};
use serde_json::{json, Value};

use crate::push::{sha256_digest, Pusher};
use crate::Registry;

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

/// One entry of an index to push with [`push_index`].
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

/// Pushes a tiny image for `platform` (config blob with os/architecture/variant, one small layer)
/// into `repository`; tags it when `tag` is given, else pushes it by digest.
pub async fn push_image(
    pusher: &Pusher,
    repository: &str,
    tag: Option<&str>,
    platform: &str,
    flavor: Flavor,
) -> anyhow::Result<Descriptor> {
    let layer = format!("noe-rs test layer {repository} {platform}").into_bytes();
    let layer_digest = pusher.push_blob(repository, &layer).await?;
    let mut config = platform_json(platform)?;
    config["config"] = json!({"Env": ["PATH=/usr/bin"]});
    config["rootfs"] = json!({"type": "layers", "diff_ids": [layer_digest]});
    let (config_type, layer_type) = match flavor {
        Flavor::Oci => (OCI_CONFIG, OCI_LAYER),
        Flavor::Docker => (DOCKER_CONFIG, DOCKER_LAYER),
    };
    let config = serde_json::to_vec(&config)?;
    let config_digest = pusher.push_blob(repository, &config).await?;
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": flavor.manifest_type(),
        "config": {"mediaType": config_type, "digest": config_digest, "size": config.len()},
        "layers": [{"mediaType": layer_type, "digest": layer_digest, "size": layer.len()}],
    });
    let body = serde_json::to_vec(&manifest)?;
    let digest = sha256_digest(&body);
    pusher
        .push_manifest(
            repository,
            tag.unwrap_or(&digest),
            flavor.manifest_type(),
            &body,
        )
        .await?;
    Ok(Descriptor {
        media_type: flavor.manifest_type().to_owned(),
        digest,
        size: body.len(),
        config_digest: Some(config_digest),
    })
}

/// Pushes a buildkit-style attestation manifest (config `unknown/unknown`, one in-toto layer).
pub async fn push_attestation(pusher: &Pusher, repository: &str) -> anyhow::Result<Descriptor> {
    let layer = br#"{"_type":"https://in-toto.io/Statement/v0.1","predicateType":"https://spdx.dev/Document","subject":[]}"#;
    let layer_digest = pusher.push_blob(repository, layer).await?;
    let config = serde_json::to_vec(&json!({
        "architecture": "unknown",
        "os": "unknown",
        "config": {},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    }))?;
    let config_digest = pusher.push_blob(repository, &config).await?;
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": config.len()},
        "layers": [{
            "mediaType": IN_TOTO,
            "digest": layer_digest,
            "size": layer.len(),
            "annotations": {"in-toto.io/predicate-type": "https://spdx.dev/Document"},
        }],
    });
    let body = serde_json::to_vec(&manifest)?;
    let digest = sha256_digest(&body);
    pusher
        .push_manifest(repository, &digest, OCI_MANIFEST, &body)
        .await?;
    Ok(Descriptor {
        media_type: OCI_MANIFEST.to_owned(),
        digest,
        size: body.len(),
        config_digest: Some(config_digest),
    })
}

/// Pushes an index (OCI) or manifest list (Docker) of `entries` under `tag` (or by digest).
pub async fn push_index(
    pusher: &Pusher,
    repository: &str,
    tag: Option<&str>,
    flavor: Flavor,
    entries: &[IndexEntry],
) -> anyhow::Result<Descriptor> {
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
    let index = json!({
        "schemaVersion": 2,
        "mediaType": flavor.index_type(),
        "manifests": manifests,
    });
    let body = serde_json::to_vec(&index)?;
    let digest = sha256_digest(&body);
    pusher
        .push_manifest(
            repository,
            tag.unwrap_or(&digest),
            flavor.index_type(),
            &body,
        )
        .await?;
    Ok(Descriptor {
        media_type: flavor.index_type().to_owned(),
        digest,
        size: body.len(),
        config_digest: None,
    })
}

/// One standard fixture: where it is and what a resolver must answer for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fixture {
    /// `127.0.0.1:PORT`.
    pub host: String,
    /// Repository, e.g. `fixtures/oci-index`.
    pub repository: String,
    /// Tag, `v1`.
    pub tag: String,
    /// Digest of the tagged manifest.
    pub digest: String,
    /// Media type of the tagged manifest.
    pub media_type: String,
    /// Config blob digest (single-image fixtures only).
    pub config_digest: Option<String>,
    /// Expected platforms (`os/arch[/variant]`), attestations excluded, in manifest order.
    pub platforms: Vec<String>,
}

impl Fixture {
    /// `host/repository:tag`.
    pub fn reference(&self) -> String {
        format!("{}/{}:{}", self.host, self.repository, self.tag)
    }

    /// `host/repository@digest`.
    pub fn digest_reference(&self) -> String {
        format!("{}/{}@{}", self.host, self.repository, self.digest)
    }

    /// Expected architectures (the platform's second component), deduplicated, in order.
    pub fn architectures(&self) -> Vec<String> {
        let mut archs: Vec<String> = Vec::new();
        for platform in &self.platforms {
            if let Some(arch) = platform.split('/').nth(1) {
                if !archs.iter().any(|a| a == arch) {
                    archs.push(arch.to_owned());
                }
            }
        }
        archs
    }
}

/// The standard fixture set pushed by [`push_standard_fixtures`].
#[derive(Debug, Clone)]
pub struct Fixtures {
    /// OCI index: linux/amd64, linux/arm64, linux/arm/v7, plus a buildkit attestation entry
    /// (`unknown/unknown`, `vnd.docker.reference.type: attestation-manifest`).
    pub oci_index: Fixture,
    /// Docker manifest list: linux/amd64, linux/arm64.
    pub docker_list: Fixture,
    /// Single OCI manifest whose config says linux/arm64.
    pub oci_single: Fixture,
    /// Single Docker v2 manifest whose config says linux/s390x.
    pub docker_single: Fixture,
    /// OCI index: windows/amd64 (with `os.version`) and linux/amd64.
    pub windows_index: Fixture,
    /// OCI index whose first entry is another index (linux/amd64, linux/arm64), plus
    /// linux/ppc64le directly.
    pub nested_index: Fixture,
    /// OCI index: linux/amd64 with `platform`, and an image entry WITHOUT `platform` whose config
    /// says linux/riscv64.
    pub index_without_platform: Fixture,
}

impl Fixtures {
    /// Every fixture, in field order.
    pub fn all(&self) -> Vec<&Fixture> {
        vec![
            &self.oci_index,
            &self.docker_list,
            &self.oci_single,
            &self.docker_single,
            &self.windows_index,
            &self.nested_index,
            &self.index_without_platform,
        ]
    }
}

const TAG: &str = "v1";

fn fixture(
    registry: &Registry,
    repository: &str,
    descriptor: &Descriptor,
    platforms: &[&str],
) -> Fixture {
    Fixture {
        host: registry.host(),
        repository: repository.to_owned(),
        tag: TAG.to_owned(),
        digest: descriptor.digest.clone(),
        media_type: descriptor.media_type.clone(),
        config_digest: descriptor.config_digest.clone(),
        platforms: platforms.iter().map(|p| (*p).to_owned()).collect(),
    }
}

/// Pushes the standard fixtures with the registry's admin credentials ([`Registry::pusher`]).
pub async fn push_standard_fixtures(registry: &Registry) -> anyhow::Result<Fixtures> {
    let pusher = registry.pusher()?;
    push_standard_fixtures_with(registry, &pusher)
        .await
        .with_context(|| format!("pushing fixtures; registry log: {}", registry.logs()))
}

/// Pushes the standard fixtures with `pusher` (e.g. other credentials).
pub async fn push_standard_fixtures_with(
    registry: &Registry,
    pusher: &Pusher,
) -> anyhow::Result<Fixtures> {
    use Flavor::{Docker, Oci};

    let repo = "fixtures/oci-index";
    let amd64 = push_image(pusher, repo, None, "linux/amd64", Oci).await?;
    let arm64 = push_image(pusher, repo, None, "linux/arm64", Oci).await?;
    let armv7 = push_image(pusher, repo, None, "linux/arm/v7", Oci).await?;
    let attestation = push_attestation(pusher, repo).await?;
    let mut attestation_entry = IndexEntry::new(&attestation, Some("unknown/unknown"));
    attestation_entry.annotations = vec![
        (
            "vnd.docker.reference.digest".to_owned(),
            amd64.digest.clone(),
        ),
        (
            "vnd.docker.reference.type".to_owned(),
            "attestation-manifest".to_owned(),
        ),
    ];
    let entries = [
        IndexEntry::new(&amd64, Some("linux/amd64")),
        IndexEntry::new(&arm64, Some("linux/arm64")),
        IndexEntry::new(&armv7, Some("linux/arm/v7")),
        attestation_entry,
    ];
    let index = push_index(pusher, repo, Some(TAG), Oci, &entries).await?;
    let oci_index = fixture(
        registry,
        repo,
        &index,
        &["linux/amd64", "linux/arm64", "linux/arm/v7"],
    );

    let repo = "fixtures/docker-list";
    let amd64 = push_image(pusher, repo, None, "linux/amd64", Docker).await?;
    let arm64 = push_image(pusher, repo, None, "linux/arm64", Docker).await?;
    let entries = [
        IndexEntry::new(&amd64, Some("linux/amd64")),
        IndexEntry::new(&arm64, Some("linux/arm64")),
    ];
    let list = push_index(pusher, repo, Some(TAG), Docker, &entries).await?;
    let docker_list = fixture(registry, repo, &list, &["linux/amd64", "linux/arm64"]);

    let repo = "fixtures/oci-single";
    let image = push_image(pusher, repo, Some(TAG), "linux/arm64", Oci).await?;
    let oci_single = fixture(registry, repo, &image, &["linux/arm64"]);

    let repo = "fixtures/docker-single";
    let image = push_image(pusher, repo, Some(TAG), "linux/s390x", Docker).await?;
    let docker_single = fixture(registry, repo, &image, &["linux/s390x"]);

    let repo = "fixtures/windows-index";
    let windows = push_image(pusher, repo, None, "windows/amd64", Oci).await?;
    let linux = push_image(pusher, repo, None, "linux/amd64", Oci).await?;
    let entries = [
        IndexEntry::new(&windows, Some("windows/amd64")),
        IndexEntry::new(&linux, Some("linux/amd64")),
    ];
    let index = push_index(pusher, repo, Some(TAG), Oci, &entries).await?;
    let windows_index = fixture(registry, repo, &index, &["windows/amd64", "linux/amd64"]);

    let repo = "fixtures/nested-index";
    let amd64 = push_image(pusher, repo, None, "linux/amd64", Oci).await?;
    let arm64 = push_image(pusher, repo, None, "linux/arm64", Oci).await?;
    let ppc64le = push_image(pusher, repo, None, "linux/ppc64le", Oci).await?;
    let inner_entries = [
        IndexEntry::new(&amd64, Some("linux/amd64")),
        IndexEntry::new(&arm64, Some("linux/arm64")),
    ];
    let inner = push_index(pusher, repo, None, Oci, &inner_entries).await?;
    let entries = [
        IndexEntry::new(&inner, None),
        IndexEntry::new(&ppc64le, Some("linux/ppc64le")),
    ];
    let index = push_index(pusher, repo, Some(TAG), Oci, &entries).await?;
    let nested_index = fixture(
        registry,
        repo,
        &index,
        &["linux/amd64", "linux/arm64", "linux/ppc64le"],
    );

    let repo = "fixtures/index-without-platform";
    let amd64 = push_image(pusher, repo, None, "linux/amd64", Oci).await?;
    let riscv64 = push_image(pusher, repo, None, "linux/riscv64", Oci).await?;
    let entries = [
        IndexEntry::new(&amd64, Some("linux/amd64")),
        IndexEntry::new(&riscv64, None),
    ];
    let index = push_index(pusher, repo, Some(TAG), Oci, &entries).await?;
    let index_without_platform = fixture(registry, repo, &index, &["linux/amd64", "linux/riscv64"]);

    Ok(Fixtures {
        oci_index,
        docker_list,
        oci_single,
        docker_single,
        windows_index,
        nested_index,
        index_without_platform,
    })
}
