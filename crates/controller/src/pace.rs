//! Pacing of the reflectors' lists and watches, as client-go's reflector does it and
//! kube-runtime's watcher does not:
//!
//! - **very short watches back off**: a watch the server (or a proxy) ends less than
//!   [`MIN_WATCH`] after it was opened is not an error to kube-runtime, which reopens it at once
//!   — a tight loop against a struggling apiserver. Here the next list or watch of that
//!   collection waits 800 ms, doubling to 30 s (with jitter), and the delay resets only once a
//!   watch lived [`MIN_WATCH`] or more;
//! - **`Retry-After` on a `429` or `503`** of a list or watch is honoured (at most
//!   [`MAX_RETRY_AFTER`]): kube-runtime drops the header and retries after its own backoff.
//!
//! It is a wrapper of `kube::Client` ([`client`]) that looks only at `GET`s that are watches
//! (`watch=1`) or paged lists (`limit=`, which every reflector list carries); every other request
//! passes untouched. State is per collection (path and selectors), bounded.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use http_body_util::BodyExt as _;
use kube::client::Body;
use tokio::time::Instant;

/// A watch that lived less than this was cut short.
pub(crate) const MIN_WATCH: Duration = Duration::from_secs(1);
/// The first delay after a short watch (client-go's reflector backoff).
const FIRST_BACKOFF: Duration = Duration::from_millis(800);
/// The longest delay after short watches.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The longest `Retry-After` honoured.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Collections remembered (the controllers watch a handful).
const MAX_KEYS: usize = 256;
/// Longest key kept (path and selectors); longer ones are cut.
const MAX_KEY_LEN: usize = 1024;

/// `inner`, with the reflectors' lists and watches paced.
pub(crate) fn client(inner: kube::Client) -> kube::Client {
    let namespace = inner.default_namespace().to_owned();
    let pacer = Arc::new(Pacer::default());
    let service = tower::service_fn(move |request: http::Request<Body>| {
        let inner = inner.clone();
        let pacer = pacer.clone();
        async move {
            let target = Target::of(&request);
            if let Some(target) = &target {
                pacer.wait(&target.key).await;
            }
            let started = Instant::now();
            let response = inner.send(request).await?;
            let guard = target.and_then(|target| {
                let retry_after = retry_after(response.status(), response.headers());
                pacer.answered(&target.key, retry_after, Instant::now());
                (target.watch && response.status().is_success()).then(|| WatchGuard {
                    pacer: pacer.clone(),
                    key: target.key,
                    started,
                })
            });
            // The guard lives as long as the body: its drop is the end of the watch.
            Ok::<_, kube::Error>(response.map(move |body| {
                body.map_frame(move |frame| {
                    let _alive = &guard;
                    frame
                })
            }))
        }
    });
    kube::Client::new(service, namespace)
}

/// A paced request: its collection, and whether it is a watch.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    key: String,
    watch: bool,
}

impl Target {
    fn of(request: &http::Request<Body>) -> Option<Self> {
        if request.method() != http::Method::GET {
            return None;
        }
        Self::parse(
            request.uri().path(),
            request.uri().query().unwrap_or_default(),
        )
    }

    /// `None` unless `GET path?query` is a watch or a paged list.
    fn parse(path: &str, query: &str) -> Option<Self> {
        let mut watch = false;
        let mut list = false;
        let mut selectors = String::new();
        for pair in query.split('&') {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            match name {
                "watch" => watch = matches!(value, "1" | "true"),
                "limit" => list = true,
                "labelSelector" | "fieldSelector" => {
                    selectors.push('&');
                    selectors.push_str(pair);
                }
                _ => {}
            }
        }
        if !watch && !list {
            return None;
        }
        let mut key = format!("{path}?{selectors}");
        if key.len() > MAX_KEY_LEN {
            let mut end = MAX_KEY_LEN;
            while !key.is_char_boundary(end) {
                end = end.saturating_sub(1);
            }
            key.truncate(end);
        }
        Some(Self { key, watch })
    }
}

/// What is known of one collection.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Slot {
    /// No list or watch of it before this instant.
    not_before: Option<Instant>,
    /// Short watches in a row.
    short_watches: u32,
}

#[derive(Debug, Default)]
struct Pacer {
    slots: Mutex<HashMap<String, Slot>>,
}

impl Pacer {
    fn with_slot<T>(&self, key: &str, change: impl FnOnce(&mut Slot) -> T) -> T {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if !slots.contains_key(key) && slots.len() >= MAX_KEYS {
            slots.clear();
        }
        change(slots.entry(key.to_owned()).or_default())
    }

    /// Waits until the collection may be listed or watched again.
    async fn wait(&self, key: &str) {
        let not_before = self.with_slot(key, |slot| slot.not_before);
        if let Some(not_before) = not_before.filter(|at| *at > Instant::now()) {
            tracing::debug!(collection = key, wait = ?not_before.saturating_duration_since(Instant::now()), "pacing a list or watch");
            tokio::time::sleep_until(not_before).await;
        }
    }

    /// A list or watch was answered; `retry_after` when the server asked for a pause.
    fn answered(&self, key: &str, retry_after: Option<Duration>, now: Instant) {
        if let Some(pause) = retry_after {
            self.with_slot(key, |slot| *slot = throttled(*slot, pause, now));
        }
    }

    /// A watch ended (its body dropped) `lived` after it was opened.
    fn watch_ended(&self, key: &str, lived: Duration, now: Instant) {
        let seed = crate::jitter::seed();
        self.with_slot(key, |slot| *slot = after_watch(*slot, lived, now, seed));
    }
}

/// The slot after a watch that lived `lived` ended at `now`.
fn after_watch(slot: Slot, lived: Duration, now: Instant, seed: u64) -> Slot {
    if lived >= MIN_WATCH {
        return Slot {
            short_watches: 0,
            ..slot
        };
    }
    let short_watches = slot.short_watches.saturating_add(1);
    let delay = backoff(short_watches, seed);
    let until = now.checked_add(delay).unwrap_or(now);
    Slot {
        not_before: Some(slot.not_before.map_or(until, |at| at.max(until))),
        short_watches,
    }
}

/// The slot after the server asked for `pause` (already bounded) at `now`.
fn throttled(slot: Slot, pause: Duration, now: Instant) -> Slot {
    let until = now.checked_add(pause).unwrap_or(now);
    Slot {
        not_before: Some(slot.not_before.map_or(until, |at| at.max(until))),
        ..slot
    }
}

/// The delay after `short` short watches in a row: 800 ms doubling to 30 s, plus up to half
/// of it of jitter (never above 30 s).
fn backoff(short: u32, seed: u64) -> Duration {
    let doublings = short.saturating_sub(1).min(16);
    let base = FIRST_BACKOFF
        .saturating_mul(1u32.checked_shl(doublings).unwrap_or(u32::MAX))
        .min(MAX_BACKOFF);
    crate::jitter::up(base, 0.5, seed).min(MAX_BACKOFF)
}

/// The pause a `429` or `503` asks for with `Retry-After: SECONDS` (an HTTP date is not read:
/// the apiserver sends seconds), at most [`MAX_RETRY_AFTER`].
fn retry_after(status: http::StatusCode, headers: &http::HeaderMap) -> Option<Duration> {
    if status != http::StatusCode::TOO_MANY_REQUESTS
        && status != http::StatusCode::SERVICE_UNAVAILABLE
    {
        return None;
    }
    let text = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?;
    let seconds: u64 = text.trim().parse().ok()?;
    Some(Duration::from_secs(seconds).min(MAX_RETRY_AFTER))
}

/// Alive while a watch's body is: its drop tells the pacer how long the watch lived.
struct WatchGuard {
    pacer: Arc<Pacer>,
    key: String,
    started: Instant,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        let now = Instant::now();
        self.pacer
            .watch_ended(&self.key, now.saturating_duration_since(self.started), now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_watches_and_paged_lists_are_paced() {
        let cases = [
            (
                "/api/v1/nodes",
                "watch=true&resourceVersion=5&timeoutSeconds=290&allowWatchBookmarks=true",
                Some(("/api/v1/nodes?", true)),
            ),
            (
                "/api/v1/pods",
                "&fieldSelector=spec.nodeName%21%3D&limit=500",
                Some(("/api/v1/pods?&fieldSelector=spec.nodeName%21%3D", false)),
            ),
            (
                "/api/v1/pods",
                "labelSelector=a%3Db&watch=1",
                Some(("/api/v1/pods?&labelSelector=a%3Db", true)),
            ),
            ("/api/v1/namespaces/noe/pods/web", "", None),
            ("/api/v1/nodes", "", None),
            ("/api/v1/nodes", "watch=false&x", None),
        ];
        for (path, query, want) in cases {
            let got = Target::parse(path, query);
            let want = want.map(|(key, watch)| Target {
                key: key.to_owned(),
                watch,
            });
            assert_eq!(got, want, "{path}?{query}");
        }
        let long = "x".repeat(5000);
        let target = Target::parse("/api/v1/pods", &format!("limit=1&labelSelector={long}"));
        assert_eq!(target.map(|t| t.key.len()), Some(MAX_KEY_LEN));
    }

    #[test]
    fn short_watches_back_off_and_a_long_one_resets() {
        let now = Instant::now();
        let mut slot = Slot::default();
        let mut delays = Vec::new();
        for _ in 0..8 {
            slot = after_watch(slot, Duration::from_millis(3), now, 0);
            delays.push(slot.not_before.map(|at| at - now));
        }
        let secs = |ms: u64| Some(Duration::from_millis(ms));
        assert_eq!(
            delays,
            [
                secs(800),
                secs(1600),
                secs(3200),
                secs(6400),
                secs(12_800),
                secs(25_600),
                secs(30_000),
                secs(30_000)
            ]
        );
        // Jitter adds up to half, never past the cap.
        let jittered = backoff(1, u64::MAX);
        assert!(jittered > Duration::from_millis(1190) && jittered <= Duration::from_millis(1200));
        assert_eq!(backoff(u32::MAX, u64::MAX), MAX_BACKOFF);
        // A watch that lived long enough resets the count (and keeps a pending pause).
        let reset = after_watch(slot, MIN_WATCH, now, 0);
        assert_eq!(reset.short_watches, 0);
        assert_eq!(reset.not_before, slot.not_before);
        let again = after_watch(reset, Duration::ZERO, now, 0);
        assert_eq!(again.short_watches, 1);
    }

    #[test]
    fn retry_after_is_read_on_429_and_503_and_bounded() {
        let headers = |value: &'static str| {
            let mut map = http::HeaderMap::new();
            map.insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static(value),
            );
            map
        };
        let too_many = http::StatusCode::TOO_MANY_REQUESTS;
        let cases = [
            (too_many, headers("7"), Some(Duration::from_secs(7))),
            (too_many, headers(" 3600 "), Some(MAX_RETRY_AFTER)),
            (
                too_many,
                headers("18446744073709551615"),
                Some(MAX_RETRY_AFTER),
            ),
            (too_many, headers("Wed, 21 Oct 2026 07:28:00 GMT"), None),
            (too_many, headers("-1"), None),
            (too_many, http::HeaderMap::new(), None),
            (
                http::StatusCode::SERVICE_UNAVAILABLE,
                headers("2"),
                Some(Duration::from_secs(2)),
            ),
            (http::StatusCode::OK, headers("2"), None),
            (http::StatusCode::INTERNAL_SERVER_ERROR, headers("2"), None),
        ];
        for (status, headers, want) in cases {
            assert_eq!(retry_after(status, &headers), want, "{status} {headers:?}");
        }
        let now = Instant::now();
        let slot = throttled(Slot::default(), Duration::from_secs(5), now);
        assert_eq!(slot.not_before, Some(now + Duration::from_secs(5)));
        // A shorter pause never shortens a longer one.
        let kept = throttled(slot, Duration::from_secs(1), now);
        assert_eq!(kept.not_before, slot.not_before);
    }
}
