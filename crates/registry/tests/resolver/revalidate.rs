//! An expired tag is revalidated with a HEAD: against the real registry (which answers HEAD with
//! `Docker-Content-Digest`) an unchanged digest costs no GET and a moved tag is fetched again;
//! against a registry that omits the header, the HEAD falls back to a GET.
//!
//! Each expiry moves the resolver's manual clock past the tag TTL (only request counts are
//! asserted).

use std::time::Duration;

use noe_core::clock::Clock;
use noe_registry::{Answered, Config};
use noe_test_support::{
    build_index, manifest_path, media_types, push_image, push_index, Behavior, FakeRegistry,
    Flavor, IndexEntry, Registry,
};

use super::support::{platforms, resolver_with};

/// The tags' lifetime in these tests, on a manual clock.
const TTL: Duration = Duration::from_secs(60);

fn expiring(insecure: &[String]) -> (noe_registry::Resolver, Clock) {
    let clock = Clock::manual();
    let resolver = resolver_with(Config {
        insecure_registries: insecure.to_vec(),
        cache_ttl: TTL,
        clock: clock.clone(),
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    });
    (resolver, clock)
}

/// Moves `clock` past the tags' lifetime.
fn expire(clock: &Clock) {
    clock.advance(TTL);
}

/// `METHOD path` of each request the registry answered.
fn methods(registry: &Registry) -> Vec<String> {
    registry
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

#[tokio::test]
async fn an_unchanged_tag_costs_a_head_and_a_moved_one_a_get() {
    let registry = Registry::start().await.unwrap();
    let pusher = registry.pusher().unwrap();
    let repository = "revalidate/app";
    let amd64 = push_image(&pusher, repository, None, "linux/amd64", Flavor::Oci)
        .await
        .unwrap();
    let arm64 = push_image(&pusher, repository, None, "linux/arm64", Flavor::Oci)
        .await
        .unwrap();
    let entry =
        |d: &noe_test_support::Descriptor, platform: &str| IndexEntry::new(d, Some(platform));
    push_index(
        &pusher,
        repository,
        Some("v1"),
        Flavor::Oci,
        &[entry(&amd64, "linux/amd64")],
    )
    .await
    .unwrap();
    let image = format!("{}/{repository}:v1", registry.host());
    let manifest = manifest_path(repository, "v1");
    let (resolver, clock) = expiring(&[registry.host()]);

    registry.reset_requests();
    let first = resolver.resolve(&image, &[]).await.unwrap();
    assert_eq!(first.answered_by, Answered::Get);
    assert_eq!(methods(&registry), [format!("GET {manifest}")]);

    // Expired, unchanged: one HEAD, the platforms reused.
    for _ in 0..3 {
        expire(&clock);
        registry.reset_requests();
        let again = resolver.resolve(&image, &[]).await.unwrap();
        assert_eq!(again.answered_by, Answered::Head);
        assert_eq!(again.digest, first.digest);
        assert_eq!(platforms(&again), ["linux/amd64"]);
        assert_eq!(methods(&registry), [format!("HEAD {manifest}")]);
    }
    // The tag moves: the HEAD names another digest, so the manifest is fetched.
    push_index(
        &pusher,
        repository,
        Some("v1"),
        Flavor::Oci,
        &[entry(&amd64, "linux/amd64"), entry(&arm64, "linux/arm64")],
    )
    .await
    .unwrap();
    expire(&clock);
    registry.reset_requests();
    let moved = resolver.resolve(&image, &[]).await.unwrap();
    assert_eq!(moved.answered_by, Answered::Get);
    assert_ne!(moved.digest, first.digest);
    assert_eq!(platforms(&moved), ["linux/amd64", "linux/arm64"]);
    assert_eq!(
        methods(&registry),
        [format!("HEAD {manifest}"), format!("GET {manifest}")]
    );

    // A digest reference is immutable: fresh long after the tag TTL.
    let pinned = format!("{}/{repository}@{}", registry.host(), moved.digest);
    resolver.resolve(&pinned, &[]).await.unwrap();
    expire(&clock);
    registry.reset_requests();
    let again = resolver.resolve(&pinned, &[]).await.unwrap();
    assert_eq!(again.answered_by, Answered::Cache);
    assert_eq!(registry.request_count(), 0);
}

#[tokio::test]
async fn a_head_without_the_digest_header_falls_back_to_a_get() {
    let fake = FakeRegistry::start().await.unwrap();
    let child = noe_test_support::Descriptor {
        media_type: media_types::OCI_MANIFEST.to_owned(),
        digest: format!("sha256:{}", "ab".repeat(32)),
        size: 100,
        config_digest: None,
    };
    let entries = [IndexEntry::new(&child, Some("linux/arm64"))];
    let (body, _) = build_index(Flavor::Oci, &entries).unwrap();
    let path = manifest_path("plain/app", "v1");
    // No Docker-Content-Digest, on GET or HEAD.
    fake.route(&path, Behavior::body(200, media_types::OCI_INDEX, body));
    let image = format!("{}/plain/app:v1", fake.host());
    let registry = prometheus::Registry::new();
    let clock = Clock::manual();
    let resolver = noe_registry::Resolver::new(
        Config {
            insecure_registries: vec![fake.host()],
            cache_ttl: TTL,
            clock: clock.clone(),
            request_timeout: Duration::from_secs(2),
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &registry,
    )
    .unwrap();

    assert_eq!(
        resolver.resolve(&image, &[]).await.unwrap().answered_by,
        Answered::Get
    );
    expire(&clock);
    fake.reset_requests();
    let again = resolver.resolve(&image, &[]).await.unwrap();
    assert_eq!(again.answered_by, Answered::Get);
    assert_eq!(platforms(&again), ["linux/arm64"]);
    let seen: Vec<String> = fake
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(seen, [format!("HEAD {path}"), format!("GET {path}")]);
    let text = prometheus::TextEncoder::new()
        .encode_to_string(&registry.gather())
        .unwrap();
    assert!(
        text.contains("noe_registry_revalidations_total{result=\"no_digest\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("noe_registry_responses_total{http_status=\"200\",kind=\"manifest_head\"} 1"),
        "{text}"
    );
}

/// A fake whose manifest answers GET with its digest and the revalidation HEAD with `head`.
async fn head_then_get(head: Behavior) -> (FakeRegistry, String, String) {
    let fake = FakeRegistry::start().await.unwrap();
    let child = noe_test_support::Descriptor {
        media_type: media_types::OCI_MANIFEST.to_owned(),
        digest: format!("sha256:{}", "cd".repeat(32)),
        size: 100,
        config_digest: None,
    };
    let entries = [IndexEntry::new(&child, Some("linux/arm64"))];
    let (body, _) = build_index(Flavor::Oci, &entries).unwrap();
    let digest = noe_test_support::sha256_digest(&body);
    let path = manifest_path("headless/app", "v1");
    let get = Behavior::manifest_with_digest(media_types::OCI_INDEX, body, &digest);
    // The first GET, the revalidation HEAD, then GETs.
    fake.route(&path, Behavior::Sequence(vec![get.clone(), head, get]));
    let image = format!("{}/headless/app:v1", fake.host());
    (fake, image, path)
}

#[tokio::test]
async fn a_head_404_while_get_works_falls_back_to_a_get() {
    let (fake, image, path) = head_then_get(Behavior::status(404)).await;
    let (resolver, clock) = expiring(&[fake.host()]);
    assert_eq!(
        resolver.resolve(&image, &[]).await.unwrap().answered_by,
        Answered::Get
    );
    expire(&clock);
    fake.reset_requests();
    let again = resolver.resolve(&image, &[]).await.unwrap();
    assert_eq!(again.answered_by, Answered::Get);
    assert_eq!(platforms(&again), ["linux/arm64"]);
    let seen: Vec<String> = fake
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(seen, [format!("HEAD {path}"), format!("GET {path}")]);
}

#[tokio::test]
async fn a_hanging_head_falls_back_to_a_get_within_the_timeout() {
    let (fake, image, path) = head_then_get(Behavior::Hang).await;
    let clock = Clock::manual();
    let resolver = resolver_with(Config {
        insecure_registries: vec![fake.host()],
        cache_ttl: TTL,
        clock: clock.clone(),
        // The HEAD gets a third of it; the GET that follows the rest.
        request_timeout: Duration::from_secs(3),
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    });
    resolver.resolve(&image, &[]).await.unwrap();
    expire(&clock);
    fake.reset_requests();
    let again = resolver.resolve(&image, &[]).await.unwrap();
    assert_eq!(again.answered_by, Answered::Get);
    assert_eq!(platforms(&again), ["linux/arm64"]);
    let seen: Vec<String> = fake
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(seen, [format!("HEAD {path}"), format!("GET {path}")]);
}
