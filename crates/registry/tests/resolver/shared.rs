//! The shared cache against a real `redis-server` and the real registry: two resolvers (two
//! replicas) share what one learned; a replica without the credentials of a private image
//! cannot read its platforms from it (not by tag, not by digest); only HMAC keys and
//! non-secret values are stored; a password and TLS work; and when Redis is slow or killed
//! mid-test, lookups go on without it and the metrics say so.

use std::time::Duration;

use noe_credentials::{Credential, CredentialCandidate};
use noe_registry::shared::SharedConfig;
use noe_registry::{Answered, Config, Resolver};
use noe_test_support::{push_standard_fixtures, DelayProxy, RedisServer, Registry, TestCa};

const KEY: &str = "0123456789abcdef-install-key";

fn shared(redis: &RedisServer, password: Option<&str>) -> SharedConfig {
    SharedConfig {
        url: redis.url(),
        password: password.map(str::to_owned),
        ca_pem: redis.ca_pem().map(String::into_bytes),
        key: KEY.as_bytes().to_vec(),
        key_file_mode: None,
        // Generous: the test machine is shared; the fall-through tests use a slow proxy.
        timeout: Duration::from_secs(2),
    }
}

fn replica(insecure: &[String], shared: SharedConfig) -> (Resolver, prometheus::Registry) {
    let metrics = prometheus::Registry::new();
    let resolver = Resolver::new(
        Config {
            insecure_registries: insecure.to_vec(),
            request_timeout: Duration::from_secs(2),
            shared_cache: Some(shared),
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &metrics,
    )
    .unwrap();
    (resolver, metrics)
}

/// Waits (bounded) until the server holds `keys` keys: writes are sent in the background.
async fn await_keys(redis: &RedisServer, keys: usize) {
    for _ in 0..300 {
        let held: usize = redis.command(&["DBSIZE"]).unwrap().parse().unwrap();
        if held >= keys {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the shared cache never held {keys} keys");
}

fn counter(metrics: &prometheus::Registry, name: &str, result: &str) -> f64 {
    metrics
        .gather()
        .iter()
        .filter(|f| f.name() == name)
        .flat_map(|f| f.get_metric().iter())
        .filter(|m| m.get_label().iter().any(|l| l.value() == result))
        .map(|m| m.get_counter().get_value())
        .sum()
}

fn basic(source: &str, password: &str) -> CredentialCandidate {
    CredentialCandidate::new(
        source,
        Credential::Basic {
            username: "alice".into(),
            password: password.into(),
        },
    )
}

#[tokio::test]
async fn two_replicas_share_what_one_learned() {
    let redis = RedisServer::builder().password("r3dis").start().unwrap();
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let insecure = [registry.host()];
    let (first, _) = replica(&insecure, shared(&redis, Some("r3dis")));
    let (second, metrics) = replica(&insecure, shared(&redis, Some("r3dis")));

    // Each lookup writes the tag's digest and the digest's platforms.
    for (i, fixture) in [&fixtures.oci_index, &fixtures.oci_single]
        .iter()
        .enumerate()
    {
        registry.reset_requests();
        let found = first.resolve(&fixture.reference(), &[]).await.unwrap();
        assert_eq!(found.answered_by, Answered::Get);
        assert!(registry.request_count() >= 1);
        await_keys(&redis, 2 * (i + 1)).await;
    }

    registry.reset_requests();
    for fixture in [&fixtures.oci_index, &fixtures.oci_single] {
        let shared = second.resolve(&fixture.reference(), &[]).await.unwrap();
        assert_eq!(shared.answered_by, Answered::SharedCache);
        assert_eq!(shared.digest, fixture.digest);
        let mut got: Vec<String> = shared.platforms.iter().map(ToString::to_string).collect();
        got.sort();
        let mut want = fixture.platforms.clone();
        want.sort();
        assert_eq!(got, want);
    }
    assert_eq!(
        registry.request_count(),
        0,
        "the second replica asked the registry"
    );
    assert_eq!(
        counter(&metrics, "noe_registry_shared_cache_reads_total", "hit"),
        4.0
    );

    // What is stored: HMAC keys only (no repository, no host), and values without a secret.
    let keys = redis.command(&["KEYS", "*"]).unwrap();
    for key in keys.lines() {
        assert!(
            key.starts_with("noe:2:t:") || key.starts_with("noe:2:d:"),
            "{key}"
        );
        assert!(
            !key.contains("fixtures") && !key.contains("127.0.0.1"),
            "{key}"
        );
        let value = redis.command(&["GET", key]).unwrap();
        assert!(value.len() < 2048, "{value}");
        assert!(!value.contains("r3dis") && !value.contains(KEY), "{value}");
    }
}

#[tokio::test]
async fn a_replica_without_access_cannot_read_a_private_image_from_the_shared_cache() {
    let redis = RedisServer::start().unwrap();
    let registry = Registry::builder()
        .htpasswd("alice", "s3cret")
        .start()
        .await
        .unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let image = fixtures.oci_index.reference();
    let insecure = [registry.host()];
    let (owner, _) = replica(&insecure, shared(&redis, None));
    let (colleague, _) = replica(&insecure, shared(&redis, None));
    let right = basic("docker-config:/right", "s3cret");

    let found = owner
        .resolve(&image, std::slice::from_ref(&right))
        .await
        .unwrap();
    assert_eq!(found.answered_by, Answered::Get);
    await_keys(&redis, 2).await;

    // Without credentials, or with wrong ones (each another replica: a replica's credentials
    // do not change between lookups), the registry refuses, by tag and by digest.
    let pinned = fixtures.oci_index.digest_reference();
    for (candidates, what) in [
        (vec![], "no credentials"),
        (
            vec![basic("docker-config:/wrong", "nope")],
            "wrong credentials",
        ),
    ] {
        let (stranger, metrics) = replica(&insecure, shared(&redis, None));
        for image in [&image, &pinned] {
            registry.reset_requests();
            let error = stranger.resolve(image, &candidates).await.unwrap_err();
            assert!(error.is_auth(), "{what}, {image}: {error}");
            assert!(registry.request_count() >= 1, "{what}: registry not asked");
        }
        assert_eq!(
            counter(&metrics, "noe_registry_shared_cache_reads_total", "hit"),
            // By digest, the platforms are found, but only used after a HEAD, which failed.
            1.0,
            "{what}"
        );
    }

    // The same credentials on another replica: the same scope, shared.
    registry.reset_requests();
    let shared_answer = colleague
        .resolve(&image, std::slice::from_ref(&right))
        .await
        .unwrap();
    assert_eq!(shared_answer.answered_by, Answered::SharedCache);
    assert_eq!(registry.request_count(), 0);
    // By digest, that replica proves its access with a HEAD and reuses the platforms.
    registry.reset_requests();
    let by_digest = colleague.resolve(&pinned, &[right]).await.unwrap();
    assert_eq!(by_digest.answered_by, Answered::Head);
    let methods: Vec<String> = registry
        .requests()
        .iter()
        .map(|r| r.method.clone())
        .collect();
    assert!(methods.iter().all(|m| m == "HEAD"), "{methods:?}");
}

#[tokio::test]
async fn lookups_go_on_when_redis_is_slow_or_killed() {
    let mut redis = RedisServer::start().unwrap();
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let insecure = [registry.host()];
    let (first, _) = replica(&insecure, shared(&redis, None));
    first
        .resolve(&fixtures.oci_index.reference(), &[])
        .await
        .unwrap();
    await_keys(&redis, 2).await;

    // Slow: a proxy adding 500 ms in front of Redis, with a 50 ms timeout.
    let slow = DelayProxy::start(redis.addr(), Duration::from_millis(500))
        .await
        .unwrap();
    let mut config = shared(&redis, None);
    config.url = format!("redis://{}/0", slow.host());
    config.timeout = Duration::from_millis(50);
    let (patient, metrics) = replica(&insecure, config);
    let found = patient
        .resolve(&fixtures.oci_index.reference(), &[])
        .await
        .unwrap();
    assert_eq!(found.answered_by, Answered::Get);
    assert!(counter(&metrics, "noe_registry_shared_cache_reads_total", "error") >= 1.0);

    // Killed: every lookup is answered by the registry; after a few failures the shared
    // cache is not even asked.
    redis.kill();
    let (second, metrics) = replica(&insecure, shared(&redis, None));
    for fixture in [
        &fixtures.oci_index,
        &fixtures.docker_list,
        &fixtures.oci_single,
        &fixtures.docker_single,
        &fixtures.nested_index,
    ] {
        let found = second.resolve(&fixture.reference(), &[]).await.unwrap();
        assert_eq!(found.answered_by, Answered::Get);
    }
    // Reads and writes failed until, three failures in a row, the cache was not asked.
    let failed = counter(&metrics, "noe_registry_shared_cache_reads_total", "error")
        + counter(&metrics, "noe_registry_shared_cache_writes_total", "error");
    let bypassed = counter(
        &metrics,
        "noe_registry_shared_cache_reads_total",
        "bypassed",
    );
    assert!(failed >= 3.0, "{failed} failures");
    assert!(bypassed >= 1.0, "{bypassed} bypassed");
}

#[tokio::test]
async fn a_tls_redis_is_reached_with_its_ca() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = TestCa::new().unwrap();
    let redis = RedisServer::builder().tls(&ca).start().unwrap();
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let insecure = [registry.host()];
    let (first, _) = replica(&insecure, shared(&redis, None));
    let (second, _) = replica(&insecure, shared(&redis, None));
    first
        .resolve(&fixtures.docker_list.reference(), &[])
        .await
        .unwrap();
    // The harness reads plain RESP only: a fresh replica's answer proves the write landed.
    let mut answered = None;
    for _ in 0..100 {
        let (fresh, _) = replica(&insecure, shared(&redis, None));
        let found = fresh
            .resolve(&fixtures.docker_list.reference(), &[])
            .await
            .unwrap();
        if found.answered_by == Answered::SharedCache {
            answered = Some(found.answered_by);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(answered, Some(Answered::SharedCache));
    drop(second);
}

#[tokio::test]
async fn forged_values_are_misses_and_never_answer() {
    let redis = RedisServer::start().unwrap();
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let insecure = [registry.host()];
    let image = fixtures.oci_index.reference();
    let (first, _) = replica(&insecure, shared(&redis, None));
    first.resolve(&image, &[]).await.unwrap();
    await_keys(&redis, 2).await;

    // Whoever can write to the server, without the install's key: every digest entry now
    // claims s390x, in the value format of before (no MAC) and with a MAC made up.
    let forged = r#"{"m":"application/vnd.oci.image.index.v1+json","p":[{"os":"linux","architecture":"s390x"}]}"#;
    let keys = redis.command(&["KEYS", "noe:2:d:*"]).unwrap();
    let keys: Vec<&str> = keys.lines().collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    for value in [forged.to_owned(), format!("{}:{forged}", "ab".repeat(32))] {
        redis.command(&["SET", keys[0], &value]).unwrap();
        let (second, metrics) = replica(&insecure, shared(&redis, None));
        registry.reset_requests();
        let found = second.resolve(&image, &[]).await.unwrap();
        assert_eq!(found.answered_by, Answered::Get, "{value}");
        assert!(registry.request_count() >= 1, "the registry was not asked");
        assert!(
            found.platforms.iter().all(|p| p.architecture != "s390x"),
            "{:?}",
            found.platforms
        );
        assert_eq!(
            counter(
                &metrics,
                "noe_registry_shared_cache_reads_total",
                "unverified"
            ),
            1.0
        );
        assert_eq!(
            counter(&metrics, "noe_registry_shared_cache_reads_total", "hit"),
            // The tag entry verified; the digest entry did not.
            1.0
        );
        // The lookup writes the genuine value back (in the background): wait for it, so the
        // next forgery is not overwritten by it.
        let mut restored = false;
        for _ in 0..300 {
            if redis.command(&["GET", keys[0]]).unwrap() != value {
                restored = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(restored, "the genuine value was not written back");
    }

    // A genuine value moved to another key does not verify either: the tag entry of another
    // image now holds the first image's digest entry.
    let other = fixtures.docker_list.reference();
    first.resolve(&other, &[]).await.unwrap();
    await_keys(&redis, 4).await;
    let tags = redis.command(&["KEYS", "noe:2:t:*"]).unwrap();
    let digests = redis.command(&["KEYS", "noe:2:d:*"]).unwrap();
    let tags: Vec<&str> = tags.lines().collect();
    let moved = redis.command(&["GET", tags[0]]).unwrap();
    for key in tags
        .iter()
        .chain(digests.lines().collect::<Vec<_>>().iter())
    {
        if *key != tags[0] {
            redis.command(&["SET", key, &moved]).unwrap();
        }
    }
    let (third, metrics) = replica(&insecure, shared(&redis, None));
    for image in [&image, &other] {
        let found = third.resolve(image, &[]).await.unwrap();
        assert_ne!(found.answered_by, Answered::SharedCache, "{image}");
    }
    assert!(
        counter(
            &metrics,
            "noe_registry_shared_cache_reads_total",
            "unverified"
        ) >= 1.0
    );
}
