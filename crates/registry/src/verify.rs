//! Verification (docs/architecture.md "Verification"): each platform of an image is checked
//! against its own program's ELF header, read from the layers without pulling them whole. The
//! pure half — the program, the tar reader, the layers' merged view, the verdict — is
//! `noe_core::binary`; this module fetches (the lookup's own routing, credentials, mirrors, TLS,
//! address guard, limiter and breaker: [`crate::Resolver::verify`]), streams each layer from
//! the top down into a decompressor on a thread of its own (`worker`), and keeps the bounds:
//! [`VerifyConfig::max_bytes`] compressed bytes and [`VerifyConfig::timeout`] per platform,
//! [`MAX_RATIO`]× decompressed, [`VerifyConfig::concurrency`] at once per process.
//!
//! A layer read to its end is checked against its digest; a layer whose program was found
//! before its end is trusted for the bytes read (the digest covers the whole blob: what was
//! read cannot be proven, nor does it matter more than the registry's word on the platform).
//!
//! A verdict is kept by its platform manifest's digest ([`Verdicts`], and the shared cache):
//! each platform is verified once, by one replica.

mod cache;
pub(crate) mod queue;
pub(crate) mod worker;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

pub use noe_core::binary::{Reason, Report, Verdict};

use crate::manifest::Descriptor;
use noe_core::Platform;

pub use cache::Verdicts;
pub use queue::{Queue, MAX_SEEN, QUEUE_CAPACITY};
pub(crate) use worker::Worker;
pub use worker::MAX_POOL_THREADS;

/// Compressed bytes read per platform by default (`--verify-max-bytes`).
pub const DEFAULT_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Verifications at once per process by default (`--verify-concurrency`).
pub const DEFAULT_CONCURRENCY: usize = 2;
/// Wall time per platform.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Decompressed bytes per compressed byte read (plus [`RATIO_SLACK`]); a bomb stops here.
pub const MAX_RATIO: u64 = 16;
/// Decompressed bytes allowed beyond the ratio (the first blocks of a layer).
pub const RATIO_SLACK: u64 = 1024 * 1024;
/// The largest zstd window accepted (log2): 8 MiB, the window zstd layers are written with
/// (containerd's and BuildKit's encoder default); a frame asking for more is a budget verdict.
pub const ZSTD_WINDOW_LOG_MAX: u32 = 23;
/// Registry requests one platform may send: its manifest, its config, each layer with a
/// redirect, and the auth exchanges around them.
pub const MAX_REQUESTS_PER_PLATFORM: usize = 2 * noe_core::binary::MAX_LAYERS + 16;

/// The bounds of verification (flags `--verify-max-bytes`, `--verify-concurrency`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyConfig {
    /// Compressed bytes read per platform.
    pub max_bytes: u64,
    /// Platforms verified at once in this process.
    pub concurrency: usize,
    /// Wall time per platform.
    pub timeout: Duration,
}

impl Default for VerifyConfig {
    fn default() -> Self {
        Self {
            max_bytes: DEFAULT_MAX_BYTES,
            concurrency: DEFAULT_CONCURRENCY,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// How one verification runs.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Decompress on a thread of the lowest scheduling class (`SCHED_IDLE`): the server's
    /// background verifications take only CPU nothing else wants.
    pub background: bool,
    /// Compressed bytes read so far, for a progress line.
    pub progress: Option<Arc<AtomicU64>>,
}

/// One platform's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlatformReport {
    pub platform: Platform,
    /// The platform's image manifest.
    pub digest: String,
    pub report: Report,
    /// Compressed layer bytes read (0 when a cache answered).
    pub bytes: u64,
    /// The verdict may change on another try (a registry failure, the wall time): it is not
    /// kept.
    pub transient: bool,
}

/// Every platform of an image, verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageReport {
    /// The normalized reference.
    pub image: String,
    /// The digest the image resolved to (the index's, or the single manifest's).
    pub digest: String,
    pub platforms: Vec<PlatformReport>,
}

/// How a layer's media type says it is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Storage {
    /// A tar, plain, gzip or zstd (the first bytes tell which).
    Tar,
    /// Not served by the registry (foreign, non-distributable, or with `urls`), or a media
    /// type that is no tar.
    Foreign,
}

/// The media types of layers read.
const TAR_LAYERS: [&str; 5] = [
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.diff.tar",
];

/// One layer of an image manifest.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Layer {
    #[serde(default)]
    pub media_type: String,
    pub digest: String,
    #[serde(default)]
    pub size: Option<u64>,
    #[serde(default)]
    pub urls: Vec<String>,
}

impl Layer {
    pub fn storage(&self) -> Storage {
        if self.urls.is_empty() && TAR_LAYERS.contains(&self.media_type.as_str()) {
            Storage::Tar
        } else {
            Storage::Foreign
        }
    }
}

/// An image manifest's config and layers (bottom first, as written).
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct ImageManifest {
    pub config: Descriptor,
    #[serde(default)]
    pub layers: Vec<Layer>,
}

impl ImageManifest {
    pub fn parse(body: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(body).map_err(|e| format!("not an image manifest ({e})"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn layers_of_foreign_and_unknown_media_types_are_not_read() {
        let manifest = br#"{"schemaVersion":2,"config":{"digest":"sha256:0"},"layers":[
            {"mediaType":"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip","digest":"sha256:1","urls":["https://example/x"]},
            {"mediaType":"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip","digest":"sha256:2"},
            {"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:3","urls":["https://example/y"]},
            {"mediaType":"application/vnd.oci.image.layer.nydus.blob.v1","digest":"sha256:4"},
            {"mediaType":"application/vnd.oci.image.layer.v1.tar+zstd","digest":"sha256:5","size":9},
            {"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","digest":"sha256:6"}
        ]}"#;
        let parsed = ImageManifest::parse(manifest).unwrap();
        let storage: Vec<Storage> = parsed.layers.iter().map(Layer::storage).collect();
        use Storage::{Foreign, Tar};
        assert_eq!(storage, [Foreign, Foreign, Foreign, Foreign, Tar, Tar]);
        assert_eq!(parsed.layers[4].size, Some(9));
        assert!(ImageManifest::parse(b"{}").is_err());
    }
}
