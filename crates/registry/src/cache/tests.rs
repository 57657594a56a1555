use super::*;
use noe_core::Platform;
use std::sync::atomic::{AtomicUsize, Ordering};

fn cache(ttl: Duration, max: u64) -> PlatformCache {
    let config = Config {
        cache_ttl: ttl,
        cache_max_entries: max,
        ..Config::default()
    };
    let metrics = Metrics::new(&prometheus::Registry::new(), &config).unwrap();
    PlatformCache::new(&config, metrics)
}

fn resolution(image: &str) -> Resolution {
    Resolution {
        image: image.into(),
        resolved: image.into(),
        digest: format!("sha256:{}", "ab".repeat(32)),
        media_type: crate::manifest::OCI_INDEX.into(),
        credential_source: None,
        platforms: vec![Platform::new("linux", "arm64", None)],
        answered_by: Answered::Get,
    }
}

async fn load(
    cache: &PlatformCache,
    image: &str,
    scope: Option<Scope>,
    loads: &AtomicUsize,
    result: Result<(Resolution, bool), Error>,
) -> Result<Entry, Error> {
    cache
        .get_or_load(image, scope, false, |_stale| async {
            loads.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            result.map(|(resolution, scoped)| Loaded {
                entry: cache.compact(resolution, image),
                scoped,
                answered: Answered::Get,
                fresh_for: None,
            })
        })
        .await
        .map(|(entry, _)| entry)
}

#[tokio::test]
async fn concurrent_misses_load_once_and_hits_do_not_load() {
    let cache = cache(Duration::from_secs(60), 10);
    let image = "example.com/app:v1";
    let loads = AtomicUsize::new(0);
    let results = futures::future::join_all(
        (0..16).map(|_| load(&cache, image, None, &loads, Ok((resolution(image), false)))),
    )
    .await;
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(loads.load(Ordering::SeqCst), 1);
    let again = load(&cache, image, None, &loads, Ok((resolution(image), false))).await;
    assert_eq!(again.unwrap().platforms()[0].architecture, "arm64");
    assert_eq!(loads.load(Ordering::SeqCst), 1);
    assert!(cache.fresh(image, None).is_some());
    assert_eq!(cache.entries(), 1);
}

#[tokio::test]
async fn concurrent_misses_that_fail_load_once() {
    let cache = cache(Duration::from_secs(60), 10);
    let image = "example.com/broken:v1";
    let loads = AtomicUsize::new(0);
    let error = Error::Status {
        reference: image.into(),
        registry: "example.com".into(),
        status: 500,
    };
    let results = futures::future::join_all(
        (0..16).map(|_| load(&cache, image, None, &loads, Err(error.clone()))),
    )
    .await;
    assert!(results.iter().all(Result::is_err));
    assert_eq!(loads.load(Ordering::SeqCst), 1);
    assert_eq!(cache.entries(), 0);
}

#[tokio::test]
async fn an_expired_entry_is_handed_to_the_next_load() {
    let cache = cache(Duration::from_millis(1), 10);
    let image = "example.com/app:v1";
    let loads = AtomicUsize::new(0);
    load(&cache, image, None, &loads, Ok((resolution(image), false)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(cache.fresh(image, None).is_none());
    let (entry, answered) = cache
        .get_or_load(image, None, false, |stale| async move {
            let stale = stale.expect("the expired entry is given to revalidate");
            assert!(stale.has_digest(&format!("sha256:{}", "ab".repeat(32))));
            Ok(Loaded {
                entry: stale,
                scoped: false,
                answered: Answered::Head,
                fresh_for: None,
            })
        })
        .await
        .unwrap();
    assert_eq!(answered, Answered::Head);
    assert_eq!(entry.platforms()[0].architecture, "arm64");
    // A digest reference lives at least DIGEST_TTL whatever the flag says.
    let pinned = "example.com/app@sha256:00";
    cache
        .get_or_load(pinned, None, true, |_| async {
            Ok(Loaded {
                entry: cache.compact(resolution(pinned), pinned),
                scoped: false,
                answered: Answered::Get,
                fresh_for: None,
            })
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(cache.fresh(pinned, None).is_some());
}

#[tokio::test]
async fn a_failed_revalidation_keeps_the_expired_entry_for_the_next_one() {
    let cache = cache(Duration::from_millis(1), 10);
    let image = "example.com/app:v1";
    let loads = AtomicUsize::new(0);
    load(&cache, image, None, &loads, Ok((resolution(image), false)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let error = Error::Status {
        reference: image.into(),
        registry: "example.com".into(),
        status: 503,
    };
    assert!(load(&cache, image, None, &loads, Err(error.clone()))
        .await
        .is_err());
    // Within the failure TTL: answered from the failure cache, not loaded.
    assert!(load(&cache, image, None, &loads, Err(error)).await.is_err());
    assert_eq!(loads.load(Ordering::SeqCst), 2);
    assert_eq!(cache.entries(), 1, "the expired entry is still held");
}

#[tokio::test]
async fn scoped_answers_stay_in_their_scope_and_others_are_shared() {
    let cache = cache(Duration::from_secs(60), 10);
    let loads = AtomicUsize::new(0);
    let team = Some(Scope::of("team"));
    let other = Some(Scope::of("other"));
    let private = "registry.corp/private:1";
    load(
        &cache,
        private,
        team,
        &loads,
        Ok((resolution(private), true)),
    )
    .await
    .unwrap();
    assert!(cache.fresh(private, team).is_some());
    assert!(cache.fresh(private, other).is_none());
    assert!(cache.fresh(private, None).is_none());
    // Another scope looks it up again.
    load(
        &cache,
        private,
        other,
        &loads,
        Ok((resolution(private), true)),
    )
    .await
    .unwrap();
    assert_eq!(loads.load(Ordering::SeqCst), 2);

    // Found without a scoped credential: every scope, and none, gets it.
    let public = "docker.io/library/nginx:1";
    load(
        &cache,
        public,
        team,
        &loads,
        Ok((resolution(public), false)),
    )
    .await
    .unwrap();
    for scope in [None, team, other] {
        assert!(cache.fresh(public, scope).is_some(), "{scope:?}");
    }
    load(
        &cache,
        public,
        other,
        &loads,
        Ok((resolution(public), false)),
    )
    .await
    .unwrap();
    assert_eq!(loads.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn the_cache_stays_bounded() {
    let cache = cache(Duration::from_secs(60), 100);
    let loads = AtomicUsize::new(0);
    for i in 0..1000 {
        let image = format!("example.com/app{i}:v1");
        load(
            &cache,
            &image,
            None,
            &loads,
            Ok((resolution(&image), false)),
        )
        .await
        .unwrap();
    }
    assert!(cache.entries() <= 100, "{} entries", cache.entries());
    assert_eq!(loads.load(Ordering::SeqCst), 1000);
}

#[tokio::test]
async fn the_cache_stays_bounded_in_bytes() {
    // At the default entry bound, entries of the largest valid size (64 platforms, every
    // field at its length limit) are bounded by their bytes long before their number.
    let cache = cache(Duration::from_secs(60), 100_000);
    let field = "a".repeat(noe_core::platform::MAX_FIELD_LEN - 8);
    let version = "1".repeat(noe_core::platform::MAX_OS_VERSION_LEN);
    let inserted = 6_000u32;
    let mut set_bytes = 0;
    for i in 0..inserted {
        let image = format!("example.com/big{i}:v1");
        let mut big = resolution(&image);
        big.platforms = (0..64)
            .map(|j| {
                Platform::new(
                    format!("{field}{i:08}"),
                    format!("{field}{j:08}"),
                    Some(&field),
                )
                .with_os_version(Some(&version))
            })
            .collect();
        set_bytes = big.platforms.iter().map(Platform::weight).sum::<usize>();
        let entry = cache.compact(big, &image);
        cache
            .get_or_load(&image, None, false, |_| async {
                Ok(Loaded {
                    entry,
                    scoped: false,
                    answered: Answered::Get,
                    fresh_for: None,
                })
            })
            .await
            .unwrap();
    }
    let held = cache.entries();
    assert!(held < u64::from(inserted), "{held} entries: no byte bound");
    // The interner holds at most 4 MiB of sets (those entries weigh little here).
    let bound = (CACHE_MAX_BYTES + 4 * 1024 * 1024) / set_bytes as u64 + 1;
    assert!(
        held <= bound,
        "{held} entries of {set_bytes} bytes (bound {bound})"
    );
}

#[tokio::test]
async fn a_probe_counts_its_hits_together_when_dropped() {
    let cache = cache(Duration::from_secs(60), 10);
    let image = "example.com/app:v1";
    let loads = AtomicUsize::new(0);
    load(&cache, image, None, &loads, Ok((resolution(image), false)))
        .await
        .unwrap();
    let counted = || {
        (
            cache.metrics.cache_requests.get(),
            cache.outcomes.hit.get(),
            cache.outcomes.miss.get(),
        )
    };
    assert_eq!(counted(), (1, 0, 1), "the load: one request, one miss");
    {
        let mut probe = cache.probe();
        let (platforms, digest) = probe.fresh(image, None).unwrap().into_found();
        assert_eq!(platforms[0].architecture, "arm64");
        assert_eq!(digest.to_string(), format!("sha256:{}", "ab".repeat(32)));
        assert!(probe.fresh("example.com/other:v1", None).is_none());
        assert!(probe.fresh(image, Some(Scope::of("team-a"))).is_some());
        assert_eq!(counted(), (1, 0, 1), "nothing counted while probing");
    }
    assert_eq!(
        counted(),
        (3, 2, 1),
        "two hits, counted when the probe is dropped"
    );
    drop(cache.probe());
    assert_eq!(counted(), (3, 2, 1), "a probe without hits counts nothing");
    assert!(cache.fresh(image, None).is_some());
    assert_eq!(counted(), (4, 3, 1), "a single read counts itself");
}

#[test]
fn keys_differ_by_image_and_scope() {
    let key = Key::new("example.com/app:v1", None);
    assert_eq!(
        key,
        Key::new("example.com/app:v1", None),
        "stable in a process"
    );
    for other in [
        Key::new("example.com/app:v2", None),
        Key::new("example.com/app:v1", Some(Scope::of("team-a"))),
        Key::new("example.com/app:v", None),
    ] {
        assert_ne!(key, other);
    }
    assert_ne!(
        Key::new("x", Some(Scope::of("team-a"))),
        Key::new("x", Some(Scope::of("team-b")))
    );
}

#[test]
fn digests_round_trip_through_their_text() {
    let sha = format!("sha256:{}", "0a".repeat(32));
    let parsed = Digest::parse(&sha);
    assert!(matches!(parsed, Digest::Sha256(_)), "{parsed:?}");
    assert_eq!(parsed.sha256_text().unwrap(), sha.as_bytes());
    assert_eq!(parsed.to_string(), sha);
    assert_eq!(parsed.text_len(), sha.len());
    assert!(parsed.is(&sha));
    assert!(!parsed.is(&sha.to_uppercase()));
    assert!(!parsed.is(&format!("sha256:{}", "0b".repeat(32))));
    assert!(!parsed.is("sha256:0a"));
    // Anything but a lower-case sha256 digest is kept as it was sent.
    for other in [
        sha.to_uppercase(),
        format!("sha256:{}", "0A".repeat(32)),
        format!("sha256:{}", "0a".repeat(31)),
        format!("sha512:{}", "0a".repeat(64)),
        "sha256:not hex at all, and \"quoted\"".to_owned(),
        String::new(),
    ] {
        let parsed = Digest::parse(&other);
        assert!(matches!(parsed, Digest::Other(_)), "{other}: {parsed:?}");
        assert_eq!(parsed.sha256_text(), None);
        assert_eq!(parsed.to_string(), other);
        assert_eq!(parsed.text_len(), other.len());
        assert!(parsed.is(&other));
        assert_eq!(Digest::from(other.as_str()), parsed);
    }
}

/// A probe's stamp holds while no entry changes, none of the answers it found expires and the
/// node-level credentials stay the same; a stamp of no answer never holds.
#[tokio::test]
async fn a_probe_stamp_holds_until_an_entry_changes_or_expires() {
    let cache = cache(Duration::from_millis(300), 10);
    let loads = AtomicUsize::new(0);
    let (a, b) = ("example.com/a:1", "example.com/b:1");
    load(&cache, a, None, &loads, Ok((resolution(a), false)))
        .await
        .unwrap();
    let empty = cache.probe().stamp();
    assert!(!cache.holds(&empty), "no answer found: nothing to hold");
    let mut probe = cache.probe();
    assert!(probe.fresh(a, None).is_some());
    assert!(probe.fresh(b, None).is_none());
    let stamp = probe.stamp();
    drop(probe);
    assert!(cache.holds(&stamp));
    assert!(cache.holds(&stamp), "reading changes nothing");
    // Another entry loaded (which may evict one): the stamp no longer holds.
    load(&cache, b, None, &loads, Ok((resolution(b), false)))
        .await
        .unwrap();
    assert!(!cache.holds(&stamp));
    let mut probe = cache.probe();
    assert!(probe.fresh(a, None).is_some());
    let stamp = probe.stamp();
    drop(probe);
    assert!(cache.holds(&stamp));
    // The answer it found expired.
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert!(!cache.holds(&stamp));
}

#[tokio::test]
async fn a_probe_stamp_does_not_outlive_the_credentials() {
    let generation = noe_credentials::Generation::default();
    let config = Config {
        cache_ttl: Duration::from_secs(60),
        cache_max_entries: 10,
        credentials_generation: Some(generation.clone()),
        ..Config::default()
    };
    let metrics = Metrics::new(&prometheus::Registry::new(), &config).unwrap();
    let cache = PlatformCache::new(&config, metrics);
    let loads = AtomicUsize::new(0);
    let a = "example.com/a:1";
    load(&cache, a, None, &loads, Ok((resolution(a), false)))
        .await
        .unwrap();
    let mut probe = cache.probe();
    assert!(probe.fresh(a, None).is_some());
    let stamp = probe.stamp();
    drop(probe);
    assert!(cache.holds(&stamp));
    generation.bump();
    assert!(!cache.holds(&stamp));
}
