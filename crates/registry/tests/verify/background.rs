//! The background verification: a cold lookup queues the image, a consumer verifies it off the
//! lookup, and its mismatch becomes a correction; a warm lookup queues nothing.

use std::time::Duration;

use noe_core::truth::Corrections as _;
use noe_registry::{Config, Resolver};
use noe_test_support::{push_mislabelled_index, Registry};

#[tokio::test]
async fn a_cold_lookup_is_verified_in_the_background() {
    let registry = Registry::start().await.unwrap();
    let pusher = registry.pusher().unwrap();
    let lies = push_mislabelled_index(&pusher, "background/lies", "1", "background")
        .await
        .unwrap();
    let image = registry.reference("background/lies", "1");
    let metrics = prometheus::Registry::new();
    let resolver = Resolver::new(
        Config {
            insecure_registries: vec![registry.host()],
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &metrics,
    )
    .unwrap();
    let queue = resolver.start_background_verification();
    let verdicts = resolver.verdicts();
    // The lookup answers with the claim at once: nothing waits for the verification.
    let resolution = resolver.resolve(&image, &[]).await.unwrap();
    assert_eq!(resolution.platforms.len(), 2);
    for _ in 0..500 {
        if verdicts.generation() > 0 && !queue.pending(&image) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!queue.pending(&image));
    let corrections = verdicts.for_digest(&lies.index.digest);
    assert_eq!(corrections.len(), 1, "{corrections:?}");
    assert_eq!(corrections[0].platform.to_string(), "linux/arm64");
    assert_eq!(queue.depth(), 0);

    // A warm lookup is not queued again.
    registry.reset_requests();
    resolver.resolve(&image, &[]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!queue.pending(&image));
    assert_eq!(registry.request_count(), 0);
}
