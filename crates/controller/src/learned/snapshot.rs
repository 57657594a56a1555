//! The learned store as read: the valid entries, each held once and compactly (its stored JSON,
//! its digest, its key as bytes and its time), sorted by digest so a digest's corrections are
//! found by binary search and built when asked; the garbage reported one key at a time; and what
//! a write keeps (the newest evidence, within the bounds). Pure.

use std::collections::BTreeMap;

use noe_core::truth::Correction;

use super::entry::{Entry, Garbage};

/// The most data bytes (keys and values) a write leaves in the ConfigMap: half of the
/// apiserver's 1 MiB object limit.
pub const MAX_DATA_BYTES: usize = 512 * 1024;
/// The most keys read from one ConfigMap (a hand edit may add any number): the others are
/// reported together and skipped.
pub const MAX_KEYS_READ: usize = 10_000;
/// The most garbage keys named one by one (the others are counted).
const MAX_GARBAGE_NAMED: usize = 100;

/// What the store holds now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// The ConfigMap exists.
    pub exists: bool,
    /// Its `resourceVersion` (the precondition of the next write).
    pub resource_version: Option<String>,
    /// The valid entries, sorted by digest and key.
    entries: Vec<Stored>,
    /// The keys not used, with why (at most [`MAX_GARBAGE_NAMED`]).
    pub garbage: Vec<(String, Garbage)>,
    /// How many keys were not used (the named ones included).
    pub garbage_count: usize,
}

/// One valid entry as held: the value as stored (checked by [`Entry::parse`]; the entry and its
/// correction are parsed from it again when asked), and what finding and evicting it needs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stored {
    digest: Box<str>,
    /// The data key's 16 bytes (a valid entry's key is 32 hex digits).
    key: [u8; 16],
    /// Seconds since the epoch of its evidence.
    time: i64,
    value: Box<str>,
}

impl Stored {
    fn key(&self) -> String {
        hex::encode(self.key)
    }

    fn entry(&self) -> Option<Entry> {
        serde_json::from_str(&self.value).ok()
    }
}

/// The 16 bytes of a data key of 32 hex digits.
fn key_bytes(key: &str) -> Option<[u8; 16]> {
    let mut bytes = [0u8; 16];
    hex::decode_to_slice(key, &mut bytes).ok()?;
    Some(bytes)
}

impl Snapshot {
    /// The store read from a ConfigMap's `data` (`None`: the ConfigMap does not exist). The
    /// values kept are the very strings of `data`, not copies.
    pub fn read(
        data: Option<BTreeMap<String, String>>,
        resource_version: Option<String>,
        max_entries: usize,
    ) -> Self {
        let mut snapshot = Self {
            exists: data.is_some(),
            resource_version,
            ..Self::default()
        };
        let mut valid: Vec<Stored> = Vec::new();
        for (index, (key, value)) in data.into_iter().flatten().enumerate() {
            if index >= MAX_KEYS_READ {
                snapshot.refuse(
                    &key,
                    Garbage(format!("past the first {MAX_KEYS_READ} keys")),
                );
                continue;
            }
            let parsed = Entry::parse(&key, &value).and_then(|entry| {
                let bytes = key_bytes(&key)
                    .ok_or_else(|| Garbage("key is not 32 hexadecimal digits".into()))?;
                Ok((entry, bytes))
            });
            match parsed {
                Ok((entry, bytes)) => valid.push(Stored {
                    time: entry.time(),
                    digest: entry.digest.into_boxed_str(),
                    key: bytes,
                    value: value.into_boxed_str(),
                }),
                Err(garbage) => snapshot.refuse(&key, garbage),
            }
        }
        // More valid entries than allowed (a hand edit, or a lowered bound): the newest are used.
        if valid.len() > max_entries {
            valid.sort_by(|a, b| b.time.cmp(&a.time).then_with(|| a.key.cmp(&b.key)));
            for stored in valid.split_off(max_entries) {
                snapshot.refuse(
                    &stored.key(),
                    Garbage(format!("past the newest {max_entries} entries")),
                );
            }
        }
        valid.sort_by(|a, b| a.digest.cmp(&b.digest).then_with(|| a.key.cmp(&b.key)));
        valid.shrink_to_fit();
        snapshot.entries = valid;
        snapshot
    }

    fn refuse(&mut self, key: &str, garbage: Garbage) {
        self.garbage_count = self.garbage_count.saturating_add(1);
        if self.garbage.len() < MAX_GARBAGE_NAMED {
            self.garbage.push((crate::objects::cut(key, 253), garbage));
        }
    }

    /// How many valid entries it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds no valid entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether a valid entry is stored under `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        key_bytes(key).is_some_and(|bytes| self.entries.iter().any(|s| s.key == bytes))
    }

    /// The keys of the valid entries.
    pub fn keys(&self) -> impl Iterator<Item = String> + '_ {
        self.entries.iter().map(Stored::key)
    }

    /// The valid entries with their keys, parsed (for people: `noe learned list`).
    pub fn entries(&self) -> Vec<(String, Entry)> {
        self.entries
            .iter()
            .filter_map(|stored| Some((stored.key(), stored.entry()?)))
            .collect()
    }

    /// The data the valid entries are stored as.
    pub fn data(&self) -> BTreeMap<String, String> {
        self.entries
            .iter()
            .map(|stored| (stored.key(), stored.value.to_string()))
            .collect()
    }

    /// The corrections of `digest` (empty when none), built from its entries.
    pub fn corrections(&self, digest: &str) -> Vec<Correction> {
        let start = self
            .entries
            .partition_point(|stored| &*stored.digest < digest);
        let mut corrections: Vec<Correction> = Vec::new();
        for stored in self.entries.iter().skip(start) {
            if &*stored.digest != digest {
                break;
            }
            if let Some(correction) = stored.entry().and_then(|entry| entry.correction()) {
                if !corrections.contains(&correction) {
                    corrections.push(correction);
                }
            }
        }
        corrections
    }

    /// Whether the set of corrections differs from `other`'s (the generation then moves).
    pub fn corrects_differently(&self, other: &Self) -> bool {
        self.entries != other.entries
    }

    /// The data a write leaves: the valid entries and `new` ones (an entry already present by
    /// key is kept as it is), the oldest evidence dropped until at most `max_entries` remain
    /// within [`MAX_DATA_BYTES`]. Returns the data and the keys of `new` actually added.
    pub fn with(
        &self,
        new: &[Entry],
        max_entries: usize,
    ) -> (BTreeMap<String, String>, Vec<String>) {
        // (time, key, value), newest first once sorted; the oldest are cut off the end.
        let mut all: Vec<(i64, String, String)> = self
            .entries
            .iter()
            .map(|stored| (stored.time, stored.key(), stored.value.to_string()))
            .collect();
        let mut added = Vec::new();
        for entry in new {
            let key = entry.key();
            if all.iter().any(|(_, known, _)| *known == key) {
                continue;
            }
            added.push(key.clone());
            all.push((entry.time(), key, entry.to_json()));
        }
        all.sort_by(|(time, key, _), (other_time, other_key, _)| {
            other_time.cmp(time).then_with(|| key.cmp(other_key))
        });
        let mut data = BTreeMap::new();
        let mut bytes = 0usize;
        for (_, key, value) in all {
            let size = key.len().saturating_add(value.len());
            if data.len() >= max_entries || bytes.saturating_add(size) > MAX_DATA_BYTES {
                added.retain(|added| *added != key);
                continue;
            }
            bytes = bytes.saturating_add(size);
            data.insert(key, value);
        }
        (data, added)
    }
}
