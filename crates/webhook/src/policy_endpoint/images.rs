//! From keys to what is known of each, cache first, within a deadline: each distinct key is
//! read from the cache (no I/O); the others are looked up at once with the server's resolver
//! and node-level credentials, at most [`PER_REQUEST`] at a time for one request and
//! `--max-concurrent-lookups` in the whole endpoint. A key not answered by the deadline gets a
//! `timeout:` error of its own while the others keep their answers; its lookup, once started,
//! runs on (a task holding its slot, ended by the registry timeout) so the answer is cached for
//! the caller's next request. Slots are taken within the request's deadline, so the tasks left
//! running never exceed the endpoint's slots.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use noe_registry::cache::Stamp;
use noe_registry::Resolver;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::wire::{class, KeyAnswer};
use crate::resolve::{one_line, CredentialSource, PodSecrets};

/// Lookups in flight for one request: its share of the endpoint's, so one caller naming 256
/// images leaves slots for the others.
pub const PER_REQUEST: usize = 32;

/// Keys longer than this are answered `invalid:` without being parsed (a reference is at most
/// a few hundred characters).
pub const MAX_KEY_BYTES: usize = 1024;

/// Per-key error messages are cut to this many characters.
const MAX_ERROR_CHARS: usize = 512;

/// Where the platforms of an image come from: the seam tests script.
pub trait ImageSource: Send + Sync + 'static {
    /// The fresh cached answer of each of `images`, in order: no I/O (the warm path). One
    /// request's keys are asked together, so a source reads its clock and counts its hits once.
    fn cached(&self, images: &[&str]) -> Vec<Option<KeyAnswer>>;

    /// [`ImageSource::cached`], and when the source can tell, what those answers depend on:
    /// while [`ImageSource::holds`] says so, asking again finds the same answers.
    fn cached_stamped(&self, images: &[&str]) -> (Vec<Option<KeyAnswer>>, Option<Stamp>) {
        (self.cached(images), None)
    }

    /// Whether answers found under `stamp` ([`ImageSource::cached_stamped`]) still hold.
    fn holds(&self, _stamp: &Stamp) -> bool {
        false
    }

    /// The answer, looking the image up (the cache included); errors carry their class.
    fn lookup<'a>(&'a self, image: &'a str) -> BoxFuture<'a, KeyAnswer>;
}

/// The server's resolver with the node-level credentials (a lookup request names no pod, so no
/// pull secret applies).
pub struct RegistryImages {
    resolver: Resolver,
    credentials: Arc<dyn CredentialSource>,
}

impl std::fmt::Debug for RegistryImages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryImages").finish_non_exhaustive()
    }
}

impl RegistryImages {
    pub fn new(resolver: Resolver, credentials: Arc<dyn CredentialSource>) -> Self {
        Self {
            resolver,
            credentials,
        }
    }
}

impl ImageSource for RegistryImages {
    fn cached(&self, images: &[&str]) -> Vec<Option<KeyAnswer>> {
        self.cached_stamped(images).0
    }

    fn cached_stamped(&self, images: &[&str]) -> (Vec<Option<KeyAnswer>>, Option<Stamp>) {
        let Some(mut probe) = self.resolver.cache_probe() else {
            return (vec![None; images.len()], None);
        };
        let answers = images
            .iter()
            .map(|image| {
                let (platforms, digest) = probe.fresh(image, None)?.into_found();
                Some(KeyAnswer::Found { platforms, digest })
            })
            .collect();
        (answers, Some(probe.stamp()))
    }

    fn holds(&self, stamp: &Stamp) -> bool {
        self.resolver.cache_holds(stamp)
    }

    fn lookup<'a>(&'a self, image: &'a str) -> BoxFuture<'a, KeyAnswer> {
        Box::pin(async move {
            let routed = match self.resolver.routed(image).await {
                Ok(routed) => routed,
                Err(error) => return failed(classify(&error), &one_line(&error)),
            };
            let pod = PodSecrets::default();
            let candidates = self.credentials.candidates("", &[], &pod, &routed).await;
            match self
                .resolver
                .resolve_routed(&routed, None, &candidates)
                .await
            {
                Ok(resolution) => KeyAnswer::Found {
                    platforms: Arc::from(resolution.platforms.clone()),
                    digest: resolution.digest.as_str().into(),
                },
                Err(error) => failed(classify(&error), &one_line(&error)),
            }
        })
    }
}

/// The class of a registry error (its [`LookupKind`](noe_core::decide::LookupKind), in the
/// endpoint's words).
pub fn classify(error: &noe_registry::Error) -> &'static str {
    use noe_core::decide::LookupKind as K;
    match crate::resolve::kind_of(error) {
        K::InvalidReference => class::INVALID,
        K::NotFound => class::NOT_FOUND,
        K::Unauthorized => class::AUTH,
        K::Timeout | K::Deadline => class::TIMEOUT,
        K::Unavailable => class::UNAVAILABLE,
        _ => class::REGISTRY,
    }
}

/// `class: message`, the message on one line and cut.
pub fn failed(class: &str, message: &str) -> KeyAnswer {
    let message: String = message
        .chars()
        .take(MAX_ERROR_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    KeyAnswer::Failed(format!("{class}: {message}"))
}

/// Keys checked for repeats by comparing them with the keys before them, below this many; a
/// map above.
const LINEAR_DEDUP: usize = 8;

/// What is known of each key: one answer per distinct key (a repeated key shares the first
/// one's), and how many distinct keys failed.
#[derive(Debug, Default)]
pub struct Answers<'a, K> {
    keys: &'a [K],
    /// For each key, in order, the index of its answer in `distinct`.
    slots: Vec<usize>,
    distinct: Vec<KeyAnswer>,
    pub failed: usize,
    /// Every answer came from the cache (or is an invalid key's): what they depend on.
    pub stamp: Option<Stamp>,
}

impl<K: AsRef<str>> Answers<'_, K> {
    /// The answer for the `i`th key.
    pub fn at(&self, i: usize) -> Option<&KeyAnswer> {
        self.distinct.get(*self.slots.get(i)?)
    }

    /// The answer for `key` (its first occurrence).
    pub fn of(&self, key: &str) -> Option<&KeyAnswer> {
        self.at(self.keys.iter().position(|k| k.as_ref() == key)?)
    }

    /// Distinct keys.
    pub fn distinct(&self) -> usize {
        self.distinct.len()
    }

    /// Leaves out of each found image's platforms those `corrections` prove false for its
    /// digest ([`noe_core::truth`]); an image left with none answers an empty list (it runs
    /// nowhere). A platform override's answer has no digest and is left as it is.
    pub fn correct(&mut self, corrections: &dyn noe_core::truth::Corrections) {
        for answer in &mut self.distinct {
            let KeyAnswer::Found { platforms, digest } = answer else {
                continue;
            };
            let known = digest.with_text(|text| {
                if text.is_empty() {
                    Vec::new()
                } else {
                    corrections.for_digest(text)
                }
            });
            if known.is_empty() {
                continue;
            }
            let corrected = noe_core::truth::correct(platforms, &known);
            if corrected.changed() {
                *platforms = Arc::from(corrected.kept);
            }
        }
    }
}

/// For each key, the index of the first key equal to it among the distinct ones, and how many
/// are distinct: one hash per key (none for a few keys).
fn slots(keys: &[impl AsRef<str>]) -> (Vec<usize>, Vec<bool>) {
    let mut slots = Vec::with_capacity(keys.len());
    let mut first = Vec::with_capacity(keys.len());
    let mut distinct = 0usize;
    if keys.len() <= LINEAR_DEDUP {
        for (i, key) in keys.iter().enumerate() {
            let earlier = keys
                .get(..i)
                .unwrap_or_default()
                .iter()
                .position(|k| k.as_ref() == key.as_ref())
                .and_then(|j| slots.get(j).copied());
            match earlier {
                Some(slot) => {
                    slots.push(slot);
                    first.push(false);
                }
                None => {
                    slots.push(distinct);
                    first.push(true);
                    distinct = distinct.saturating_add(1);
                }
            }
        }
    } else {
        // Seeded per process; at most MAX_KEYS keys, so even chosen collisions stay cheap.
        let mut seen: HashMap<&str, usize, foldhash::fast::RandomState> =
            HashMap::with_capacity_and_hasher(keys.len(), foldhash::fast::RandomState::default());
        for key in keys {
            match seen.entry(key.as_ref()) {
                std::collections::hash_map::Entry::Occupied(slot) => {
                    slots.push(*slot.get());
                    first.push(false);
                }
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(distinct);
                    slots.push(distinct);
                    first.push(true);
                    distinct = distinct.saturating_add(1);
                }
            }
        }
    }
    (slots, first)
}

/// Looks `keys` up: the cache first (one probe per distinct key), the misses at once under
/// `in_flight` (the endpoint's permits), each ending at `deadline`.
pub async fn answer<'a, K: AsRef<str> + Sync>(
    source: &Arc<dyn ImageSource>,
    in_flight: &Arc<Semaphore>,
    keys: &'a [K],
    deadline: Instant,
) -> Answers<'a, K> {
    let (slots, first) = slots(keys);
    let mut distinct: Vec<KeyAnswer> = Vec::with_capacity(keys.len());
    // Valid distinct keys, probed in the cache together, and the slot of each.
    let mut images: Vec<&'a str> = Vec::new();
    let mut probed: Vec<usize> = Vec::new();
    for (key, _) in keys.iter().zip(&first).filter(|(_, first)| **first) {
        let key = key.as_ref();
        if key.is_empty() || key.len() > MAX_KEY_BYTES {
            let why = if key.is_empty() {
                "empty image reference".to_owned()
            } else {
                format!("image reference longer than {MAX_KEY_BYTES} bytes")
            };
            distinct.push(failed(class::INVALID, &why));
            continue;
        }
        images.push(key);
        probed.push(distinct.len());
        // Replaced by the cache's or the lookup's answer below (an empty string does not
        // allocate).
        distinct.push(KeyAnswer::Failed(String::new()));
    }
    // Cache misses: their slot and key.
    let mut missed: Vec<(usize, &'a str)> = Vec::new();
    let (found, stamp) = source.cached_stamped(&images);
    for ((slot, key), found) in probed.into_iter().zip(images).zip(found) {
        match (found, distinct.get_mut(slot)) {
            (Some(found), Some(place)) => *place = found,
            _ => missed.push((slot, key)),
        }
    }
    let stamp = stamp.filter(|_| missed.is_empty());
    if !missed.is_empty() {
        let share = Arc::new(Semaphore::new(PER_REQUEST));
        let share = &share;
        let lookups = missed.into_iter().map(|(slot, image)| async move {
            let answer = tokio::time::timeout_at(deadline, async {
                let (Ok(share), Ok(permit)) = (
                    share.clone().acquire_owned().await,
                    in_flight.clone().acquire_owned().await,
                ) else {
                    return failed(class::UNAVAILABLE, "the endpoint is shutting down");
                };
                let source = source.clone();
                let owned = image.to_owned();
                let lookup = tokio::spawn(async move {
                    let answer = source.lookup(&owned).await;
                    drop((share, permit));
                    answer
                });
                lookup
                    .await
                    .unwrap_or_else(|_| failed(class::REGISTRY, "the lookup failed unexpectedly"))
            })
            .await
            .unwrap_or_else(|_| {
                failed(
                    class::TIMEOUT,
                    "not answered within the request's deadline (cache miss still being looked up)",
                )
            });
            (slot, answer)
        });
        for (slot, answer) in futures::future::join_all(lookups).await {
            if let Some(place) = distinct.get_mut(slot) {
                *place = answer;
            }
        }
    }
    let failed = distinct
        .iter()
        .filter(|answer| matches!(answer, KeyAnswer::Failed(_)))
        .count();
    Answers {
        keys,
        slots,
        distinct,
        failed,
        stamp,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use noe_core::Platform;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// `warm*` cached, `slow*` never answers, anything else found after a lookup.
    #[derive(Default)]
    struct Scripted {
        lookups: AtomicUsize,
        /// How many images each `cached` call asked for.
        asked: std::sync::Mutex<Vec<usize>>,
    }

    fn found(digest: &str) -> KeyAnswer {
        KeyAnswer::Found {
            platforms: Arc::from(vec![Platform::new("linux", "arm64", None)]),
            digest: digest.into(),
        }
    }

    impl ImageSource for Scripted {
        fn cached(&self, images: &[&str]) -> Vec<Option<KeyAnswer>> {
            self.asked.lock().unwrap().push(images.len());
            images
                .iter()
                .map(|image| image.starts_with("warm").then(|| found("sha256:warm")))
                .collect()
        }

        fn lookup<'a>(&'a self, image: &'a str) -> BoxFuture<'a, KeyAnswer> {
            self.lookups.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                if image.starts_with("slow") {
                    futures::future::pending::<()>().await;
                }
                found("sha256:cold")
            })
        }
    }

    /// Time is paused: the slow key times out at the deadline, alone; its lookup goes on,
    /// holding its slot.
    #[tokio::test(start_paused = true)]
    async fn cache_first_then_lookups_each_bounded() {
        let scripted = Arc::new(Scripted::default());
        let source: Arc<dyn ImageSource> = scripted.clone();
        let in_flight = Arc::new(Semaphore::new(4));
        let keys: Vec<String> = [
            "warm",
            "cold",
            "slow",
            "cold",
            "",
            &"x".repeat(2000),
            "warm-2",
            "warm",
        ]
        .iter()
        .map(|k| (*k).to_owned())
        .collect();
        let started = Instant::now();
        let answers = answer(
            &source,
            &in_flight,
            &keys,
            started + Duration::from_millis(700),
        )
        .await;
        assert_eq!(started.elapsed(), Duration::from_millis(700));
        assert_eq!(answers.of("warm"), Some(&found("sha256:warm")));
        assert_eq!(answers.of("cold"), Some(&found("sha256:cold")));
        assert_eq!(answers.at(3), Some(&found("sha256:cold")), "a repeat");
        assert_eq!(answers.distinct(), 6);
        assert_eq!(answers.at(7), Some(&found("sha256:warm")), "a repeat");
        assert_eq!(
            *scripted.asked.lock().unwrap(),
            [4],
            "every valid distinct key (warm, cold, slow, warm-2), asked of the cache at once"
        );
        let error = |key: &str| match answers.of(key).unwrap() {
            KeyAnswer::Failed(error) => error.clone(),
            other => panic!("{other:?}"),
        };
        assert!(error("slow").starts_with("timeout: "), "{}", error("slow"));
        assert!(error("").starts_with("invalid: empty"));
        assert!(error(&"x".repeat(2000)).starts_with("invalid: image reference longer"));
        assert_eq!(answers.failed, 3);
        // `cold` once though named twice; the warm and invalid keys never.
        assert_eq!(scripted.lookups.load(Ordering::SeqCst), 2);
        assert_eq!(in_flight.available_permits(), 3, "the slow lookup runs on");
    }

    #[test]
    fn classes() {
        use noe_registry::Error as E;
        let cases = [
            (
                E::NotFound {
                    reference: "r".into(),
                    registry: "h".into(),
                },
                "notfound",
            ),
            (
                E::Unauthorized {
                    reference: "r".into(),
                    registry: "h".into(),
                    status: 401,
                },
                "auth",
            ),
            (
                E::InvalidReference {
                    reference: "r".into(),
                    reason: "x".into(),
                },
                "invalid",
            ),
            (
                E::Timeout {
                    reference: "r".into(),
                    registry: "h".into(),
                    timeout_ms: 1,
                },
                "timeout",
            ),
            (
                E::RateLimited {
                    reference: "r".into(),
                    registry: "h".into(),
                },
                "unavailable",
            ),
            (
                E::NoPlatforms {
                    reference: "r".into(),
                    registry: "h".into(),
                },
                "registry",
            ),
        ];
        for (error, want) in cases {
            assert_eq!(classify(&error), want, "{error}");
        }
        assert_eq!(
            failed("auth", "a\nb"),
            KeyAnswer::Failed("auth: a b".to_owned())
        );
    }
}
