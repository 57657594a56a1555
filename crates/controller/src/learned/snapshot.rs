//! The learned store as read: the valid entries, indexed by digest, and the garbage reported
//! one key at a time; and what a write keeps (the newest evidence, within the bounds). Pure.

use std::collections::{BTreeMap, HashMap};

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
    /// The valid entries, by key.
    pub entries: BTreeMap<String, Entry>,
    /// The corrections by digest (built from `entries`).
    by_digest: HashMap<String, Vec<Correction>>,
    /// The keys not used, with why (at most [`MAX_GARBAGE_NAMED`]).
    pub garbage: Vec<(String, Garbage)>,
    /// How many keys were not used (the named ones included).
    pub garbage_count: usize,
}

impl Snapshot {
    /// The store read from a ConfigMap's `data` (`None`: the ConfigMap does not exist).
    pub fn read(
        data: Option<&BTreeMap<String, String>>,
        resource_version: Option<String>,
        max_entries: usize,
    ) -> Self {
        let mut snapshot = Self {
            exists: data.is_some(),
            resource_version,
            ..Self::default()
        };
        let data = data.into_iter().flatten();
        let mut valid: Vec<(String, Entry)> = Vec::new();
        for (index, (key, value)) in data.enumerate() {
            if index >= MAX_KEYS_READ {
                snapshot.refuse(key, Garbage(format!("past the first {MAX_KEYS_READ} keys")));
                continue;
            }
            match Entry::parse(key, value) {
                Ok(entry) => valid.push((key.clone(), entry)),
                Err(garbage) => snapshot.refuse(key, garbage),
            }
        }
        // More valid entries than allowed (a hand edit, or a lowered bound): the newest are used.
        if valid.len() > max_entries {
            valid.sort_by_key(|(key, entry)| (std::cmp::Reverse(entry.time()), key.clone()));
            for (key, _) in valid.split_off(max_entries) {
                snapshot.refuse(
                    &key,
                    Garbage(format!("past the newest {max_entries} entries")),
                );
            }
        }
        for (key, entry) in valid {
            if let Some(correction) = entry.correction() {
                let corrections = snapshot.by_digest.entry(entry.digest.clone()).or_default();
                if !corrections.contains(&correction) {
                    corrections.push(correction);
                }
            }
            snapshot.entries.insert(key, entry);
        }
        snapshot
    }

    fn refuse(&mut self, key: &str, garbage: Garbage) {
        self.garbage_count = self.garbage_count.saturating_add(1);
        if self.garbage.len() < MAX_GARBAGE_NAMED {
            self.garbage.push((crate::objects::cut(key, 253), garbage));
        }
    }

    /// The corrections of `digest`.
    pub fn corrections(&self, digest: &str) -> Option<&[Correction]> {
        self.by_digest.get(digest).map(Vec::as_slice)
    }

    /// Whether the set of corrections differs from `other`'s (the generation then moves).
    pub fn corrects_differently(&self, other: &Self) -> bool {
        self.entries.len() != other.entries.len()
            || self.entries.iter().zip(other.entries.iter()).any(
                |((key, entry), (other_key, other_entry))| key != other_key || entry != other_entry,
            )
    }

    /// The data a write leaves: the valid entries and `new` ones (an entry already present by
    /// key is kept as it is), the oldest evidence dropped until at most `max_entries` remain
    /// within [`MAX_DATA_BYTES`]. Returns the data and the keys of `new` actually added.
    pub fn with(
        &self,
        new: &[Entry],
        max_entries: usize,
    ) -> (BTreeMap<String, String>, Vec<String>) {
        let mut all: Vec<(String, Entry)> = self
            .entries
            .iter()
            .map(|(key, entry)| (key.clone(), entry.clone()))
            .collect();
        let mut added = Vec::new();
        for entry in new {
            let key = entry.key();
            if all.iter().any(|(known, _)| *known == key) {
                continue;
            }
            added.push(key.clone());
            all.push((key, entry.clone()));
        }
        // Newest first; the oldest are cut off the end.
        all.sort_by_key(|(key, entry)| (std::cmp::Reverse(entry.time()), key.clone()));
        let mut data = BTreeMap::new();
        let mut bytes = 0usize;
        for (key, entry) in all {
            let value = entry.to_json();
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
