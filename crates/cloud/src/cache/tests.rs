use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

fn at(s: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
}

#[test]
fn refresh_times() {
    let cases = [
        // (expires in, refresh after)
        ("an hour", at(3600), at(3600 - 300)),
        ("12 hours (ECR)", at(12 * 3600), at(12 * 3600 - 300)),
        ("four minutes: refresh at half", at(240), at(120)),
        ("already past: skewed clock", at(0), at(30)),
        ("long past", SystemTime::UNIX_EPOCH, at(30)),
        ("absurdly far", at(10 * 365 * 86_400), at(12 * 3600 - 300)),
    ];
    for (name, expires, want) in cases {
        assert_eq!(refresh_at(at(0), expires), want, "{name}");
    }
}

fn cache(clock: &Clock) -> Cache<String> {
    let metrics = Metrics::new(None).unwrap_or_else(|e| panic!("metrics: {e}"));
    Cache::new(Provider::Gcp, clock.clone(), metrics)
}

#[tokio::test]
async fn cached_until_refresh_then_fetched_again() {
    let clock = Clock::manual_at(at(0));
    let cache = cache(&clock);
    let fetches = AtomicUsize::new(0);
    let fetch = |token: &'static str| {
        let fetches = &fetches;
        let clock = clock.clone();
        move || async move {
            fetches.fetch_add(1, Ordering::SeqCst);
            Ok((token.to_owned(), clock.wall() + Duration::from_secs(3600)))
        }
    };
    assert_eq!(
        cache.get_or_fetch("k", fetch("one")).await,
        Ok("one".into())
    );
    clock.advance(Duration::from_secs(3000));
    assert_eq!(
        cache.get_or_fetch("k", fetch("two")).await,
        Ok("one".into())
    );
    clock.advance(Duration::from_secs(301));
    assert_eq!(
        cache.get_or_fetch("k", fetch("two")).await,
        Ok("two".into())
    );
    assert_eq!(fetches.load(Ordering::SeqCst), 2);
    // A clock that jumps back before the fetch refreshes rather than trusting the entry.
    clock.set_wall(at(0));
    assert_eq!(
        cache.get_or_fetch("k", fetch("three")).await,
        Ok("three".into())
    );
}

#[tokio::test]
async fn failures_are_remembered_briefly() {
    let clock = Clock::manual_at(at(0));
    let cache = cache(&clock);
    let failing = || async {
        Err::<(String, SystemTime), _>(Error::NotConfigured {
            provider: Provider::Gcp,
            reason: "x".into(),
        })
    };
    assert!(cache.get_or_fetch("k", failing).await.is_err());
    let unused = || async { Ok(("ok".to_owned(), at(3600))) };
    assert!(cache.get_or_fetch("k", unused).await.is_err());
    clock.advance(FAILURE_TTL);
    let ok = || async { Ok(("ok".to_owned(), at(3600))) };
    assert_eq!(cache.get_or_fetch("k", ok).await, Ok("ok".into()));
}

#[tokio::test]
async fn one_refresh_in_flight() {
    let clock = Clock::manual_at(at(0));
    let cache = Arc::new(cache(&clock));
    let fetches = Arc::new(AtomicUsize::new(0));
    let (release, released) = tokio::sync::watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let (cache, fetches, mut released) = (cache.clone(), fetches.clone(), released.clone());
        tasks.spawn(async move {
            cache
                .get_or_fetch("k", || async move {
                    fetches.fetch_add(1, Ordering::SeqCst);
                    let _ = released.wait_for(|r| *r).await;
                    Ok(("t".to_owned(), at(3600)))
                })
                .await
        });
    }
    // Let every task reach the slot before the fetch completes.
    for _ in 0..64 {
        tokio::task::yield_now().await;
    }
    let _ = release.send(true);
    while let Some(result) = tasks.join_next().await {
        assert_eq!(result.ok().and_then(Result::ok), Some("t".to_owned()));
    }
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_refused_value_is_renewed_once() {
    let clock = Clock::manual_at(at(0));
    let cache = cache(&clock);
    let fetches = AtomicUsize::new(0);
    let fetch = |token: &'static str| {
        let fetches = &fetches;
        move || async move {
            fetches.fetch_add(1, Ordering::SeqCst);
            Ok((token.to_owned(), at(3600)))
        }
    };
    let refused = |v: &String| v == "one";
    assert_eq!(
        cache.get_or_fetch("k", fetch("one")).await,
        Ok("one".into())
    );
    let renewed = cache.get_or_renew("k", refused, fetch("two")).await;
    assert_eq!(renewed.map(|(v, _)| v), Ok("two".into()));
    // A second caller refused "one" meanwhile gets "two" without another fetch.
    let again = cache.get_or_renew("k", refused, fetch("three")).await;
    assert_eq!(again.map(|(v, _)| v), Ok("two".into()));
    assert_eq!(fetches.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn keys_are_bounded() {
    let clock = Clock::manual_at(at(0));
    let cache = cache(&clock);
    for i in 0..(MAX_KEYS + 50) {
        let key = format!("r{i}");
        let got = cache
            .get_or_fetch(&key, || async { Ok(("t".to_owned(), at(3600))) })
            .await;
        assert!(got.is_ok());
    }
    assert!(cache.len() <= MAX_KEYS, "{}", cache.len());
}
