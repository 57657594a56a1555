//! Verdicts kept by digest: a second verification reads no layer, another replica reuses a
//! verdict through a real `redis-server` (MACed like every value), and a mismatch is a
//! correction of the image's digest and of the platform manifest's, with a new generation.

use std::time::Duration;

use noe_core::truth::{Corrections as _, Source};
use noe_core::Platform;
use noe_registry::shared::SharedConfig;
use noe_registry::verify::Options;
use noe_registry::{Config, Resolver};
use noe_test_support::{push_mislabelled_index, RedisServer, Registry};

fn replica(registry: &Registry, redis: Option<&RedisServer>) -> Resolver {
    let shared_cache = redis.map(|redis| SharedConfig {
        url: redis.url(),
        password: None,
        ca_pem: None,
        key: b"0123456789abcdef-install-key".to_vec(),
        key_file_mode: None,
        timeout: Duration::from_secs(2),
    });
    Resolver::new(
        Config {
            insecure_registries: vec![registry.host()],
            shared_cache,
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &prometheus::Registry::new(),
    )
    .unwrap()
}

fn layer_gets(registry: &Registry) -> usize {
    registry
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path.contains("/blobs/"))
        .count()
}

#[tokio::test]
async fn a_verdict_is_computed_once_per_digest_and_a_mismatch_corrects_it() {
    let registry = Registry::start().await.unwrap();
    let pusher = registry.pusher().unwrap();
    let lies = push_mislabelled_index(&pusher, "cached/lies", "1", "cached")
        .await
        .unwrap();
    let image = registry.reference("cached/lies", "1");
    let resolver = replica(&registry, None);
    let verdicts = resolver.verdicts();
    assert_eq!(verdicts.generation(), 0);
    let routed = resolver.routed(&image).await.unwrap();
    let first = resolver
        .verify(&routed, &[], &Options::default())
        .await
        .unwrap();
    assert!(first.platforms.iter().all(|p| p.bytes > 0));
    assert_eq!(verdicts.generation(), 1);
    let corrections = verdicts.for_digest(&lies.index.digest);
    assert_eq!(corrections.len(), 1);
    assert_eq!(
        corrections[0].platform,
        Platform::new("linux", "arm64", None)
    );
    assert_eq!(corrections[0].source, Source::Verification);
    assert_eq!(corrections[0].evidence, "/app is an x86-64 ELF (EM_X86_64)");
    assert_eq!(verdicts.for_digest(&lies.arm64.digest).len(), 1);
    assert!(verdicts.for_digest(&lies.amd64.digest).is_empty());

    registry.reset_requests();
    let again = resolver
        .verify(&routed, &[], &Options::default())
        .await
        .unwrap();
    assert_eq!(layer_gets(&registry), 0, "no config, no layer read again");
    assert_eq!(verdicts.generation(), 1, "nothing new");
    let summaries = |r: &noe_registry::verify::ImageReport| -> Vec<String> {
        r.platforms.iter().map(|p| p.report.summary()).collect()
    };
    assert_eq!(summaries(&again), summaries(&first));
    assert!(again.platforms.iter().all(|p| p.bytes == 0));
}

#[tokio::test]
async fn another_replica_reuses_a_verdict_through_the_shared_cache() {
    let registry = Registry::start().await.unwrap();
    let redis = RedisServer::start().unwrap();
    let pusher = registry.pusher().unwrap();
    let lies = push_mislabelled_index(&pusher, "shared/lies", "1", "shared")
        .await
        .unwrap();
    let image = registry.reference("shared/lies", "1");
    let (a, b) = (
        replica(&registry, Some(&redis)),
        replica(&registry, Some(&redis)),
    );
    let routed = a.routed(&image).await.unwrap();
    a.verify(&routed, &[], &Options::default()).await.unwrap();
    // Written in the background: wait (bounded) until both verdicts are there.
    for _ in 0..300 {
        let held: usize = redis.command(&["DBSIZE"]).unwrap().parse().unwrap();
        if held >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    registry.reset_requests();
    let routed = b.routed(&image).await.unwrap();
    let report = b.verify(&routed, &[], &Options::default()).await.unwrap();
    assert_eq!(layer_gets(&registry), 0, "replica b read no layer");
    assert_eq!(report.platforms[1].report.summary(), "mismatch");
    assert_eq!(b.verdicts().for_digest(&lies.index.digest).len(), 1);
    // Only MACed values under HMAC keys: no digest, path or evidence in the clear as a key.
    let keys = redis.command(&["KEYS", "*"]).unwrap();
    assert!(keys.contains("noe:2:v:"), "{keys}");
    assert!(!keys.contains("sha256"), "{keys}");
}
