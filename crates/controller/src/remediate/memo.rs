//! What remediation remembers of the pods it judged, in 24 bytes per pod: a hash of the UID,
//! a fingerprint of what the verdict depends on (node and images), and when, in milliseconds
//! since the memo was made. At Kubernetes' 150,000 pods that is a few MiB, where UID strings
//! and instants cost several times more.

use std::collections::HashMap;
use std::hash::Hasher as _;
use std::time::Duration;

use tokio::time::Instant;

use crate::objects::PodRecord;

/// Pods remembered (then the memory is cleared; the worst case is a second lookup, or a second
/// Event, which the recorder folds into a series).
const MAX_ENTRIES: usize = 300_000;

/// UID hash → (fingerprint, milliseconds since `base`).
#[derive(Debug)]
pub(crate) struct Memo {
    entries: HashMap<u64, (u64, u64)>,
    base: Instant,
}

impl Default for Memo {
    fn default() -> Self {
        Self {
            entries: HashMap::new(),
            base: Instant::now(),
        }
    }
}

fn hash(parts: impl std::hash::Hash) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    parts.hash(&mut hasher);
    hasher.finish()
}

/// What a verdict depends on: the node and the images (an image may be changed in place).
fn fingerprint(pod: &PodRecord) -> u64 {
    hash((&pod.node_name, &pod.images))
}

impl Memo {
    fn millis(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.base).as_millis()).unwrap_or(u64::MAX)
    }

    /// Remembers `pod` as it is now.
    pub(crate) fn remember(&mut self, pod: &PodRecord, now: Instant) {
        if self.entries.len() >= MAX_ENTRIES {
            self.entries.clear();
        }
        let at = self.millis(now);
        self.entries.insert(hash(pod.uid()), (fingerprint(pod), at));
    }

    /// Whether `pod`, as it is now, was remembered less than `max_age` ago.
    pub(crate) fn knows(&self, pod: &PodRecord, max_age: Duration, now: Instant) -> bool {
        let max_age = u64::try_from(max_age.as_millis()).unwrap_or(u64::MAX);
        let now = self.millis(now);
        self.entries
            .get(&hash(pod.uid()))
            .is_some_and(|(seen, at)| {
                *seen == fingerprint(pod) && now.saturating_sub(*at) < max_age
            })
    }

    /// How many pods are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_is_known_until_it_changes_or_ages() {
        let mut memo = Memo::default();
        let base = Instant::now();
        let pod = PodRecord::new("shop", "web", "n1", &["app:1"]);
        assert!(!memo.knows(&pod, Duration::MAX, base));
        memo.remember(&pod, base);
        let later = |ms: u64| base + Duration::from_millis(ms);
        assert!(memo.knows(&pod, Duration::from_secs(1), later(999)));
        assert!(!memo.knows(&pod, Duration::from_secs(1), later(1000)));
        assert!(memo.knows(&pod, Duration::MAX, later(864_000_000)));
        let mut moved = pod.clone();
        moved.node_name = "n2".into();
        assert!(!memo.knows(&moved, Duration::MAX, base));
        let mut image = pod.clone();
        image.images = vec!["app:2".into()];
        assert!(!memo.knows(&image, Duration::MAX, base));
        let other = PodRecord::new("shop", "api", "n1", &["app:1"]);
        assert!(!memo.knows(&other, Duration::MAX, base));
        memo.remember(&pod, base);
        assert_eq!(memo.len(), 1);
    }
}
