//! Platforms answered recently, per image as written in the pod and the credentials context it
//! was looked up in (namespace and pull secret names). A warm admission then skips the credential
//! matching, reference normalization and cache-key hashing of every image (docs/benchmarks.md,
//! "Warm path").
//!
//! Entries live a few seconds at most (the reload interval of the credential files and hosts
//! configuration), never longer than `--cache-ttl`; only successful lookups of pods whose pull
//! secrets were all readable are remembered, so failures keep their metrics, warnings and the
//! registry's short failure cache.

use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::{Duration, Instant};

use noe_registry::Platform;

/// How long an answer is reused at most.
pub const MEMO_TTL: Duration = Duration::from_secs(10);
/// Images remembered at most (the images admitted in the last seconds).
pub const MEMO_MAX: usize = 4096;

/// Where a set of lookups was made: the pod's namespace and `imagePullSecrets` names.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    pub namespace: &'a str,
    pub pull_secrets: &'a [String],
}

/// The memo. Keys are 128-bit hashes under per-process random keys: no string is stored.
pub struct Memo {
    answers: quick_cache::sync::Cache<u128, (Arc<[Platform]>, Instant)>,
    ttl: Duration,
    hashers: [RandomState; 2],
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memo")
            .field("ttl", &self.ttl)
            .field("entries", &self.answers.len())
            .finish_non_exhaustive()
    }
}

impl Memo {
    /// Answers reused for `ttl` (at most [`MEMO_TTL`]); `None` when `ttl` is zero.
    pub fn new(ttl: Duration) -> Option<Self> {
        let ttl = ttl.min(MEMO_TTL);
        (!ttl.is_zero()).then(|| Self {
            answers: quick_cache::sync::Cache::new(MEMO_MAX),
            ttl,
            hashers: [RandomState::new(), RandomState::new()],
        })
    }

    fn key(&self, context: Context<'_>, image: &str) -> u128 {
        let [low, high] = self
            .hashers
            .each_ref()
            .map(|h| h.hash_one((context.namespace, context.pull_secrets, image)));
        (u128::from(high) << 64) | u128::from(low)
    }

    /// The platforms of `image` looked up in `context` less than the TTL ago.
    pub fn get(&self, context: Context<'_>, image: &str) -> Option<Arc<[Platform]>> {
        let key = self.key(context, image);
        match self.answers.get(&key) {
            Some((platforms, expires)) if expires > Instant::now() => Some(platforms),
            Some(_) => {
                self.answers.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Remembers a successful lookup.
    pub fn insert(&self, context: Context<'_>, image: &str, platforms: Arc<[Platform]>) {
        let key = self.key(context, image);
        self.answers
            .insert(key, (platforms, Instant::now() + self.ttl));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn arm() -> Arc<[Platform]> {
        Arc::from(vec![Platform::new("linux", "arm64", None)])
    }

    #[test]
    fn answers_are_kept_per_context() {
        let memo = Memo::new(Duration::from_secs(60)).unwrap();
        assert_eq!(memo.ttl, MEMO_TTL);
        let secrets = vec!["regcred".to_owned()];
        let team = Context {
            namespace: "team",
            pull_secrets: &secrets,
        };
        memo.insert(team, "registry.corp/app:1", arm());
        assert_eq!(memo.get(team, "registry.corp/app:1").unwrap(), arm());
        assert!(memo.get(team, "registry.corp/app:2").is_none());
        let other_namespace = Context {
            namespace: "other",
            pull_secrets: &secrets,
        };
        assert!(memo.get(other_namespace, "registry.corp/app:1").is_none());
        let no_secret = Context {
            namespace: "team",
            pull_secrets: &[],
        };
        assert!(memo.get(no_secret, "registry.corp/app:1").is_none());
    }

    #[test]
    fn answers_expire() {
        let memo = Memo::new(Duration::from_millis(1)).unwrap();
        let context = Context {
            namespace: "team",
            pull_secrets: &[],
        };
        memo.insert(context, "app:1", arm());
        std::thread::sleep(Duration::from_millis(5));
        assert!(memo.get(context, "app:1").is_none());
        assert!(Memo::new(Duration::ZERO).is_none());
    }
}
