//! What a real registry will not do, from the fake registry: hangs, garbage, 429, oversized
//! bodies, cross-host redirects, digest mismatches; and the metadata-address guard.

use std::time::{Duration, Instant};

use noe_credentials::{Credential, CredentialCandidate};
use noe_registry::{Config, Error};
use noe_test_support::{sha256_digest, Behavior, FakeRegistry, Listener};

use super::support::{platforms, resolver_with};

const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";

fn index_body() -> String {
    serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [{
            "mediaType": OCI_MANIFEST,
            "digest": format!("sha256:{}", "a".repeat(64)),
            "size": 1,
            "platform": {"os": "linux", "architecture": "arm64"}
        }]
    })
    .to_string()
}

fn fake_resolver(fake: &FakeRegistry, timeout: Duration) -> noe_registry::Resolver {
    resolver_with(Config {
        insecure_registries: vec![fake.host(), fake.other_host()],
        request_timeout: timeout,
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    })
}

#[tokio::test]
async fn a_hanging_registry_times_out_within_the_deadline() {
    let fake = FakeRegistry::start().await.unwrap();
    fake.route("/v2/slow/manifests/1", Behavior::Hang);
    let timeout = Duration::from_millis(500);
    let resolver = fake_resolver(&fake, timeout);
    let started = Instant::now();
    let error = resolver
        .resolve(&format!("{}/slow:1", fake.host()), &[])
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    assert!(matches!(error, Error::Timeout { .. }), "{error:?}");
    assert!(
        elapsed < timeout + Duration::from_millis(1000),
        "{elapsed:?}"
    );
    assert!(error.to_string().contains("slow:1"), "{error}");
}

#[tokio::test]
async fn a_trickling_body_times_out_too() {
    let fake = FakeRegistry::start().await.unwrap();
    fake.route(
        "/v2/trickle/manifests/1",
        Behavior::trickle(OCI_INDEX, index_body(), Duration::from_millis(50)),
    );
    let resolver = fake_resolver(&fake, Duration::from_millis(400));
    let started = Instant::now();
    let error = resolver
        .resolve(&format!("{}/trickle:1", fake.host()), &[])
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Timeout { .. }), "{error:?}");
    assert!(started.elapsed() < Duration::from_millis(1400));
}

#[tokio::test]
async fn garbage_gives_a_clear_error() {
    let fake = FakeRegistry::start().await.unwrap();
    fake.route("/v2/garbage/manifests/1", Behavior::invalid_json());
    fake.route(
        "/v2/html/manifests/1",
        Behavior::body(200, "text/html", "<html>login</html>"),
    );
    let resolver = fake_resolver(&fake, Duration::from_secs(2));
    for image in ["garbage:1", "html:1"] {
        let image = format!("{}/{image}", fake.host());
        let error = resolver.resolve(&image, &[]).await.unwrap_err();
        assert!(
            matches!(
                error,
                Error::InvalidContent {
                    what: "manifest",
                    ..
                }
            ),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(
            message.contains(&image) && message.contains(&fake.host()),
            "{message}"
        );
    }
}

#[tokio::test]
async fn too_many_requests_is_retried_once_after_retry_after() {
    let fake = FakeRegistry::start().await.unwrap();
    fake.route(
        "/v2/busy/manifests/1",
        Behavior::Sequence(vec![
            Behavior::too_many_requests(1),
            Behavior::manifest(OCI_INDEX, index_body()),
        ]),
    );
    fake.route(
        "/v2/busier/manifests/1",
        Behavior::Sequence(vec![Behavior::too_many_requests(1)]),
    );
    // Another host: after `busier`, this one is held back until its Retry-After has passed.
    let patient = FakeRegistry::start().await.unwrap();
    patient.route(
        "/v2/patience/manifests/1",
        Behavior::Sequence(vec![Behavior::too_many_requests(30)]),
    );
    let resolver = noe_registry::Resolver::new(
        noe_registry::Config {
            insecure_registries: vec![fake.host(), patient.host()],
            request_timeout: Duration::from_secs(3),
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..noe_registry::Config::default()
        },
        &prometheus::Registry::new(),
    )
    .unwrap();

    let started = Instant::now();
    let resolution = resolver
        .resolve(&format!("{}/busy:1", fake.host()), &[])
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After honoured"
    );
    assert_eq!(platforms(&resolution), ["linux/arm64"]);
    assert_eq!(fake.requests_to("/v2/busy/manifests/1").len(), 2);

    // Still 429 after the retry: an error naming the status, and only two requests.
    let error = resolver
        .resolve(&format!("{}/busier:1", fake.host()), &[])
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::Status { status: 429, .. }),
        "{error:?}"
    );
    assert_eq!(fake.requests_to("/v2/busier/manifests/1").len(), 2);
    // The host is now held back (tests/fault_matrix/throttle.rs has the rest).
    let error = resolver
        .resolve(&format!("{}/busy:1-other", fake.host()), &[])
        .await
        .unwrap_err();
    assert_eq!(error.kind(), "circuit_open", "{error}");

    // A Retry-After beyond the deadline is not waited for.
    let started = Instant::now();
    let error = resolver
        .resolve(&format!("{}/patience:1", patient.host()), &[])
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::Status { status: 429, .. }),
        "{error:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(patient.requests_to("/v2/patience/manifests/1").len(), 1);
}

#[tokio::test]
async fn server_errors_are_retried_once() {
    let fake = FakeRegistry::start().await.unwrap();
    fake.route(
        "/v2/flaky/manifests/1",
        Behavior::Sequence(vec![
            Behavior::status(503),
            Behavior::manifest(OCI_INDEX, index_body()),
        ]),
    );
    let resolver = fake_resolver(&fake, Duration::from_secs(2));
    let resolution = resolver
        .resolve(&format!("{}/flaky:1", fake.host()), &[])
        .await
        .unwrap();
    assert_eq!(platforms(&resolution), ["linux/arm64"]);
    assert_eq!(fake.requests_to("/v2/flaky/manifests/1").len(), 2);
}

#[tokio::test]
async fn oversized_bodies_are_refused() {
    let fake = FakeRegistry::start().await.unwrap();
    let len = 5 * 1024 * 1024;
    fake.route(
        "/v2/declared/manifests/1",
        Behavior::oversized(OCI_INDEX, len, true),
    );
    fake.route(
        "/v2/chunked/manifests/1",
        Behavior::oversized(OCI_INDEX, len, false),
    );
    let resolver = fake_resolver(&fake, Duration::from_secs(5));
    for image in ["declared:1", "chunked:1"] {
        let error = resolver
            .resolve(&format!("{}/{image}", fake.host()), &[])
            .await
            .unwrap_err();
        assert!(
            matches!(error, Error::TooLarge { limit: 4194304, .. }),
            "{image}: {error:?}"
        );
    }
}

#[tokio::test]
async fn blob_redirect_to_another_host_drops_authorization() {
    let fake = FakeRegistry::start().await.unwrap();
    let config =
        serde_json::json!({"architecture": "arm", "os": "linux", "variant": "v6"}).to_string();
    let config_digest = sha256_digest(config.as_bytes());
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": config.len()},
        "layers": []
    })
    .to_string();
    fake.route(
        "/v2/app/manifests/1",
        Behavior::Sequence(vec![
            Behavior::basic_challenge("fake"),
            Behavior::manifest(OCI_MANIFEST, manifest),
        ]),
    );
    fake.route(
        &format!("/v2/app/blobs/{config_digest}"),
        Behavior::redirect_to_other("/storage/config"),
    );
    fake.route(
        "/storage/config",
        Behavior::body(200, "application/octet-stream", config),
    );
    let resolver = fake_resolver(&fake, Duration::from_secs(2));
    let candidate = CredentialCandidate::new(
        "basic",
        Credential::Basic {
            username: "u".into(),
            password: "p".into(),
        },
    );
    let resolution = resolver
        .resolve(&format!("{}/app:1", fake.host()), &[candidate])
        .await
        .unwrap();
    assert_eq!(platforms(&resolution), ["linux/arm/v6"]);
    let requests = fake.requests();
    let blob = requests
        .iter()
        .find(|r| r.path.contains("/blobs/"))
        .expect("blob requested");
    assert!(
        blob.has_authorization(),
        "the registry itself gets the credentials"
    );
    let storage: Vec<_> = requests
        .iter()
        .filter(|r| r.path == "/storage/config")
        .collect();
    assert_eq!(storage.len(), 1);
    assert_eq!(storage[0].listener, Listener::Other);
    assert!(
        !storage[0].has_authorization(),
        "no Authorization on another host"
    );
}

#[tokio::test]
async fn digest_mismatches_are_refused() {
    let fake = FakeRegistry::start().await.unwrap();
    let body = index_body();
    let claimed = format!("sha256:{}", "b".repeat(64));
    fake.route(
        &format!("/v2/tampered/manifests/{claimed}"),
        Behavior::manifest_with_digest(OCI_INDEX, body.clone(), &claimed),
    );
    // The right digest is accepted.
    let right = sha256_digest(body.as_bytes());
    fake.route(
        &format!("/v2/tampered/manifests/{right}"),
        Behavior::manifest(OCI_INDEX, body),
    );
    let resolver = fake_resolver(&fake, Duration::from_secs(2));
    let error = resolver
        .resolve(&format!("{}/tampered@{claimed}", fake.host()), &[])
        .await
        .unwrap_err();
    assert!(matches!(error, Error::DigestMismatch { .. }), "{error:?}");
    assert!(error.to_string().contains(&claimed), "{error}");
    let resolution = resolver
        .resolve(&format!("{}/tampered@{right}", fake.host()), &[])
        .await
        .unwrap();
    assert_eq!(resolution.digest, right);
}

#[tokio::test]
async fn a_config_blob_that_does_not_match_its_digest_is_refused() {
    let fake = FakeRegistry::start().await.unwrap();
    let claimed = format!("sha256:{}", "c".repeat(64));
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": claimed, "size": 10},
        "layers": []
    })
    .to_string();
    fake.route(
        "/v2/app/manifests/1",
        Behavior::manifest(OCI_MANIFEST, manifest),
    );
    fake.route(
        &format!("/v2/app/blobs/{claimed}"),
        Behavior::json(
            200,
            &serde_json::json!({"architecture": "amd64", "os": "linux"}),
        ),
    );
    let resolver = fake_resolver(&fake, Duration::from_secs(2));
    let error = resolver
        .resolve(&format!("{}/app:1", fake.host()), &[])
        .await
        .unwrap_err();
    assert!(matches!(error, Error::DigestMismatch { .. }), "{error:?}");
}

#[tokio::test]
async fn rate_limit_headers_feed_the_gauges() {
    let fake = FakeRegistry::start().await.unwrap();
    fake.route(
        "/v2/limited/manifests/1",
        Behavior::manifest(OCI_INDEX, index_body())
            .with_header("ratelimit-limit", "100;w=21600")
            .with_header("ratelimit-remaining", "76;w=21600"),
    );
    let metrics = prometheus::Registry::new();
    let resolver = noe_registry::Resolver::new(
        Config {
            insecure_registries: vec![fake.host()],
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &metrics,
    )
    .unwrap();
    resolver
        .resolve(&format!("{}/limited:1", fake.host()), &[])
        .await
        .unwrap();
    let text = prometheus::TextEncoder::new()
        .encode_to_string(&metrics.gather())
        .unwrap();
    let host = fake.host();
    for line in [
        format!("noe_registry_rate_limit_limit{{registry=\"{host}\"}} 100"),
        format!("noe_registry_rate_limit_remaining{{registry=\"{host}\"}} 76"),
        format!("noe_registry_rate_limit_window_seconds{{registry=\"{host}\"}} 21600"),
    ] {
        assert!(text.contains(&line), "{line} missing in\n{text}");
    }
}

#[tokio::test]
async fn metadata_addresses_are_refused_without_any_connection() {
    let resolver = resolver_with(Config {
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    });
    for image in [
        "169.254.169.254/latest/meta-data:x",
        "169.254.169.254:80/app:1",
        "100.100.100.200/app:1",
        "[fe80::1]:5000/app:1",
        "[fd00:ec2::254]/app:1",
        "[::ffff:a9fe:a9fe]:5000/app:1",
    ] {
        let started = Instant::now();
        let error = resolver.resolve(image, &[]).await.unwrap_err();
        assert!(matches!(error, Error::Blocked { .. }), "{image}: {error:?}");
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "{image}: no network"
        );
    }
}

#[tokio::test]
async fn a_token_realm_on_a_metadata_address_is_refused() {
    let fake = FakeRegistry::start().await.unwrap();
    fake.route(
        "/v2/app/manifests/1",
        Behavior::bearer_challenge("http://169.254.169.254/token", "svc"),
    );
    let resolver = fake_resolver(&fake, Duration::from_secs(2));
    let error = resolver
        .resolve(&format!("{}/app:1", fake.host()), &[])
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Blocked { .. }), "{error:?}");
}

#[tokio::test]
async fn a_redirect_to_a_metadata_address_is_refused() {
    let fake = FakeRegistry::start().await.unwrap();
    fake.route(
        "/v2/app/manifests/1",
        Behavior::status(307).with_header("location", "http://169.254.169.254/latest/meta-data"),
    );
    let resolver = fake_resolver(&fake, Duration::from_secs(2));
    let started = Instant::now();
    let error = resolver
        .resolve(&format!("{}/app:1", fake.host()), &[])
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Blocked { .. }), "{error:?}");
    assert!(started.elapsed() < Duration::from_millis(1000));
}
