//! The cloud identity as a source of the credential chain: first for its own cloud's
//! registries, absent for every other host (a GCE metadata server scripted on a loopback fake).

use std::sync::Arc;
use std::time::Duration;

use noe_cloud::{CloudCredentials, Config, Env, Metrics, Provider};
use noe_credentials::{Credential, Sources};
use noe_test_support::{Behavior, FakeRegistry};

#[tokio::test]
async fn cloud_credential_leads_for_its_hosts_only() -> anyhow::Result<()> {
    let metadata = FakeRegistry::start().await?;
    metadata.route(
        noe_cloud::gcp::TOKEN_PATH,
        Behavior::Respond {
            status: 200,
            headers: vec![
                ("Metadata-Flavor".into(), "Google".into()),
                ("Content-Type".into(), "application/json".into()),
            ],
            body: r#"{"access_token":"ya29.noe","expires_in":3599,"token_type":"Bearer"}"#.into(),
        },
    );
    let config = Config {
        providers: vec![Provider::Gcp],
        env: Env::from_pairs([("GCE_METADATA_HOST", metadata.host())]),
        timeout: Duration::from_secs(5),
        clock: noe_core::clock::Clock::system(),
    };
    let client = noe_cloud::http_client(None)?;
    let cloud = CloudCredentials::new(config, client, Metrics::new(None)?)?;
    let sources = Sources::none().with_cloud(Arc::new(cloud));

    let found = sources
        .candidates("europe-docker.pkg.dev/project/repo/app:1")
        .await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        found[0].source,
        "cloud:gcp via the pod's service account, metadata server token"
    );
    assert!(
        found[0].expires.is_some(),
        "a cloud token says when it is refreshed"
    );
    assert_eq!(
        found[0].credential,
        Credential::Basic {
            username: "oauth2accesstoken".into(),
            password: "ya29.noe".into(),
        }
    );
    for image in [
        "docker.io/library/nginx:latest",
        "ghcr.io/org/app:1",
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/app:1",
        "gcr.io.evil.example/app:1",
    ] {
        assert!(sources.candidates(image).await.is_empty(), "{image}");
    }
    assert_eq!(metadata.request_count(), 1, "one token, asked once");
    Ok(())
}
