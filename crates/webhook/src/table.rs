//! A bounded table of answers remembered under keyed hashes: the admission's decision memo
//! ([`crate::admission::memo`]) and the lookup endpoint's answers ([`crate::policy_endpoint`]). Each
//! user says what makes a remembered answer still right; this only holds them.
//!
//! Keys are keyed 128-bit hashes ([`noe_registry::cache::keyed_hash`]: a per-process secret key,
//! so no one can choose two requests that share an entry). Values are bounded by their bytes
//! ([`Weighed`]), evicted S3-FIFO by [`quick_cache`]; one heavier than a 64th of the table is
//! not kept.

use std::hash::Hash;
use std::sync::Arc;

/// What a remembered value holds, in bytes (about).
pub trait Weighed {
    fn weight(&self) -> u64;
}

#[derive(Clone, Copy, Debug)]
struct ByWeight;

impl<V: Weighed> quick_cache::Weighter<u128, Arc<V>> for ByWeight {
    fn weight(&self, _key: &u128, value: &Arc<V>) -> u64 {
        value.weight()
    }
}

/// Remembered values, at most `max_bytes` of them.
pub struct Table<V> {
    table: quick_cache::sync::Cache<u128, Arc<V>, ByWeight, foldhash::fast::RandomState>,
    max_value_bytes: u64,
}

impl<V: Weighed> std::fmt::Debug for Table<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("entries", &self.table.len())
            .field("bytes", &self.table.weight())
            .finish_non_exhaustive()
    }
}

impl<V: Weighed> Table<V> {
    /// At most `max_bytes`, sized for about `entries` values.
    pub fn new(max_bytes: u64, entries: usize) -> Self {
        Self {
            table: quick_cache::sync::Cache::with(
                entries.max(1),
                max_bytes.max(1),
                ByWeight,
                foldhash::fast::RandomState::default(),
                quick_cache::sync::DefaultLifecycle::default(),
            ),
            max_value_bytes: max_bytes / 64,
        }
    }

    /// The key of `value` (a tuple naming its use first, so two uses never share keys).
    pub fn key(value: &(impl Hash + ?Sized)) -> u128 {
        noe_registry::cache::keyed_hash(value)
    }

    /// The value remembered under `key`.
    pub fn get(&self, key: u128) -> Option<Arc<V>> {
        self.table.get(&key)
    }

    /// Remembers `value` under `key`, unless it is heavier than a 64th of the table.
    pub fn remember(&self, key: u128, value: V) {
        if value.weight() <= self.max_value_bytes {
            self.table.insert(key, Arc::new(value));
        }
    }

    /// Values held.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Bytes held (their [`Weighed::weight`]).
    #[cfg(test)]
    pub fn weight(&self) -> u64 {
        self.table.weight()
    }

    /// The largest value kept.
    #[cfg(test)]
    pub fn max_value_bytes(&self) -> u64 {
        self.max_value_bytes
    }
}
