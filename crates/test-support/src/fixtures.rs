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
    tokio::try_join!(
        pusher.push_blob(repository, &image.layer),
        pusher.push_blob(repository, &image.config),
    )?;
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

/// Pushes a track of versions to `repository`: each `(tag, arm64)` a tag of an index that
/// lists `linux/amd64`, and `linux/arm64` too when `arm64` (the two index bodies, and the two
/// images they list, pushed once).
pub async fn push_versions(
    pusher: &Pusher,
    repository: &str,
    versions: &[(&str, bool)],
) -> anyhow::Result<()> {
    let amd = push_image(pusher, repository, None, "linux/amd64", Flavor::Oci).await?;
    let arm = push_image(pusher, repository, None, "linux/arm64", Flavor::Oci).await?;
    let (amd64, _) = build_index(Flavor::Oci, &[IndexEntry::new(&amd, Some("linux/amd64"))])?;
    let (both, _) = build_index(
        Flavor::Oci,
        &[
            IndexEntry::new(&amd, Some("linux/amd64")),
            IndexEntry::new(&arm, Some("linux/arm64")),
        ],
    )?;
    for (tag, arm64) in versions {
        let body = if *arm64 { &both } else { &amd64 };
        pusher
            .push_manifest(repository, tag, Flavor::Oci.index_type(), body)
            .await?;
    }
    Ok(())
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

fn fixture(host: &str, repository: &str, descriptor: &Descriptor, platforms: &[&str]) -> Fixture {
    Fixture {
        host: host.to_owned(),
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

/// Pushes the standard fixtures with `pusher` (e.g. other credentials). The seven repositories
/// are pushed concurrently.
pub async fn push_standard_fixtures_with(
    registry: &Registry,
    pusher: &Pusher,
) -> anyhow::Result<Fixtures> {
    let host = registry.host();
    let (
        oci_index,
        docker_list,
        oci_single,
        docker_single,
        windows_index,
        nested_index,
        index_without_platform,
    ) = tokio::try_join!(
        push_oci_index(pusher, &host),
        push_docker_list(pusher, &host),
        push_single(
            pusher,
            &host,
            "fixtures/oci-single",
            "linux/arm64",
            Flavor::Oci
        ),
        push_single(
            pusher,
            &host,
            "fixtures/docker-single",
            "linux/s390x",
            Flavor::Docker
        ),
        push_windows_index(pusher, &host),
        push_nested_index(pusher, &host),
        push_index_without_platform(pusher, &host),
    )?;
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

/// Pushes one image per platform (by digest); returns them and their index entries.
async fn push_platform_images(
    pusher: &Pusher,
    repository: &str,
    flavor: Flavor,
    platforms: &[&str],
) -> anyhow::Result<(Vec<Descriptor>, Vec<IndexEntry>)> {
    let mut tasks = tokio::task::JoinSet::new();
    for (i, platform) in platforms.iter().enumerate() {
        let (pusher, repository, platform) = (
            pusher.clone(),
            repository.to_owned(),
            (*platform).to_owned(),
        );
        tasks.spawn(async move {
            let image = push_image(&pusher, &repository, None, &platform, flavor).await;
            (i, image)
        });
    }
    let mut images: Vec<Option<Descriptor>> = vec![None; platforms.len()];
    while let Some(joined) = tasks.join_next().await {
        let (i, image) = joined?;
        images[i] = Some(image?);
    }
    let images: Vec<Descriptor> = images.into_iter().flatten().collect();
    let entries = images
        .iter()
        .zip(platforms)
        .map(|(image, platform)| IndexEntry::new(image, Some(platform)))
        .collect();
    Ok((images, entries))
}

async fn push_oci_index(pusher: &Pusher, host: &str) -> anyhow::Result<Fixture> {
    let repo = "fixtures/oci-index";
    let platforms = ["linux/amd64", "linux/arm64", "linux/arm/v7"];
    let (images, mut entries) = push_platform_images(pusher, repo, Flavor::Oci, &platforms).await?;
    let attestation = push_attestation(pusher, repo).await?;
    entries.push(attestation_entry(&attestation, &images[0]));
    let index = push_index(pusher, repo, Some(TAG), Flavor::Oci, &entries).await?;
    Ok(fixture(host, repo, &index, &platforms))
}

async fn push_docker_list(pusher: &Pusher, host: &str) -> anyhow::Result<Fixture> {
    let repo = "fixtures/docker-list";
    let platforms = ["linux/amd64", "linux/arm64"];
    let (_, entries) = push_platform_images(pusher, repo, Flavor::Docker, &platforms).await?;
    let list = push_index(pusher, repo, Some(TAG), Flavor::Docker, &entries).await?;
    Ok(fixture(host, repo, &list, &platforms))
}

async fn push_single(
    pusher: &Pusher,
    host: &str,
    repo: &str,
    platform: &str,
    flavor: Flavor,
) -> anyhow::Result<Fixture> {
    let image = push_image(pusher, repo, Some(TAG), platform, flavor).await?;
    Ok(fixture(host, repo, &image, &[platform]))
}

async fn push_windows_index(pusher: &Pusher, host: &str) -> anyhow::Result<Fixture> {
    let repo = "fixtures/windows-index";
    let platforms = ["windows/amd64", "linux/amd64"];
    let (_, entries) = push_platform_images(pusher, repo, Flavor::Oci, &platforms).await?;
    let index = push_index(pusher, repo, Some(TAG), Flavor::Oci, &entries).await?;
    Ok(fixture(host, repo, &index, &platforms))
}

async fn push_nested_index(pusher: &Pusher, host: &str) -> anyhow::Result<Fixture> {
    let repo = "fixtures/nested-index";
    let inner_platforms = ["linux/amd64", "linux/arm64"];
    let (_, inner_entries) =
        push_platform_images(pusher, repo, Flavor::Oci, &inner_platforms).await?;
    let inner = push_index(pusher, repo, None, Flavor::Oci, &inner_entries).await?;
    let ppc64le = push_image(pusher, repo, None, "linux/ppc64le", Flavor::Oci).await?;
    let entries = [
        IndexEntry::new(&inner, None),
        IndexEntry::new(&ppc64le, Some("linux/ppc64le")),
    ];
    let index = push_index(pusher, repo, Some(TAG), Flavor::Oci, &entries).await?;
    Ok(fixture(
        host,
        repo,
        &index,
        &["linux/amd64", "linux/arm64", "linux/ppc64le"],
    ))
}

async fn push_index_without_platform(pusher: &Pusher, host: &str) -> anyhow::Result<Fixture> {
    let repo = "fixtures/index-without-platform";
    let amd64 = push_image(pusher, repo, None, "linux/amd64", Flavor::Oci).await?;
    let riscv64 = push_image(pusher, repo, None, "linux/riscv64", Flavor::Oci).await?;
    let entries = [
        IndexEntry::new(&amd64, Some("linux/amd64")),
        IndexEntry::new(&riscv64, None),
    ];
    let index = push_index(pusher, repo, Some(TAG), Flavor::Oci, &entries).await?;
    Ok(fixture(
        host,
        repo,
        &index,
        &["linux/amd64", "linux/riscv64"],
    ))
}
