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
    /// A fresh cached answer: no I/O (the warm path).
    fn cached(&self, image: &str) -> Option<KeyAnswer>;

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
    fn cached(&self, image: &str) -> Option<KeyAnswer> {
        self.resolver
            .cached_digest(image, None)
            .map(|(platforms, digest)| KeyAnswer::Found { platforms, digest })
    }

    fn lookup<'a>(&'a self, image: &'a str) -> BoxFuture<'a, KeyAnswer> {
        Box::pin(async move {
            let pod = PodSecrets::default();
            let candidates = self.credentials.candidates("", &[], &pod, image).await;
            match self.resolver.resolve_in(image, None, &candidates).await {
                Ok(resolution) => KeyAnswer::Found {
                    platforms: Arc::from(resolution.platforms.clone()),
                    digest: resolution.digest.clone(),
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

/// What is known of each distinct key, and how many of them failed.
#[derive(Debug, Default)]
pub struct Answers<'a> {
    pub by_key: HashMap<&'a str, KeyAnswer>,
    pub failed: usize,
}

/// Looks `keys` up: the cache first, the misses at once under `in_flight` (the endpoint's
/// permits), each ending at `deadline`.
pub async fn answer<'a>(
    source: &Arc<dyn ImageSource>,
    in_flight: &Arc<Semaphore>,
    keys: &'a [String],
    deadline: Instant,
) -> Answers<'a> {
    let mut by_key: HashMap<&'a str, KeyAnswer> = HashMap::with_capacity(keys.len());
    let mut missed: Vec<&'a str> = Vec::new();
    for key in keys {
        let key = key.as_str();
        if by_key.contains_key(key) || missed.contains(&key) {
            continue;
        }
        if key.is_empty() || key.len() > MAX_KEY_BYTES {
            let why = if key.is_empty() {
                "empty image reference".to_owned()
            } else {
                format!("image reference longer than {MAX_KEY_BYTES} bytes")
            };
            by_key.insert(key, failed(class::INVALID, &why));
            continue;
        }
        match source.cached(key) {
            Some(found) => {
                by_key.insert(key, found);
            }
            None => missed.push(key),
        }
    }
    if !missed.is_empty() {
        let share = Arc::new(Semaphore::new(PER_REQUEST));
        let share = &share;
        let lookups = missed.into_iter().map(|image| async move {
            let answer = tokio::time::timeout_at(deadline, async {
                let (Ok(share), Ok(slot)) = (
                    share.clone().acquire_owned().await,
                    in_flight.clone().acquire_owned().await,
                ) else {
                    return failed(class::UNAVAILABLE, "the endpoint is shutting down");
                };
                let source = source.clone();
                let owned = image.to_owned();
                let lookup = tokio::spawn(async move {
                    let answer = source.lookup(&owned).await;
                    drop((share, slot));
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
            (image, answer)
        });
        for (image, answer) in futures::future::join_all(lookups).await {
            by_key.insert(image, answer);
        }
    }
    let failed = by_key
        .values()
        .filter(|answer| matches!(answer, KeyAnswer::Failed(_)))
        .count();
    Answers { by_key, failed }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use noe_registry::Platform;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// `warm*` cached, `slow*` never answers, anything else found after a lookup.
    #[derive(Default)]
    struct Scripted {
        lookups: AtomicUsize,
    }

    fn found(digest: &str) -> KeyAnswer {
        KeyAnswer::Found {
            platforms: Arc::from(vec![Platform::new("linux", "arm64", None)]),
            digest: digest.to_owned(),
        }
    }

    impl ImageSource for Scripted {
        fn cached(&self, image: &str) -> Option<KeyAnswer> {
            image.starts_with("warm").then(|| found("sha256:warm"))
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
        let keys: Vec<String> = ["warm", "cold", "slow", "cold", "", &"x".repeat(2000)]
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
        assert_eq!(answers.by_key["warm"], found("sha256:warm"));
        assert_eq!(answers.by_key["cold"], found("sha256:cold"));
        let error = |key: &str| match &answers.by_key[key] {
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
