//! The generation of the node-level credentials: a counter that grows each time a reload finds
//! the contents of a docker or containerd configuration file changed. The registry's platform
//! cache records it with every answer found with a credential, and serves such an answer only
//! while the generation is the same: a credential added, rotated or revoked in a file is used by
//! the next lookup of every image, not only once the cached answers expire.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A shared counter of credential changes. Cheap to clone; clones count together.
#[derive(Clone, Debug, Default)]
pub struct Generation(Arc<AtomicU64>);

impl Generation {
    /// The current generation.
    pub fn current(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// The credentials changed.
    pub fn bump(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    /// Bumps when a reload found contents other than the `previous` ones (a first load, with
    /// nothing before it, is no change).
    pub fn note<T: PartialEq>(&self, previous: Option<&T>, loaded: &T) {
        if previous.is_some_and(|previous| previous != loaded) {
            self.bump();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_change_after_a_first_load_counts() {
        let generation = Generation::default();
        let clone = generation.clone();
        generation.note(None, &1);
        generation.note(Some(&1), &1);
        assert_eq!(clone.current(), 0);
        generation.note(Some(&1), &2);
        assert_eq!(clone.current(), 1);
    }
}
