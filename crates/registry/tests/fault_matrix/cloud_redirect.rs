//! Registry redirects and cloud credentials: a credential the cloud identity issued for its
//! registry (a GCE metadata server token here; ECR's and ACR's are Basic credentials alike) goes
//! to that registry only, never to the host a manifest or blob redirect names, neither in a
//! header nor in the URL.

use std::time::Duration;

use noe_cloud::{CloudCredentials, Config as CloudConfig, Env, Metrics, Provider};
use noe_credentials::Sources;
use noe_registry::manifest::{OCI_CONFIG, OCI_MANIFEST};
use noe_registry::{Config, Resolver};
use noe_test_support::{sha256_digest, Behavior, FakeRegistry, Listener};
use serde_json::json;

const TOKEN: &str = "ya29.cloud-token-SECRET";

#[tokio::test]
async fn a_cloud_credential_never_follows_a_redirect_to_another_host() {
    let metadata = FakeRegistry::start().await.unwrap();
    metadata.route(
        noe_cloud::gcp::TOKEN_PATH,
        Behavior::Respond {
            status: 200,
            headers: vec![
                ("Metadata-Flavor".into(), "Google".into()),
                ("Content-Type".into(), "application/json".into()),
            ],
            body: format!(r#"{{"access_token":"{TOKEN}","expires_in":3599}}"#).into(),
        },
    );
    let cloud = CloudCredentials::new(
        CloudConfig {
            providers: vec![Provider::Gcp],
            env: Env::from_pairs([("GCE_METADATA_HOST", metadata.host())]),
            timeout: Duration::from_secs(5),
            clock: noe_core::clock::Clock::system(),
        },
        noe_cloud::http_client(None).unwrap(),
        Metrics::new(None).unwrap(),
    )
    .unwrap();
    let candidates = Sources::none()
        .with_cloud(std::sync::Arc::new(cloud))
        .candidates("europe-docker.pkg.dev/project/repo/app:1")
        .await;
    assert_eq!(candidates.len(), 1, "{candidates:?}");

    // The registry asks for credentials, then sends both the manifest and its config blob to
    // another host (as registries send blobs to object storage).
    let fake = FakeRegistry::start().await.unwrap();
    let config = serde_json::to_vec(&json!({"os": "linux", "architecture": "riscv64"})).unwrap();
    let config_digest = sha256_digest(&config);
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": config.len()},
        "layers": [],
    }))
    .unwrap();
    fake.route(
        "/v2/repo/app/manifests/1",
        Behavior::Sequence(vec![
            Behavior::basic_challenge("registry"),
            Behavior::redirect_to_other("/storage/manifest"),
        ]),
    );
    fake.route(
        "/storage/manifest",
        Behavior::manifest(OCI_MANIFEST, manifest),
    );
    fake.route(
        &format!("/v2/repo/app/blobs/{config_digest}"),
        Behavior::redirect_to_other("/storage/config"),
    );
    fake.route("/storage/config", Behavior::body(200, OCI_CONFIG, config));
    let resolver = Resolver::new(
        Config {
            insecure_registries: vec![fake.host(), fake.other_host()],
            request_timeout: Duration::from_secs(2),
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &prometheus::Registry::new(),
    )
    .unwrap();
    let resolved = resolver
        .resolve(&format!("{}/repo/app:1", fake.host()), &candidates)
        .await
        .unwrap();
    assert_eq!(resolved.platforms[0].architecture, "riscv64");

    let requests = fake.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.listener == Listener::Main && r.has_authorization()),
        "the registry got the cloud credential"
    );
    let redirected: Vec<_> = requests
        .iter()
        .filter(|r| r.listener == Listener::Other)
        .collect();
    assert_eq!(redirected.len(), 2, "{redirected:?}");
    for request in redirected {
        assert!(!request.has_authorization(), "{request:?}");
        let carried = request
            .headers
            .values()
            .any(|value| String::from_utf8_lossy(value.as_bytes()).contains("ya29"))
            || request.query.as_deref().is_some_and(|q| q.contains("ya29"));
        assert!(!carried, "the token went along: {request:?}");
    }
}
