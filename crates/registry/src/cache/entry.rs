//! The compact form a resolution takes inside the cache.
//!
//! 100k cached images must fit in well under 64 MiB (docs/benchmarks.md, Memory); a plain `Resolution` costs
//! about 900 bytes in a dozen allocations. Here the digest is 32 raw bytes, the media type a
//! small index, platform sets and credential sources (few distinct values across a cluster) are
//! shared, and the image names are not stored at all: the caller has them at hand. The entry is
//! held inline by the cache (cloning it only bumps reference counts); a `Resolution` is rebuilt
//! on each hit.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::manifest::{DOCKER_LIST, DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST};
use crate::Resolution;
use noe_core::Platform;

const MEDIA_TYPES: [&str; 4] = [OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST];
/// Bound on the values of each intern table; beyond it values are stored unshared (and weigh
/// on the cache's byte bound with their owner).
const INTERN_MAX: usize = 4096;
/// Bound on the bytes each intern table holds. Interned values are never dropped, so a registry
/// inventing platform sets must not be able to pin more than this.
const INTERN_MAX_BYTES: usize = 4 * 1024 * 1024;

/// A manifest digest: a `sha256:` one held as its 32 bytes (written out as text without an
/// allocation: the lookup endpoint answers one per cached key), any other as sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Digest {
    Sha256([u8; 32]),
    Other(Box<str>),
}

/// `sha256:` and 64 hexadecimal digits.
pub const SHA256_TEXT: usize = 71;

impl Digest {
    /// The digest in `text`: a lower-case `sha256:` digest as its bytes (only that encoding
    /// round-trips), anything else kept as it is.
    pub fn parse(text: &str) -> Self {
        text.strip_prefix("sha256:")
            .and_then(|hex| {
                let mut bytes = [0u8; 32];
                hex::decode_to_slice(hex, &mut bytes).ok()?;
                let digest = Self::Sha256(bytes);
                digest.is(text).then_some(digest)
            })
            .unwrap_or_else(|| Self::Other(text.into()))
    }

    /// The length of its text.
    pub fn text_len(&self) -> usize {
        match self {
            Self::Sha256(_) => SHA256_TEXT,
            Self::Other(text) => text.len(),
        }
    }

    /// The text of a `sha256:` digest, as ASCII bytes on the stack (no escaping ever needed);
    /// `None` for any other digest.
    pub fn sha256_text(&self) -> Option<[u8; SHA256_TEXT]> {
        let Self::Sha256(bytes) = self else {
            return None;
        };
        let mut text = [0u8; SHA256_TEXT];
        let (prefix, hex) = text.split_at_mut(7);
        prefix.copy_from_slice(b"sha256:");
        // Cannot fail: 64 digits for 32 bytes.
        hex::encode_to_slice(bytes, hex).ok()?;
        Some(text)
    }

    /// Calls `with` on its text (`sha256:...`), written on the stack.
    pub fn with_text<T>(&self, with: impl FnOnce(&str) -> T) -> T {
        match (self, self.sha256_text()) {
            (Self::Other(text), _) => with(text),
            (Self::Sha256(_), text) => with(
                text.as_ref()
                    .and_then(|text| std::str::from_utf8(text).ok())
                    .unwrap_or_default(),
            ),
        }
    }

    /// Whether its text is `text`, without building a string.
    pub fn is(&self, text: &str) -> bool {
        match self {
            Self::Sha256(_) => self
                .sha256_text()
                .is_some_and(|own| own.as_slice() == text.as_bytes()),
            Self::Other(own) => **own == *text,
        }
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.with_text(|text| f.write_str(text))
    }
}

impl From<&str> for Digest {
    fn from(text: &str) -> Self {
        Self::parse(text)
    }
}

#[derive(Clone, Debug)]
enum MediaType {
    Known(u8),
    Other(Box<str>),
}

/// One cached resolution, without its image names.
#[derive(Clone, Debug)]
pub struct Entry {
    digest: Digest,
    media_type: MediaType,
    credential_source: Option<Arc<str>>,
    platforms: Arc<[Platform]>,
    /// The platform set is held by the interner (its bytes are counted there, not here).
    shared_platforms: bool,
    /// `host[:port]` of the containerd mirror that served the lookup (shared).
    mirror: Option<Arc<str>>,
}

impl Entry {
    /// Whether it was found with a credential (not anonymously).
    pub fn found_with_credential(&self) -> bool {
        self.credential_source.is_some()
    }

    /// Bytes this entry holds on its own: itself, unshared strings, and its platform set unless
    /// the interner holds it.
    pub fn weight(&self) -> usize {
        let own = match &self.digest {
            Digest::Sha256(_) => 0,
            Digest::Other(digest) => digest.len(),
        } + match &self.media_type {
            MediaType::Known(_) => 0,
            MediaType::Other(media_type) => media_type.len(),
        };
        let platforms = if self.shared_platforms {
            0
        } else {
            platforms_weight(&self.platforms)
        };
        std::mem::size_of::<Self>()
            .saturating_add(own)
            .saturating_add(platforms)
    }

    /// The platforms, shared with the cache.
    pub fn platforms(&self) -> Arc<[Platform]> {
        self.platforms.clone()
    }

    /// The manifest digest (`sha256:...`).
    pub fn digest(&self) -> String {
        self.digest.to_string()
    }

    /// The platforms and the manifest digest, taken out of the entry (no reference count or
    /// string copied: the lookup endpoint's warm path).
    pub fn into_found(self) -> (Arc<[Platform]>, Digest) {
        (self.platforms, self.digest)
    }

    /// Whether the manifest digest is `digest`, without building a string.
    pub fn has_digest(&self, digest: &str) -> bool {
        self.digest.is(digest)
    }

    /// The media type of the manifest.
    pub fn media_type(&self) -> &str {
        match &self.media_type {
            MediaType::Known(i) => MEDIA_TYPES.get(usize::from(*i)).copied().unwrap_or(""),
            MediaType::Other(media_type) => media_type,
        }
    }

    /// The same content found again (a revalidation) with another credential (`None`:
    /// anonymously), at a mirror or (`None`) the registry's own server.
    pub fn found_again(
        &self,
        credential_source: Option<Arc<str>>,
        mirror: Option<Arc<str>>,
    ) -> Self {
        Self {
            credential_source,
            mirror,
            ..self.clone()
        }
    }

    /// The resolution this entry stands for, for `image` fetched as `resolved`.
    pub fn resolution(&self, image: &str, resolved: &str) -> Resolution {
        let resolved = match self.mirror.as_deref() {
            Some(host) => {
                let path = resolved.find('/').map_or("", |i| &resolved[i..]);
                format!("{host}{path}")
            }
            None => resolved.to_owned(),
        };
        Resolution {
            image: image.to_owned(),
            resolved,
            digest: self.digest(),
            media_type: self.media_type().to_owned(),
            credential_source: self.credential_source.as_deref().map(str::to_owned),
            platforms: self.platforms.to_vec(),
            answered_by: crate::cache::Answered::Cache,
        }
    }
}

/// Shares platform sets and credential source names between entries.
#[derive(Debug, Default)]
pub struct Interner {
    platforms: Mutex<Table<[Platform]>>,
    sources: Mutex<Table<str>>,
}

/// One intern table and the bytes its values hold.
#[derive(Debug)]
struct Table<T: ?Sized> {
    values: HashSet<Arc<T>>,
    bytes: usize,
}

impl<T: ?Sized> Default for Table<T> {
    fn default() -> Self {
        Self {
            values: HashSet::new(),
            bytes: 0,
        }
    }
}

fn platforms_weight(platforms: &[Platform]) -> usize {
    platforms
        .iter()
        .fold(0usize, |sum, p| sum.saturating_add(p.weight()))
}

impl Interner {
    /// The shared copy of a credential source name.
    pub fn source(&self, source: &str) -> Arc<str> {
        intern(&self.sources, source, str::len).0
    }

    /// The compact form of `resolution`, fetched as `target` (the reference after proxies): a
    /// `resolved` that differs names the mirror that served it.
    pub fn entry(&self, resolution: Resolution, target: &str) -> Entry {
        let Resolution {
            digest,
            media_type,
            credential_source,
            platforms,
            resolved,
            ..
        } = resolution;
        let mirror = (resolved != target)
            .then(|| resolved.split_once('/').map(|(host, _)| host))
            .flatten()
            .map(|host| intern(&self.sources, host, str::len).0);
        let digest = Digest::parse(&digest);
        let media_type = MEDIA_TYPES
            .iter()
            .position(|known| *known == media_type)
            .and_then(|i| u8::try_from(i).ok())
            .map_or_else(
                || MediaType::Other(media_type.into_boxed_str()),
                MediaType::Known,
            );
        let (platforms, shared_platforms) =
            intern(&self.platforms, platforms.as_slice(), platforms_weight);
        Entry {
            digest,
            media_type,
            credential_source: credential_source
                .map(|s| intern(&self.sources, s.as_str(), str::len).0),
            platforms,
            shared_platforms,
            mirror,
        }
    }
}

/// The shared copy of `value`, and whether the table holds it; a new value is added while the
/// table has room for it (count and bytes, `weight` giving a value's bytes).
fn intern<T: ?Sized + Eq + std::hash::Hash>(
    table: &Mutex<Table<T>>,
    value: &T,
    weight: impl Fn(&T) -> usize,
) -> (Arc<T>, bool)
where
    Arc<T>: for<'a> From<&'a T>,
{
    let Ok(mut table) = table.lock() else {
        return (Arc::from(value), false);
    };
    if let Some(shared) = table.values.get(value) {
        return (shared.clone(), true);
    }
    let shared: Arc<T> = Arc::from(value);
    let bytes = table.bytes.saturating_add(weight(value));
    let room = table.values.len() < INTERN_MAX && bytes <= INTERN_MAX_BYTES;
    if room {
        table.values.insert(shared.clone());
        table.bytes = bytes;
    }
    (shared, room)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_interner_holds_a_bounded_number_of_bytes() {
        let interner = Interner::default();
        let long = "a".repeat(32);
        let mut unshared = 0;
        for i in 0..2000 {
            let mut resolution = resolution("sha256:0", OCI_INDEX, "r.example/app:1");
            resolution.platforms = (0..64)
                .map(|j| Platform::new("linux", long.clone(), Some(&format!("v{i}x{j}"))))
                .collect();
            let entry = interner.entry(resolution, "r.example/app:1");
            if !entry.shared_platforms {
                unshared += 1;
                assert!(entry.weight() > 64 * std::mem::size_of::<Platform>());
            }
        }
        let held = interner.platforms.lock().unwrap().bytes;
        assert!(held <= INTERN_MAX_BYTES, "{held}");
        assert!(unshared > 0, "every set was interned");
    }

    fn resolution(digest: &str, media_type: &str, resolved: &str) -> Resolution {
        Resolution {
            image: "docker.io/library/nginx:latest".into(),
            resolved: resolved.into(),
            digest: digest.into(),
            media_type: media_type.into(),
            credential_source: Some("pull-secret:default/regcred".into()),
            answered_by: crate::cache::Answered::Cache,
            platforms: vec![
                Platform::new("linux", "amd64", None),
                Platform::new("linux", "arm", Some("v7")),
            ],
        }
    }

    #[test]
    fn a_mirror_that_served_is_kept() {
        let interner = Interner::default();
        let target = "docker.io/library/nginx:latest";
        let served = resolution(
            "sha256:0",
            OCI_INDEX,
            "mirror.corp:5000/library/nginx:latest",
        );
        let entry = interner.entry(served.clone(), target);
        let back = entry.resolution(&served.image, target);
        assert_eq!(back.resolved, "mirror.corp:5000/library/nginx:latest");
        let direct = interner.entry(resolution("sha256:0", OCI_INDEX, target), target);
        assert_eq!(direct.resolution(&served.image, target).resolved, target);
    }

    #[test]
    fn round_trips_and_shares() {
        let interner = Interner::default();
        let sha = format!("sha256:{}", "ab".repeat(32));
        let upper = format!("sha256:{}", "AB".repeat(32));
        let sha512 = format!("sha512:{}", "cd".repeat(64));
        let cases = [
            resolution(&sha, OCI_INDEX, "docker.io/library/nginx:latest"),
            resolution(&upper, DOCKER_MANIFEST, "proxy.corp/library/nginx:latest"),
            resolution(
                &sha512,
                "application/x-odd",
                "docker.io/library/nginx:latest",
            ),
        ];
        let mut entries = Vec::new();
        for original in cases {
            let entry = interner.entry(original.clone(), &original.resolved);
            let back = entry.resolution(&original.image, &original.resolved);
            assert_eq!(
                serde_json::to_value(&back).unwrap(),
                serde_json::to_value(&original).unwrap()
            );
            entries.push(entry);
        }
        assert!(Arc::ptr_eq(&entries[0].platforms, &entries[1].platforms));
        assert!(entries[0].shared_platforms);
        assert_eq!(entries[0].weight(), std::mem::size_of::<Entry>());
        assert!(Arc::ptr_eq(
            entries[0].credential_source.as_ref().unwrap(),
            entries[2].credential_source.as_ref().unwrap()
        ));
    }
}
