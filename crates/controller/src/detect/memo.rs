//! What detection remembers per container (a hash of the pod's UID and the container's name, 8
//! bytes): the restart whose log was read last, whether the pod's Event for it was written, and
//! how many reads found nothing. Bounded: past [`MAX_CONTAINERS`] the oldest are forgotten.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash as _, Hasher as _};

/// Containers remembered.
pub(crate) const MAX_CONTAINERS: usize = 100_000;
/// Logs read without finding an exec format error, after which a container's log is not read
/// again (it crashes for another reason).
pub(crate) const MAX_MISSES: u8 = 3;

#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    /// The restart count whose previous log was (or is being) read.
    read: Option<u32>,
    /// The Event was written: nothing more is done for this container.
    reported: bool,
    misses: u8,
}

/// Per container, what was done.
#[derive(Debug, Default)]
pub(crate) struct Memo {
    seen: HashMap<u64, Seen>,
    /// Insertion order, for forgetting the oldest.
    order: VecDeque<u64>,
}

/// The memo key of a container of a pod.
pub(crate) fn key(uid: &str, container: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    uid.hash(&mut hasher);
    container.hash(&mut hasher);
    hasher.finish()
}

impl Memo {
    fn entry(&mut self, key: u64) -> &mut Seen {
        if !self.seen.contains_key(&key) {
            if self.seen.len() >= MAX_CONTAINERS {
                if let Some(oldest) = self.order.pop_front() {
                    self.seen.remove(&oldest);
                }
            }
            self.order.push_back(key);
        }
        self.seen.entry(key).or_default()
    }

    /// Whether the container's Event was written.
    pub(crate) fn reported(&self, key: u64) -> bool {
        self.seen.get(&key).is_some_and(|seen| seen.reported)
    }

    /// Marks the container's Event written.
    pub(crate) fn report(&mut self, key: u64) {
        self.entry(key).reported = true;
    }

    /// Forgets that the container's Event was written (writing it failed).
    pub(crate) fn unreport(&mut self, key: u64) {
        self.entry(key).reported = false;
    }

    /// Whether the previous log of `restart` may be read: not read yet, fewer than
    /// [`MAX_MISSES`] reads found nothing, no Event written. Marks it read when it may.
    pub(crate) fn claim_read(&mut self, key: u64, restart: u32) -> bool {
        let seen = self.entry(key);
        let new = seen.read.is_none_or(|read| restart > read);
        if seen.reported || seen.misses >= MAX_MISSES || !new {
            return false;
        }
        seen.read = Some(restart);
        true
    }

    /// A read found nothing.
    pub(crate) fn miss(&mut self, key: u64) {
        let seen = self.entry(key);
        seen.misses = seen.misses.saturating_add(1);
    }

    /// How many containers are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.seen.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_read_per_restart_and_none_after_the_event_or_three_misses() {
        let mut memo = Memo::default();
        let app = key("uid-1", "app");
        assert!(memo.claim_read(app, 1));
        assert!(!memo.claim_read(app, 1), "never twice for the same restart");
        assert!(!memo.claim_read(app, 0), "nor an older one");
        memo.miss(app);
        assert!(memo.claim_read(app, 2));
        memo.miss(app);
        assert!(memo.claim_read(app, 3));
        memo.miss(app);
        assert!(
            !memo.claim_read(app, 4),
            "three misses: it crashes for another reason"
        );
        let other = key("uid-1", "sidecar");
        assert_ne!(app, other);
        assert!(!memo.reported(other));
        memo.report(other);
        assert!(memo.reported(other));
        assert!(!memo.claim_read(other, 7), "reported: nothing more");
        assert_eq!(memo.len(), 2);
    }

    #[test]
    fn the_oldest_containers_are_forgotten_past_the_bound() {
        let mut memo = Memo::default();
        for n in 0..=MAX_CONTAINERS {
            memo.report(key("uid", &n.to_string()));
        }
        assert_eq!(memo.len(), MAX_CONTAINERS);
        assert!(!memo.reported(key("uid", "0")));
        assert!(memo.reported(key("uid", &MAX_CONTAINERS.to_string())));
    }
}
