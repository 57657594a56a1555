use std::time::{Duration, Instant};

use noe_test_support::media_types::OCI_INDEX;
use noe_test_support::{sha256_digest, Behavior, FakeRegistry, Listener, TestCa};

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[tokio::test]
async fn unscripted_paths_answer_like_an_empty_registry() {
    let fake = FakeRegistry::start().await.unwrap();
    let client = client();
    let v2 = client
        .get(format!("{}/v2/", fake.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(v2.status(), 200);
    let missing = client
        .get(format!("{}/v2/a/manifests/1", fake.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let body: serde_json::Value = missing.json().await.unwrap();
    assert_eq!(body["errors"][0]["code"], "NAME_UNKNOWN");
    assert_eq!(fake.request_count(), 2);
    fake.reset_requests();
    assert_eq!(fake.request_count(), 0);
}

#[tokio::test]
async fn scripted_statuses_bodies_and_headers() {
    let fake = FakeRegistry::start().await.unwrap();
    let manifest = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#;
    fake.route(
        "/v2/ok/manifests/1",
        Behavior::manifest(OCI_INDEX, &manifest[..]),
    );
    fake.route(
        "/v2/lying/manifests/1",
        Behavior::manifest_with_digest(OCI_INDEX, &manifest[..], &sha256_digest(b"other")),
    );
    fake.route("/v2/busy/manifests/1", Behavior::too_many_requests(7));
    fake.route("/v2/broken/manifests/1", Behavior::status(500));
    fake.route("/v2/garbage/manifests/1", Behavior::invalid_json());
    fake.route(
        "/v2/private/manifests/1",
        Behavior::bearer_challenge("https://auth.example/token", "registry.example"),
    );
    fake.route("/v2/basic/manifests/1", Behavior::basic_challenge("r"));
    let client = client();
    let get = |repo: &str| {
        client
            .get(format!("{}/v2/{repo}/manifests/1", fake.base_url()))
            .send()
    };

    let ok = get("ok").await.unwrap();
    assert_eq!(ok.headers()["content-type"], OCI_INDEX);
    assert_eq!(
        ok.headers()["docker-content-digest"].to_str().unwrap(),
        sha256_digest(manifest)
    );
    assert_eq!(ok.bytes().await.unwrap().as_ref(), manifest);

    let lying = get("lying").await.unwrap();
    let digest = lying.headers()["docker-content-digest"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_ne!(digest, sha256_digest(&lying.bytes().await.unwrap()));

    let busy = get("busy").await.unwrap();
    assert_eq!(busy.status(), 429);
    assert_eq!(busy.headers()["retry-after"], "7");
    assert_eq!(get("broken").await.unwrap().status(), 500);
    let garbage = get("garbage").await.unwrap();
    assert!(serde_json::from_slice::<serde_json::Value>(&garbage.bytes().await.unwrap()).is_err());
    let private = get("private").await.unwrap();
    assert_eq!(private.status(), 401);
    assert_eq!(
        private.headers()["www-authenticate"],
        r#"Bearer realm="https://auth.example/token",service="registry.example""#
    );
    assert_eq!(
        get("basic").await.unwrap().headers()["www-authenticate"],
        r#"Basic realm="r""#
    );
}

#[tokio::test]
async fn sequences_answer_in_order_then_repeat_the_last() {
    let fake = FakeRegistry::start().await.unwrap();
    fake.route(
        "/v2/flaky/manifests/1",
        Behavior::Sequence(vec![
            Behavior::too_many_requests(1),
            Behavior::status(503),
            Behavior::status(200),
        ]),
    );
    let client = client();
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let response = client
            .get(format!("{}/v2/flaky/manifests/1", fake.base_url()))
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    assert_eq!(statuses, [429, 503, 200, 200]);
}

#[tokio::test]
async fn hang_never_answers_and_trickle_is_slow() {
    let fake = FakeRegistry::start().await.unwrap();
    fake.route("/v2/hang/manifests/1", Behavior::Hang);
    fake.route(
        "/v2/slow/manifests/1",
        Behavior::trickle("application/json", "{\"a\":1}", Duration::from_millis(100)),
    );
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let error = client
        .get(format!("{}/v2/hang/manifests/1", fake.base_url()))
        .send()
        .await
        .unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
    // Headers arrive at once, the 7-byte body takes ~600 ms: the body read times out.
    let started = Instant::now();
    let response = client
        .get(format!("{}/v2/slow/manifests/1", fake.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.bytes().await.unwrap_err().is_timeout());
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(fake.request_count(), 2);
}

#[tokio::test]
async fn oversized_bodies_stream_without_end_until_their_length() {
    let fake = FakeRegistry::start().await.unwrap();
    let len = 100 * 1024 * 1024;
    fake.route(
        "/v2/big/manifests/1",
        Behavior::oversized(OCI_INDEX, len, true),
    );
    fake.route(
        "/v2/chunked/manifests/1",
        Behavior::oversized(OCI_INDEX, len, false),
    );
    let client = client();

    let big = client
        .get(format!("{}/v2/big/manifests/1", fake.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(big.content_length(), Some(len));
    drop(big);

    // Read a bounded prefix of the chunked one, as a capped client would, then give up.
    let mut chunked = client
        .get(format!("{}/v2/chunked/manifests/1", fake.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(chunked.content_length(), None);
    let mut read = 0usize;
    while let Some(chunk) = chunked.chunk().await.unwrap() {
        read += chunk.len();
        if read > 4 * 1024 * 1024 {
            break;
        }
    }
    assert!(read > 4 * 1024 * 1024);
}

#[tokio::test]
async fn redirects_go_to_the_other_host_which_records_authorization() {
    let fake = FakeRegistry::start().await.unwrap();
    assert_ne!(fake.host(), fake.other_host());
    fake.route(
        "/v2/app/blobs/sha256:abc",
        Behavior::redirect_to_other("/storage/abc"),
    );
    fake.route(
        "/storage/abc",
        Behavior::body(200, "application/octet-stream", "blob"),
    );
    let client = client();
    let redirect = client
        .get(format!("{}/v2/app/blobs/sha256:abc", fake.base_url()))
        .bearer_auth("secret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(redirect.status(), 307);
    let location = redirect.headers()["location"].to_str().unwrap().to_owned();
    assert_eq!(location, format!("{}/storage/abc", fake.other_base_url()));
    // A correct client follows without the header.
    let blob = client.get(&location).send().await.unwrap();
    assert_eq!(blob.text().await.unwrap(), "blob");
    // A leaky one sends it along.
    client
        .get(&location)
        .bearer_auth("secret-token")
        .send()
        .await
        .unwrap();

    let first = &fake.requests_to("/v2/app/blobs/sha256:abc")[0];
    assert_eq!(first.listener, Listener::Main);
    assert!(first.has_authorization());
    let storage = fake.requests_to("/storage/abc");
    assert_eq!(storage.len(), 2);
    assert!(storage.iter().all(|r| r.listener == Listener::Other));
    assert!(!storage[0].has_authorization());
    assert_eq!(
        storage[1].header("authorization"),
        Some("Bearer secret-token")
    );
}

#[tokio::test]
async fn tls_fake_is_trusted_through_the_ca() {
    let ca = TestCa::new().unwrap();
    let fake = FakeRegistry::start_tls(&ca).await.unwrap();
    assert!(fake.base_url().starts_with("https://"));
    let client = reqwest::Client::builder()
        .no_proxy()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.cert_pem().as_bytes()).unwrap())
        .build()
        .unwrap();
    for base in [fake.base_url(), fake.other_base_url()] {
        let response = client.get(format!("{base}/v2/")).send().await.unwrap();
        assert_eq!(response.status(), 200);
    }
}

#[tokio::test]
async fn scripted_images_serve_manifest_by_tag_and_digest_and_the_config_blob() {
    use noe_test_support::{blob_path, build_image, manifest_path, Flavor};

    let fake = FakeRegistry::start().await.unwrap();
    let image = build_image("seed", "linux/arm/v7", Flavor::Docker).unwrap();
    fake.script_image("team/app", "1.0", &image);
    let client = client();
    for reference in ["1.0", image.descriptor.digest.as_str()] {
        let response = client
            .get(format!(
                "{}{}",
                fake.base_url(),
                manifest_path("team/app", reference)
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["content-type"],
            image.descriptor.media_type
        );
        assert_eq!(response.bytes().await.unwrap(), image.manifest);
    }
    let config_digest = image.descriptor.config_digest.as_deref().unwrap();
    let config: serde_json::Value = client
        .get(format!(
            "{}{}",
            fake.base_url(),
            blob_path("team/app", config_digest)
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (
            config["os"].as_str(),
            config["architecture"].as_str(),
            config["variant"].as_str()
        ),
        (Some("linux"), Some("arm"), Some("v7"))
    );
}
