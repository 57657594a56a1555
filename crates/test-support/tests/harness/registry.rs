use noe_test_support::media_types::*;
use noe_test_support::{push_standard_fixtures, Fixture, PushAuth, Registry, TestCa};

async fn get_manifest(registry: &Registry, fixture: &Fixture, accept: &str) -> reqwest::Response {
    registry
        .http_client()
        .unwrap()
        .get(format!(
            "{}/v2/{}/manifests/{}",
            registry.base_url(),
            fixture.repository,
            fixture.tag
        ))
        .header("accept", accept)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn plain_registry_serves_every_fixture_with_its_media_type() {
    let registry = Registry::start().await.unwrap();
    assert!(registry.host().starts_with("127.0.0.1:"));
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    for fixture in fixtures.all() {
        let response = get_manifest(&registry, fixture, ACCEPT_ALL).await;
        assert_eq!(response.status(), 200, "{}", fixture.reference());
        let content_type = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_owned();
        assert_eq!(content_type, fixture.media_type, "{}", fixture.reference());
        let digest = response.headers()["docker-content-digest"]
            .to_str()
            .unwrap()
            .to_owned();
        assert_eq!(digest, fixture.digest);
        let body = response.bytes().await.unwrap();
        assert_eq!(noe_test_support::sha256_digest(&body), fixture.digest);
    }
    assert_eq!(
        fixtures.oci_index.platforms,
        ["linux/amd64", "linux/arm64", "linux/arm/v7"]
    );
    assert_eq!(
        fixtures.nested_index.architectures(),
        ["amd64", "arm64", "ppc64le"]
    );
}

#[tokio::test]
async fn fixture_contents_match_their_description() {
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let client = registry.http_client().unwrap();

    // The OCI index lists three platforms and an attestation.
    let index: serde_json::Value = get_manifest(&registry, &fixtures.oci_index, ACCEPT_ALL)
        .await
        .json()
        .await
        .unwrap();
    let entries = index["manifests"].as_array().unwrap();
    assert_eq!(entries.len(), 4);
    assert_eq!(entries[2]["platform"]["variant"], "v7");
    assert_eq!(entries[3]["platform"]["os"], "unknown");
    assert_eq!(
        entries[3]["annotations"]["vnd.docker.reference.type"],
        "attestation-manifest"
    );

    // Single-arch fixtures: the config blob names the platform.
    for (fixture, os, arch) in [
        (&fixtures.oci_single, "linux", "arm64"),
        (&fixtures.docker_single, "linux", "s390x"),
    ] {
        let config_digest = fixture.config_digest.as_ref().unwrap();
        let config: serde_json::Value = client
            .get(format!(
                "{}/v2/{}/blobs/{config_digest}",
                registry.base_url(),
                fixture.repository
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(config["os"], os);
        assert_eq!(config["architecture"], arch);
    }

    // The nested index's first entry is an index; the platform-less entry really has none.
    let nested: serde_json::Value = get_manifest(&registry, &fixtures.nested_index, ACCEPT_ALL)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(nested["manifests"][0]["mediaType"], OCI_INDEX);
    let no_platform: serde_json::Value =
        get_manifest(&registry, &fixtures.index_without_platform, ACCEPT_ALL)
            .await
            .json()
            .await
            .unwrap();
    assert!(no_platform["manifests"][1].get("platform").is_none());
    let windows: serde_json::Value = get_manifest(&registry, &fixtures.windows_index, ACCEPT_ALL)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(windows["manifests"][0]["platform"]["os"], "windows");
}

#[tokio::test]
async fn registry_quirks_the_client_must_handle() {
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    // An OCI index requested without the OCI type: 404.
    let response = get_manifest(&registry, &fixtures.oci_index, DOCKER_MANIFEST).await;
    assert_eq!(response.status(), 404);
    // A Docker list requested without Accept: converted to schema 1 (or refused), never the list.
    let response = get_manifest(&registry, &fixtures.docker_list, "*/*").await;
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    assert_ne!(content_type.as_deref(), Some(DOCKER_LIST));
}

#[tokio::test]
async fn access_log_counts_requests_and_resets() {
    let registry = Registry::start().await.unwrap();
    assert_eq!(
        registry.request_count(),
        0,
        "the readiness probe is not counted"
    );
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    assert!(registry.request_count() > 10);
    registry.reset_requests();
    assert_eq!(registry.request_count(), 0);

    let response = get_manifest(&registry, &fixtures.oci_index, ACCEPT_ALL).await;
    assert_eq!(response.status(), 200);
    let requests = registry.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].method, "GET");
    assert_eq!(requests[0].path, "/v2/fixtures/oci-index/manifests/v1");
    assert_eq!(requests[0].status, 200);
    assert!(requests[0].is_manifest());
    assert!(registry.all_requests().len() > 10);
}

#[tokio::test]
async fn htpasswd_registry_accepts_the_right_password_only() {
    let registry = Registry::builder()
        .htpasswd("alice", "s3cret")
        .start()
        .await
        .unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let client = registry.http_client().unwrap();
    let url = format!(
        "{}/v2/{}/manifests/v1",
        registry.base_url(),
        fixtures.oci_single.repository
    );

    let anonymous = client
        .get(&url)
        .header("accept", ACCEPT_ALL)
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let challenge = anonymous.headers()["www-authenticate"].to_str().unwrap();
    assert!(challenge.starts_with("Basic realm="), "{challenge}");

    let wrong = client
        .get(&url)
        .basic_auth("alice", Some("wrong"))
        .header("accept", ACCEPT_ALL)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);

    let right = client
        .get(&url)
        .basic_auth("alice", Some("s3cret"))
        .header("accept", ACCEPT_ALL)
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 200);

    // Pushing anonymously is refused.
    let anonymous_pusher = registry.pusher().unwrap().with_auth(PushAuth::Anonymous);
    assert!(anonymous_pusher.push_blob("x/y", b"data").await.is_err());
}

#[tokio::test]
async fn tls_registry_is_trusted_through_the_test_ca_only() {
    let ca = TestCa::new().unwrap();
    let registry = Registry::builder().tls(&ca).start().await.unwrap();
    assert!(registry.base_url().starts_with("https://127.0.0.1:"));
    assert_eq!(registry.ca_pem(), Some(ca.cert_pem()));
    let ca_file = registry.ca_file().unwrap();
    assert_eq!(std::fs::read_to_string(ca_file).unwrap(), ca.cert_pem());
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let response = get_manifest(&registry, &fixtures.docker_list, ACCEPT_ALL).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], DOCKER_LIST);
    // reqwest speaks HTTP/2 here; the access log parser handles it.
    assert_eq!(response.version(), reqwest::Version::HTTP_2);
    let requests = registry.requests();
    assert_eq!(
        requests.last().map(|r| r.summary()),
        Some("GET /v2/fixtures/docker-list/manifests/v1 200".to_owned())
    );

    // A client trusting another CA fails the handshake.
    let other = TestCa::with_name("another CA").unwrap();
    let untrusting = reqwest::Client::builder()
        .no_proxy()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(other.cert_pem().as_bytes()).unwrap())
        .build()
        .unwrap();
    let error = untrusting
        .get(format!("{}/v2/", registry.base_url()))
        .send()
        .await
        .unwrap_err();
    assert!(error.is_connect(), "{error:?}");
}

#[tokio::test]
async fn mtls_registry_answers_only_clients_with_a_certificate_of_its_client_ca() {
    let ca = TestCa::new().unwrap();
    let client_ca = TestCa::with_name("client CA").unwrap();
    let registry = Registry::builder()
        .tls(&ca)
        .require_client_cert(&client_ca)
        .start()
        .await
        .unwrap();
    // The harness's own client presents the admin certificate: pushing works.
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let response = get_manifest(&registry, &fixtures.oci_index, ACCEPT_ALL).await;
    assert_eq!(response.status(), 200);

    let url = format!("{}/v2/", registry.base_url());
    let client = |identity: Option<String>| {
        let mut builder = reqwest::Client::builder()
            .no_proxy()
            .tls_built_in_root_certs(false)
            .add_root_certificate(
                reqwest::Certificate::from_pem(ca.cert_pem().as_bytes()).unwrap(),
            );
        if let Some(pem) = identity {
            builder = builder.identity(reqwest::Identity::from_pem(pem.as_bytes()).unwrap());
        }
        builder.build().unwrap()
    };
    // Without a certificate, or with one of another CA: refused.
    assert!(client(None).get(&url).send().await.is_err());
    let stranger = TestCa::with_name("stranger")
        .unwrap()
        .client_cert("x")
        .unwrap();
    let identity = format!("{}{}", stranger.cert_pem, stranger.key_pem);
    assert!(client(Some(identity)).get(&url).send().await.is_err());
    // With one of the client CA: answered.
    let good = client_ca.client_cert("noe").unwrap();
    let identity = format!("{}{}", good.cert_pem, good.key_pem);
    let response = client(Some(identity)).get(&url).send().await.unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn dropping_the_registry_stops_it_and_removes_its_dir() {
    let registry = Registry::start().await.unwrap();
    let dir = registry.dir().to_owned();
    let addr = registry.host();
    let proc_dir = format!("/proc/{}", registry.pid());
    assert!(dir.join("config.yml").exists());
    assert!(std::path::Path::new(&proc_dir).exists());
    drop(registry);
    assert!(!dir.exists());
    assert!(std::net::TcpStream::connect(addr).is_err());
    assert!(
        !std::path::Path::new(&proc_dir).exists(),
        "registry process reaped"
    );
}

#[tokio::test]
async fn a_paused_registry_accepts_connections_but_never_answers() {
    let registry = Registry::start().await.unwrap();
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(std::time::Duration::from_millis(500))
        .build()
        .unwrap();
    let url = format!("{}/v2/", registry.base_url());
    registry.pause().unwrap();
    let error = client.get(&url).send().await.unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
    registry.resume().unwrap();
    let response = client.get(&url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    registry.pause().unwrap(); // dropping a paused registry still stops it
}

#[tokio::test]
async fn access_log_counts_every_one_of_many_concurrent_requests() {
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    registry.reset_requests();
    let client = registry.http_client().unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..100 {
        let request = client
            .get(format!(
                "{}/v2/{}/manifests/v1",
                registry.base_url(),
                fixtures.docker_list.repository
            ))
            .header("accept", ACCEPT_ALL);
        tasks.spawn(async move { request.send().await.unwrap().status().as_u16() });
    }
    while let Some(status) = tasks.join_next().await {
        assert_eq!(status.unwrap(), 200);
    }
    let requests = registry.requests();
    assert_eq!(requests.len(), 100);
    assert!(requests.iter().all(|r| r.is_manifest() && r.status == 200));
}
