//! Images for the registry-economy measurements: one two-platform OCI index pushed to the real
//! registry under as many tags as needed (each tag is an uncached image for `noe`; pushing a tag
//! is one request), and a tag moved to another index.

use noe_test_support::{build_index, push_image, Flavor, IndexEntry, Registry};

/// The repository every tag is pushed to.
pub const REPOSITORY: &str = "bench/app";

/// The children of the indexes: linux/amd64, linux/arm64 and linux/arm/v7 images.
pub struct Children {
    entries: Vec<IndexEntry>,
}

impl Children {
    pub async fn push(registry: &Registry) -> anyhow::Result<Self> {
        let pusher = registry.pusher()?;
        let mut entries = Vec::new();
        for platform in ["linux/amd64", "linux/arm64", "linux/arm/v7"] {
            let descriptor = push_image(&pusher, REPOSITORY, None, platform, Flavor::Oci).await?;
            entries.push(IndexEntry::new(&descriptor, Some(platform)));
        }
        Ok(Self { entries })
    }

    /// Pushes the index of the first `platforms` children under each of `tags`.
    pub async fn tag(
        &self,
        registry: &Registry,
        platforms: usize,
        tags: &[String],
    ) -> anyhow::Result<()> {
        let pusher = registry.pusher()?;
        let entries = self
            .entries
            .get(..platforms.min(self.entries.len()))
            .unwrap_or_default();
        let (body, descriptor) = build_index(Flavor::Oci, entries)?;
        for tag in tags {
            pusher
                .push_manifest(REPOSITORY, tag, &descriptor.media_type, &body)
                .await?;
        }
        Ok(())
    }
}

/// `host/bench/app:PREFIX-N` for `n` tags.
pub fn tags(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// The image references of `tags` at `host`.
pub fn references(host: &str, tags: &[String]) -> Vec<String> {
    tags.iter()
        .map(|tag| format!("{host}/{REPOSITORY}:{tag}"))
        .collect()
}

/// Manifest GETs, manifest HEADs and other requests in a registry's access log.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counted {
    pub manifest_gets: usize,
    pub manifest_heads: usize,
    pub other: usize,
}

impl Counted {
    pub fn of(registry: &Registry) -> Self {
        let mut counted = Self::default();
        for request in registry.requests() {
            let manifest = request.path.contains("/manifests/");
            match (manifest, request.method.as_str()) {
                (true, "GET") => counted.manifest_gets += 1,
                (true, "HEAD") => counted.manifest_heads += 1,
                _ => counted.other += 1,
            }
        }
        counted
    }

    pub fn total(&self) -> usize {
        self.manifest_gets + self.manifest_heads + self.other
    }
}
