//! The compact form a resolution takes inside the cache.
//!
//! 100k cached images must fit in well under 64 MiB (DESIGN.md §5); a plain `Resolution` costs
//! about 900 bytes in a dozen allocations. Here the digest is 32 raw bytes, the media type a
//! small index, platform sets and credential sources (few distinct values across a cluster) are
//! shared, and the image names are not stored at all: the caller has them at hand. The entry is
//! held inline by the cache (cloning it only bumps reference counts); a `Resolution` is rebuilt
//! on each hit.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::manifest::{DOCKER_LIST, DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST};
use crate::{Platform, Resolution};

const MEDIA_TYPES: [&str; 4] = [OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST];
/// Bound on each intern table; beyond it values are stored unshared.
const INTERN_MAX: usize = 4096;

#[derive(Clone, Debug)]
enum Digest {
    Sha256([u8; 32]),
    Other(Box<str>),
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
    /// `host[:port]` of the containerd mirror that served the lookup (shared).
    mirror: Option<Arc<str>>,
}

impl Entry {
    /// The platforms, shared with the cache.
    pub fn platforms(&self) -> Arc<[Platform]> {
        self.platforms.clone()
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
            digest: match &self.digest {
                Digest::Sha256(bytes) => format!("sha256:{}", hex::encode(bytes)),
                Digest::Other(digest) => digest.to_string(),
            },
            media_type: match &self.media_type {
                MediaType::Known(i) => MEDIA_TYPES[usize::from(*i)].to_owned(),
                MediaType::Other(media_type) => media_type.to_string(),
            },
            credential_source: self.credential_source.as_deref().map(str::to_owned),
            platforms: self.platforms.to_vec(),
        }
    }
}

/// Shares platform sets and credential source names between entries.
#[derive(Debug, Default)]
pub struct Interner {
    platforms: Mutex<HashSet<Arc<[Platform]>>>,
    sources: Mutex<HashSet<Arc<str>>>,
}

impl Interner {
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
            .map(|host| intern(&self.sources, host));
        let digest = digest
            .strip_prefix("sha256:")
            .and_then(|hex| {
                let mut bytes = [0u8; 32];
                hex::decode_to_slice(hex, &mut bytes).ok()?;
                // Only a lower-case encoding round-trips.
                (hex::encode(bytes) == hex).then_some(Digest::Sha256(bytes))
            })
            .unwrap_or_else(|| Digest::Other(digest.into_boxed_str()));
        let media_type = MEDIA_TYPES
            .iter()
            .position(|known| *known == media_type)
            .and_then(|i| u8::try_from(i).ok())
            .map_or_else(
                || MediaType::Other(media_type.into_boxed_str()),
                MediaType::Known,
            );
        Entry {
            digest,
            media_type,
            credential_source: credential_source.map(|s| intern(&self.sources, s.as_str())),
            platforms: intern(&self.platforms, platforms.as_slice()),
            mirror,
        }
    }
}

fn intern<T: ?Sized + Eq + std::hash::Hash>(table: &Mutex<HashSet<Arc<T>>>, value: &T) -> Arc<T>
where
    Arc<T>: for<'a> From<&'a T>,
{
    let Ok(mut table) = table.lock() else {
        return Arc::from(value);
    };
    if let Some(shared) = table.get(value) {
        return shared.clone();
    }
    let shared: Arc<T> = Arc::from(value);
    if table.len() < INTERN_MAX {
        table.insert(shared.clone());
    }
    shared
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn resolution(digest: &str, media_type: &str, resolved: &str) -> Resolution {
        Resolution {
            image: "docker.io/library/nginx:latest".into(),
            resolved: resolved.into(),
            digest: digest.into(),
            media_type: media_type.into(),
            credential_source: Some("pull-secret:default/regcred".into()),
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
        assert!(Arc::ptr_eq(
            entries[0].credential_source.as_ref().unwrap(),
            entries[2].credential_source.as_ref().unwrap()
        ));
    }
}
