//! `--platform-overrides` against the real registry: an entry answers before any cache, so an
//! override added to the file (reloaded without a restart) wins over an answer the cache already
//! holds for the same image, and no registry request is made for it.

use std::sync::Arc;
use std::time::Duration;

use noe_registry::overrides::PlatformOverrides;
use noe_registry::{Answered, Config};
use noe_test_support::{push_image, Flavor, Registry};

use super::support::{platforms, resolver_with};

fn platforms_of(listed: &[noe_core::Platform]) -> Vec<String> {
    listed.iter().map(ToString::to_string).collect()
}

#[tokio::test]
async fn an_override_added_to_the_file_wins_over_a_cached_answer() {
    let registry = Registry::start().await.unwrap();
    let pusher = registry.pusher().unwrap();
    push_image(
        &pusher,
        "overridden/app",
        Some("v1"),
        "linux/amd64",
        Flavor::Oci,
    )
    .await
    .unwrap();
    let image = format!("{}/overridden/app:v1", registry.host());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("overrides.yaml");
    std::fs::write(
        &file,
        "- images: [\"elsewhere.example/x\"]\n  platforms: [linux/s390x]\n",
    )
    .unwrap();
    let overrides = PlatformOverrides::load(&file, Duration::from_millis(1)).unwrap();
    let resolver = resolver_with(Config {
        insecure_registries: vec![registry.host()],
        platform_overrides: Some(Arc::new(overrides)),
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    });

    let first = resolver.resolve(&image, &[]).await.unwrap();
    assert_eq!(first.answered_by, Answered::Get);
    assert_eq!(platforms(&first), ["linux/amd64"]);
    // With overrides configured the synchronous cache read still answers: no entry matches.
    let cached = resolver.cached(&image, None).unwrap();
    assert_eq!(platforms_of(&cached), ["linux/amd64"]);

    let entry = format!(
        "- images: [\"{}/overridden\"]\n  platforms: [linux/arm64, linux/riscv64]\n",
        registry.host()
    );
    std::fs::write(&file, entry).unwrap();
    // The file is read again in the background once a read finds it older than the interval:
    // ask until the new entry answers (bounded).
    let mut listed = Vec::new();
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let routed = resolver.routed(&image).await.unwrap();
        listed = resolver
            .platforms_routed(&routed, None, &[])
            .await
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        if listed != ["linux/amd64"] {
            break;
        }
    }
    assert_eq!(listed, ["linux/arm64", "linux/riscv64"]);
    registry.reset_requests();
    let again = resolver.resolve(&image, &[]).await.unwrap();
    assert_eq!(again.answered_by, Answered::Override);
    assert_eq!(platforms(&again), ["linux/arm64", "linux/riscv64"]);
    // The synchronous read asks the overrides first: the new entry, not the cached answer.
    let cached = resolver.cached(&image, None).unwrap();
    assert_eq!(platforms_of(&cached), ["linux/arm64", "linux/riscv64"]);
    assert!(registry.requests().is_empty(), "{:?}", registry.requests());
}
