//! Upgrade paths (`noe_registry::upgrade`) against the real registry, with repositories these
//! tests push: each version a tag on an index that lists amd64 only, or amd64 and arm64. The
//! registry's access log counts what each search asked. Pagination, truncation and failures a
//! real registry will not produce are scripted on the fake registry.

use noe_core::upgrade::{NoPath, NoTrack, Path, Upgrade};
use noe_core::Platform;
use noe_registry::upgrade::Upgrades;
use noe_registry::{Config, Resolver};
use noe_test_support::{
    build_index, manifest_path, media_types, push_versions, Behavior, Descriptor, FakeRegistry,
    Flavor, IndexEntry, Registry,
};

use super::support::resolver_with;

fn arm64() -> Platform {
    Platform::new("linux", "arm64", None)
}

/// The two index bodies every version of a repository points at.
struct Indexes {
    amd64: Vec<u8>,
    both: Vec<u8>,
}

impl Indexes {
    fn of(amd: &Descriptor, arm: &Descriptor) -> Indexes {
        let amd64 = build_index(Flavor::Oci, &[IndexEntry::new(amd, Some("linux/amd64"))])
            .unwrap()
            .0;
        let both = build_index(
            Flavor::Oci,
            &[
                IndexEntry::new(amd, Some("linux/amd64")),
                IndexEntry::new(arm, Some("linux/arm64")),
            ],
        )
        .unwrap()
        .0;
        Indexes { amd64, both }
    }
}

/// Pushes each `(tag, runs on arm64)` of `versions` to `repository`.
async fn push(registry: &Registry, repository: &str, versions: &[(&str, bool)]) {
    push_versions(&registry.pusher().unwrap(), repository, versions)
        .await
        .unwrap();
}

fn resolver(registry: &Registry) -> Resolver {
    resolver_with(Config {
        insecure_registries: vec![registry.host()],
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    })
}

/// The upgrade path of `image` for arm64.
async fn find(resolver: &Resolver, image: &str) -> Upgrade {
    let routed = resolver.routed(image).await.unwrap();
    Upgrades::new(resolver.clone())
        .find(&routed, None, &[], &arm64())
        .await
}

fn path_of(upgrade: &Upgrade) -> &Path {
    match &upgrade.outcome {
        Ok(path) => path,
        Err(no_path) => panic!("{}: no path: {}", upgrade.image, no_path.reason()),
    }
}

/// ⌈log2(n)⌉ + 3: the manifest lookups a search of a track of `n` versions may make.
fn budget(n: usize) -> usize {
    noe_core::upgrade::search::budget(n)
}

#[tokio::test]
async fn a_semver_track_where_arm64_appears_at_1_2_0() {
    let registry = Registry::start().await.unwrap();
    let repository = "upgrade/semver";
    let mut versions: Vec<(String, bool)> = Vec::new();
    for minor in 0..6 {
        for patch in 0..4 {
            versions.push((format!("1.{minor}.{patch}"), minor >= 2));
        }
    }
    // Other shapes, which are not on the track of `1.0.1` whatever they run on.
    let noise = [
        ("latest", true),
        ("1.1", true),
        ("v1.1.0", true),
        ("1.1.0-alpine", true),
        ("1.1.9-rc.1", true),
        ("20240115", true),
    ];
    let all: Vec<(&str, bool)> = versions
        .iter()
        .map(|(t, a)| (t.as_str(), *a))
        .chain(noise)
        .collect();
    push(&registry, repository, &all).await;
    let resolver = resolver(&registry);
    registry.reset_requests();
    let upgrade = find(&resolver, &registry.reference(repository, "1.0.1")).await;
    let path = path_of(&upgrade);
    assert_eq!(path.current, "1.0.1");
    assert_eq!(path.first.as_deref(), Some("1.2.0"));
    assert_eq!(path.newest, "1.5.3");
    assert_eq!(path.newest_supports, Some(true));
    assert_eq!(path.unknown, None);
    assert_eq!(path.short(), "1.2.0 (newest 1.5.3)");
    // One tag page, and at most ⌈log2(24)⌉ + 3 manifest lookups, each counted.
    let (pages, manifests) = registry.repository_requests(repository);
    assert_eq!(pages, 1);
    assert!(manifests <= budget(versions.len()), "{manifests} lookups");
    assert_eq!(path.requests, u64::try_from(pages + manifests).unwrap());

    // A second search of the same image asks the registry nothing more for its versions: the
    // platform cache answers.
    registry.reset_requests();
    let again = find(&resolver, &registry.reference(repository, "1.0.1")).await;
    assert_eq!(path_of(&again).first.as_deref(), Some("1.2.0"));
    assert_eq!(registry.repository_requests(repository), (1, 0));
    assert_eq!(path_of(&again).requests, 1);
}

#[tokio::test]
async fn suffix_tracks_v_prefixes_and_pre_releases_are_tracks_of_their_own() {
    let registry = Registry::start().await.unwrap();
    let repository = "upgrade/shapes";
    push(
        &registry,
        repository,
        &[
            ("1.1.0", false),
            ("1.2.0", true),
            ("1.3.0", true),
            ("1.1.0-alpine", false),
            ("1.2.0-alpine", false),
            ("1.3.0-alpine", true),
            ("v1.1.0", false),
            ("v1.2.0", false),
            ("v1.3.0", false),
            ("v1.4.0", true),
            ("2.0.0-rc.1", false),
            ("2.0.0-rc.2", true),
            ("2.0.0", true),
            ("1.4.0-beta.1", true),
            ("1.4.0", true),
        ],
    )
    .await;
    let resolver = resolver(&registry);
    let first = |tag: &'static str| {
        let resolver = resolver.clone();
        let image = registry.reference(repository, tag);
        async move { path_of(&find(&resolver, &image).await).first.clone() }
    };
    assert_eq!(first("1.1.0").await.as_deref(), Some("1.2.0"));
    assert_eq!(first("1.1.0-alpine").await.as_deref(), Some("1.3.0-alpine"));
    assert_eq!(first("v1.1.0").await.as_deref(), Some("v1.4.0"));
    // From a pre-release, pre-releases are on the track; from a release, they are not.
    assert_eq!(first("2.0.0-rc.1").await.as_deref(), Some("2.0.0-rc.2"));
    let from_release = find(&resolver, &registry.reference(repository, "1.1.0")).await;
    assert_eq!(path_of(&from_release).newest, "2.0.0");
}

#[tokio::test]
async fn support_removed_and_added_again() {
    let registry = Registry::start().await.unwrap();
    let repository = "upgrade/flaky";
    push(
        &registry,
        repository,
        &[
            ("1.0.0", false),
            ("1.1.0", true),
            ("1.2.0", false),
            ("1.3.0", true),
        ],
    )
    .await;
    let resolver = resolver(&registry);
    let upgrade = find(&resolver, &registry.reference(repository, "1.0.0")).await;
    assert_eq!(path_of(&upgrade).first.as_deref(), Some("1.1.0"));
    assert_eq!(path_of(&upgrade).newest_supports, Some(true));

    // Added at 1.2.0, removed from 1.3.0: the newest and the lowest do not support, the
    // middle does, and the versions below it are looked up one by one.
    let repository = "upgrade/dropped";
    push(
        &registry,
        repository,
        &[
            ("1.0.0", false),
            ("1.1.0", false),
            ("1.2.0", true),
            ("1.3.0", false),
            ("1.4.0", false),
        ],
    )
    .await;
    let upgrade = find(&resolver, &registry.reference(repository, "1.0.0")).await;
    let path = path_of(&upgrade);
    assert_eq!(path.first.as_deref(), Some("1.2.0"));
    assert_eq!(
        (path.newest.as_str(), path.newest_supports),
        ("1.4.0", Some(false))
    );
    assert_eq!(path.short(), "1.2.0 (newest 1.4.0 does not)");
}

#[tokio::test]
async fn latest_and_digests_have_no_track_and_ask_nothing() {
    let registry = Registry::start().await.unwrap();
    let repository = "upgrade/pinned";
    push(
        &registry,
        repository,
        &[("latest", false), ("1.0.0", false), ("1.1.0", true)],
    )
    .await;
    let resolver = resolver(&registry);
    registry.reset_requests();
    let latest = find(&resolver, &registry.reference(repository, "latest")).await;
    assert_eq!(latest.outcome, Err(NoPath::NoTrack(NoTrack::Latest)));
    let digest = resolver
        .resolve(&registry.reference(repository, "1.0.0"), &[])
        .await
        .unwrap()
        .digest
        .clone();
    let bare = format!("{}/{repository}@{digest}", registry.host());
    let bare = find(&resolver, &bare).await;
    assert_eq!(bare.outcome, Err(NoPath::NoTrack(NoTrack::DigestOnly)));
    assert_eq!(
        registry.repository_requests(repository).0,
        0,
        "no tag listed"
    );
    // A digest with its tag: the tag's track.
    let pinned = format!("{}/{repository}:1.0.0@{digest}", registry.host());
    let pinned = find(&resolver, &pinned).await;
    assert_eq!(path_of(&pinned).first.as_deref(), Some("1.1.0"));
}

/// A fake registry serving `tags` in pages of `page` with `Link` headers, each tag's manifest
/// the arm64 index from `arm_from` on.
fn script_track(
    fake: &FakeRegistry,
    repository: &str,
    tags: &[String],
    page: usize,
    arm_from: usize,
) {
    let amd = noe_test_support::build_image("fake-amd", "linux/amd64", Flavor::Oci).unwrap();
    let arm = noe_test_support::build_image("fake-arm", "linux/arm64", Flavor::Oci).unwrap();
    let indexes = Indexes::of(&amd.descriptor, &arm.descriptor);
    for (i, tag) in tags.iter().enumerate() {
        let body = if i >= arm_from {
            &indexes.both
        } else {
            &indexes.amd64
        };
        fake.script_manifest(repository, tag, media_types::OCI_INDEX, body);
    }
    let chunks: Vec<&[String]> = tags.chunks(page).collect();
    let pages: Vec<Behavior> = chunks
        .iter()
        .enumerate()
        .map(|(i, chunk)| {
            let body = serde_json::json!({"name": repository, "tags": chunk});
            let mut behavior = Behavior::json(200, &body);
            if i + 1 < chunks.len() {
                let last = chunk.last().unwrap();
                behavior = behavior.with_header(
                    "link",
                    &format!("</v2/{repository}/tags/list?last={last}&n={page}>; rel=\"next\""),
                );
            }
            behavior
        })
        .collect();
    fake.route(
        &format!("/v2/{repository}/tags/list"),
        Behavior::Sequence(pages),
    );
}

fn fake_resolver(fake: &FakeRegistry) -> Resolver {
    resolver_with(Config {
        insecure_registries: vec![fake.host()],
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    })
}

#[tokio::test]
async fn three_thousand_tags_over_link_pages() {
    let fake = FakeRegistry::start().await.unwrap();
    let repository = "upgrade/many";
    let tags: Vec<String> = (0..3000)
        .map(|i| format!("{}.{}.0", i / 100, i % 100))
        .collect();
    script_track(&fake, repository, &tags, 1000, 2345);
    let resolver = fake_resolver(&fake);
    let upgrade = find(&resolver, &format!("{}/{repository}:0.0.0", fake.host())).await;
    let path = path_of(&upgrade);
    assert_eq!(path.first.as_deref(), Some("23.45.0"));
    assert_eq!(path.newest, "29.99.0");
    let pages = fake.requests_to(&format!("/v2/{repository}/tags/list"));
    assert_eq!(pages.len(), 3);
    assert_eq!(pages[0].query.as_deref(), Some("n=1000"));
    assert_eq!(pages[2].query.as_deref(), Some("last=19.99.0&n=1000"));
    let manifests = fake
        .requests()
        .iter()
        .filter(|r| r.path.contains("/manifests/"))
        .count();
    assert!(
        manifests <= budget(3000),
        "{manifests} lookups for 3,000 versions"
    );
    assert_eq!(path.requests, u64::try_from(3 + manifests).unwrap());
}

#[tokio::test]
async fn tag_lists_are_bounded() {
    let fake = FakeRegistry::start().await.unwrap();
    // 11 pages of 1,000: the list is cut at 10,000 and says so.
    let repository = "upgrade/endless";
    let tags: Vec<String> = (0..11_000).map(|i| format!("1.{i}.0")).collect();
    script_track(&fake, repository, &tags, 1000, 5);
    let resolver = fake_resolver(&fake);
    let routed = resolver
        .routed(&format!("{}/{repository}:1.0.0", fake.host()))
        .await
        .unwrap();
    let listed = resolver.tags(&routed, &[]).await.unwrap();
    assert_eq!(listed.tags.len(), noe_core::upgrade::MAX_TAGS);
    assert!(listed.truncated);
    assert_eq!(listed.pages, 10);
    // The pages again from the first, for the search's own listing.
    script_track(&fake, repository, &tags, 1000, 5);
    let upgrade = find(&resolver, &format!("{}/{repository}:1.0.0", fake.host())).await;
    let unknown = path_of(&upgrade).unknown.clone().unwrap_or_default();
    assert!(unknown.contains("only the first 10000 tags"), "{unknown}");

    // A `Link` back to a page already read ends the list; one to another host is not followed.
    let repository = "upgrade/loop";
    fake.route(
        &format!("/v2/{repository}/tags/list"),
        Behavior::json(
            200,
            &serde_json::json!({"name": repository, "tags": ["1.0.0", "1.1.0"]}),
        )
        .with_header(
            "link",
            &format!("</v2/{repository}/tags/list?n=1000>; rel=\"next\""),
        ),
    );
    let routed = resolver
        .routed(&format!("{}/{repository}:1.0.0", fake.host()))
        .await
        .unwrap();
    let listed = resolver.tags(&routed, &[]).await.unwrap();
    assert_eq!(
        (listed.tags.len(), listed.pages, listed.truncated),
        (2, 1, false)
    );
    let repository = "upgrade/away";
    fake.route(
        &format!("/v2/{repository}/tags/list"),
        Behavior::json(
            200,
            &serde_json::json!({"name": repository, "tags": ["1.0.0", "bad tag!"]}),
        )
        .with_header(
            "link",
            &format!(
                "<{}/v2/{repository}/tags/list?last=x>; rel=\"next\"",
                fake.other_base_url()
            ),
        ),
    );
    let routed = resolver
        .routed(&format!("{}/{repository}:1.0.0", fake.host()))
        .await
        .unwrap();
    let listed = resolver.tags(&routed, &[]).await.unwrap();
    assert_eq!(listed.tags, ["1.0.0"], "the invalid tag is skipped");
    assert_eq!(listed.pages, 1);
    assert!(fake
        .requests()
        .iter()
        .all(|r| r.listener == noe_test_support::Listener::Main));
}

#[tokio::test]
async fn registry_errors_mid_search_leave_the_answer_unknown() {
    let fake = FakeRegistry::start().await.unwrap();
    let repository = "upgrade/failing";
    let tags: Vec<String> = (0..16).map(|i| format!("1.{i}.0")).collect();
    script_track(&fake, repository, &tags, 1000, 6);
    // The lowest version that runs on arm64 answers 500 (twice: the client retries once).
    fake.route(&manifest_path(repository, "1.6.0"), Behavior::status(500));
    let resolver = fake_resolver(&fake);
    let upgrade = find(&resolver, &format!("{}/{repository}:1.0.0", fake.host())).await;
    let path = path_of(&upgrade);
    assert_eq!(path.first, None, "never a version that is not proven");
    let unknown = path.unknown.clone().unwrap_or_default();
    assert!(unknown.contains("the lookup of 1.6.0 failed"), "{unknown}");
    assert_eq!(path.newest_supports, Some(true));
    assert!(path.short().starts_with("unknown"), "{}", path.short());

    // The tag list itself fails: no path, and why.
    let repository = "upgrade/unlisted";
    fake.route(
        &format!("/v2/{repository}/tags/list"),
        Behavior::status(403),
    );
    let upgrade = find(&resolver, &format!("{}/{repository}:1.0.0", fake.host())).await;
    match &upgrade.outcome {
        Err(NoPath::Tags { kind, .. }) => assert!(!kind.is_empty()),
        other => panic!("{other:?}"),
    }
}
