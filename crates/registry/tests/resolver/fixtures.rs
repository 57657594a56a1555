//! Every fixture kind on a plain registry: platforms, digests, media types, request counts,
//! single-flight, proxies, cache and metrics.

use noe_registry::{Config, Error};
use noe_test_support::{push_standard_fixtures, Registry};

use super::support::{platforms, resolver, resolver_with, sorted};

#[tokio::test]
async fn every_fixture_kind_resolves_to_its_platforms() {
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let resolver = resolver(&[registry.host()]);
    for fixture in fixtures.all() {
        for image in [fixture.reference(), fixture.digest_reference()] {
            let resolution = resolver
                .resolve(&image, &[])
                .await
                .unwrap_or_else(|e| panic!("{image}: {e}"));
            assert_eq!(
                platforms(&resolution),
                sorted(&fixture.platforms),
                "{image}"
            );
            assert_eq!(resolution.digest, fixture.digest, "{image}");
            assert_eq!(resolution.media_type, fixture.media_type, "{image}");
            assert_eq!(resolution.credential_source, None);
            assert_eq!(resolution.image, image);
            assert_eq!(resolution.resolved, image);
        }
    }
}

/// Windows index entries keep their `os.version` (node.kubernetes.io/windows-build needs it);
/// the displayed platform does not show it.
#[tokio::test]
async fn windows_entries_keep_their_os_version() {
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let resolution = resolver(&[registry.host()])
        .resolve(&fixtures.windows_index.reference(), &[])
        .await
        .unwrap();
    let versions: Vec<(String, Option<&str>)> = resolution
        .platforms
        .iter()
        .map(|p| (p.to_string(), p.os_version.as_deref()))
        .collect();
    assert_eq!(
        versions,
        [
            ("linux/amd64".to_owned(), None),
            ("windows/amd64".to_owned(), Some("10.0.20348.2227")),
        ]
    );
}

/// The request target (docs/benchmarks.md): 1 request for an index or list, 2 for a single manifest.
#[tokio::test]
async fn request_counts_per_image() {
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let resolver = resolver(&[registry.host()]);
    let cases = [
        (&fixtures.oci_index, 1),
        (&fixtures.docker_list, 1),
        (&fixtures.windows_index, 1),
        (&fixtures.oci_single, 2),
        (&fixtures.docker_single, 2),
        // index + inner index (no platform)
        (&fixtures.nested_index, 2),
        // index + platform-less child manifest + its config
        (&fixtures.index_without_platform, 3),
    ];
    for (fixture, expected) in cases {
        registry.reset_requests();
        resolver.resolve(&fixture.reference(), &[]).await.unwrap();
        let requests = registry.requests();
        let summary: Vec<String> = requests.iter().map(|r| r.summary()).collect();
        println!(
            "{}: {} requests {summary:?}",
            fixture.repository,
            requests.len()
        );
        assert_eq!(
            requests.len(),
            expected,
            "{}: {summary:?}",
            fixture.reference()
        );
        // Cached now: no further request.
        registry.reset_requests();
        resolver.resolve(&fixture.reference(), &[]).await.unwrap();
        assert_eq!(registry.request_count(), 0, "{}", fixture.reference());
    }
}

/// The request target (docs/benchmarks.md): N concurrent lookups of one uncached image make one upstream lookup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_concurrent_lookups_make_one_upstream_lookup() {
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let resolver = resolver(&[registry.host()]);
    registry.reset_requests();
    let image = fixtures.oci_single.reference();
    let lookups = (0..100).map(|_| {
        let resolver = resolver.clone();
        let image = image.clone();
        tokio::spawn(async move { resolver.resolve(&image, &[]).await })
    });
    let results = futures::future::join_all(lookups).await;
    let first = results[0].as_ref().unwrap().as_ref().unwrap().clone();
    for result in results {
        let resolution = result.unwrap().unwrap();
        assert_eq!(resolution.digest, first.digest);
        assert_eq!(resolution.platforms, first.platforms);
    }
    let requests = registry.requests();
    let summary: Vec<String> = requests.iter().map(|r| r.summary()).collect();
    println!(
        "100 concurrent lookups of {image}: {} requests {summary:?}",
        requests.len()
    );
    assert_eq!(
        requests.iter().filter(|r| r.is_manifest()).count(),
        1,
        "{summary:?}"
    );
    assert_eq!(requests.len(), 2, "{summary:?}");
    assert_eq!(resolver.cache_entries(), 1);
}

#[tokio::test]
async fn proxies_rewrite_the_registry_and_keep_the_path() {
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let resolver = resolver_with(Config {
        proxies: vec![
            ("docker.io".into(), "mirror.invalid".into()),
            ("mirror.*".into(), registry.host()),
        ],
        insecure_registries: vec![registry.host()],
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    });
    let image = "docker.io/fixtures/oci-index:v1";
    assert_eq!(
        resolver.target(image).unwrap().to_string(),
        fixtures.oci_index.reference()
    );
    let resolution = resolver.resolve(image, &[]).await.unwrap();
    assert_eq!(resolution.image, image);
    assert_eq!(resolution.resolved, fixtures.oci_index.reference());
    assert_eq!(
        platforms(&resolution),
        sorted(&fixtures.oci_index.platforms)
    );
}

#[tokio::test]
async fn missing_images_fail_clearly_and_failures_are_cached_briefly() {
    let registry = Registry::start().await.unwrap();
    push_standard_fixtures(&registry).await.unwrap();
    let resolver = resolver(&[registry.host()]);
    let image = registry.reference("fixtures/absent", "v1");
    registry.reset_requests();
    let error = resolver.resolve(&image, &[]).await.unwrap_err();
    assert!(matches!(error, Error::NotFound { .. }), "{error:?}");
    assert!(error.to_string().contains(&image), "{error}");
    assert_eq!(registry.request_count(), 1);
    let again = resolver.resolve(&image, &[]).await.unwrap_err();
    assert!(matches!(again, Error::NotFound { .. }));
    assert_eq!(
        registry.request_count(),
        1,
        "the failure was answered from the cache"
    );
}

#[tokio::test]
async fn metrics_count_requests_with_bounded_labels() {
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let metrics = prometheus::Registry::new();
    let resolver = noe_registry::Resolver::new(
        Config {
            insecure_registries: vec![registry.host()],
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &metrics,
    )
    .unwrap();
    resolver
        .resolve(&fixtures.oci_single.reference(), &[])
        .await
        .unwrap();
    resolver
        .resolve(&fixtures.oci_single.reference(), &[])
        .await
        .unwrap();
    let text = prometheus::TextEncoder::new()
        .encode_to_string(&metrics.gather())
        .unwrap();
    for line in [
        "noe_registry_requests_total 2",
        "noe_registry_responses_total{http_status=\"200\",kind=\"manifest\"} 1",
        "noe_registry_responses_total{http_status=\"200\",kind=\"blob\"} 1",
        "noe_registry_cache_requests_total 2",
        "noe_registry_cache_responses_total{cache=\"hit\"} 1",
        "noe_registry_cache_responses_total{cache=\"miss\"} 1",
        "noe_registry_cache_entries 1",
    ] {
        assert!(text.contains(line), "{line} missing in\n{text}");
    }
    let host_label = format!("registry=\"{}\"", registry.host());
    assert!(
        text.contains(&host_label),
        "configured host is a label value:\n{text}"
    );
    assert!(
        !text.contains("fixtures/"),
        "no image name in any label:\n{text}"
    );
}

#[tokio::test]
async fn credentials_an_open_registry_never_asked_for_are_not_reported() {
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let resolver = resolver(&[registry.host()]);
    let candidate = noe_credentials::CredentialCandidate::new(
        "unused",
        noe_credentials::Credential::Basic {
            username: "u".into(),
            password: "p".into(),
        },
    );
    let resolution = resolver
        .resolve(&fixtures.oci_index.reference(), &[candidate])
        .await
        .unwrap();
    assert_eq!(resolution.credential_source, None);
}
