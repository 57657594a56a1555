//! Images pushed into a [`Registry`] for tests: generic helpers and the standard set.

use anyhow::Context as _;

use crate::image::{
    attestation_entry, build_attestation, build_image, build_index, BuiltImage, Descriptor, Flavor,
    IndexEntry,
};
use crate::push::Pusher;
use crate::Registry;

/// Pushes a tiny image for `platform` (config blob with os/architecture/variant, one small layer)
/// into `repository`; tags it when `tag` is given, else pushes it by digest.
pub async fn push_image(
    pusher: &Pusher,
    repository: &str,
    tag: Option<&str>,
    platform: &str,
    flavor: Flavor,
) -> anyhow::Result<Descriptor> {
    let image = build_image(repository, platform, flavor)?;
    push_built(pusher, repository, tag, &image).await
}

/// Pushes a built image's blobs and manifest (by `tag`, else by digest).
pub async fn push_built(
    pusher: &Pusher,
    repository: &str,
    tag: Option<&str>,
    image: &BuiltImage,
) -> anyhow::Result<Descriptor> {
    pusher.push_blob(repository, &image.layer).await?;
    pusher.push_blob(repository, &image.config).await?;
    let reference = tag.unwrap_or(&image.descriptor.digest);
    pusher
        .push_manifest(
            repository,
            reference,
            &image.descriptor.media_type,
            &image.manifest,
        )
        .await?;
    Ok(image.descriptor.clone())
}

/// Pushes a buildkit-style attestation manifest by digest.
pub async fn push_attestation(pusher: &Pusher, repository: &str) -> anyhow::Result<Descriptor> {
    push_built(pusher, repository, None, &build_attestation()?).await
}

/// Pushes an index (OCI) or manifest list (Docker) of `entries` under `tag` (or by digest).
/// The children must already be in `repository`.
pub async fn push_index(
    pusher: &Pusher,
    repository: &str,
    tag: Option<&str>,
    flavor: Flavor,
    entries: &[IndexEntry],
) -> anyhow::Result<Descriptor> {
    let (body, descriptor) = build_index(flavor, entries)?;
    pusher
        .push_manifest(
            repository,
            tag.unwrap_or(&descriptor.digest),
            &descriptor.media_type,
            &body,
        )
        .await?;
    Ok(descriptor)
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
    let entries = [
        IndexEntry::new(&amd64, Some("linux/amd64")),
        IndexEntry::new(&arm64, Some("linux/arm64")),
        IndexEntry::new(&armv7, Some("linux/arm/v7")),
        attestation_entry(&attestation, &amd64),
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
