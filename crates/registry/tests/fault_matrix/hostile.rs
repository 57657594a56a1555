//! The hostile registry, one test per defect: an absurd `Retry-After`, a challenge
//! from a host the registry redirected to, an HTTPS to HTTP redirect, nested fan-out, repeated
//! children, an overlong token. The matrix in `fault_matrix.rs` has a row for each too.

use std::time::Duration;

use noe_credentials::{Credential, CredentialCandidate};
use noe_registry::manifest::{OCI_CONFIG, OCI_INDEX, OCI_MANIFEST};
use noe_registry::resolver::{MAX_CONCURRENT_FETCHES, MAX_REQUESTS_PER_LOOKUP};
use noe_registry::{Config, Error, Resolver};
use noe_test_support::{sha256_digest, Behavior, FakeRegistry, Listener, TestCa};
use serde_json::json;

use crate::{index_body, Harness, TIMEOUT};

/// Defect 1: a 503 with `Retry-After: 18446744073709551615` (u64::MAX seconds) after a response
/// that took more than a second overflowed `elapsed + wait` and panicked the lookup. The wait is
/// compared with what is left of the request's budget: no retry, a clean `http_status` error.
#[tokio::test]
async fn an_absurd_retry_after_after_a_slow_response_is_not_waited_for() {
    let mut h = Harness::start().await;
    let fake = h.fake.host();
    h.fake.route(
        "/v2/absurd/app/manifests/1",
        Behavior::retry_after(503, "18446744073709551615").delayed(Duration::from_millis(1100)),
    );
    let error = h
        .resolver
        .resolve(&format!("{fake}/absurd/app:1"), &[])
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::Status { status: 503, .. }),
        "{error:?}"
    );
    assert_eq!(h.fake.requests_to("/v2/absurd/app/manifests/1").len(), 1);
    h.assert_healthy("absurd Retry-After").await;
}

/// Defect 2: registry R redirects a manifest GET to host H, and H answers 401 with its own
/// Bearer realm. That challenge is H's: R's credentials never go to H's realm, nothing is
/// remembered under R, and a later repository on R gets R's own challenge answered.
#[tokio::test]
async fn a_challenge_from_a_host_the_registry_redirected_to_is_not_the_registry_s() {
    let mut h = Harness::start().await;
    let fake = h.fake.host();
    let realm = h.fake.script_foreign_challenge("moved/app", "1");
    h.fake.route(
        "/v2/later/app/manifests/1",
        Behavior::Sequence(vec![
            Behavior::basic_challenge("fake"),
            Behavior::manifest(OCI_INDEX, index_body("mips64le")),
        ]),
    );
    let credentials = [CredentialCandidate::new(
        "test",
        Credential::Basic {
            username: "user".into(),
            password: "secret".into(),
        },
    )];
    let error = h
        .resolver
        .resolve(&format!("{fake}/moved/app:1"), &credentials)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::RedirectedChallenge { host, .. } if *host == h.fake.other_host()),
        "{error:?}"
    );
    assert_eq!(error.kind(), "redirected_challenge");
    let later = h
        .resolver
        .resolve(&format!("{fake}/later/app:1"), &credentials)
        .await
        .unwrap();
    assert_eq!(later.platforms[0].architecture, "mips64le");
    assert!(
        h.fake.requests_to(&realm).is_empty(),
        "the foreign realm was asked for a token"
    );
    let sent_elsewhere: Vec<_> = h
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.listener == Listener::Other && r.has_authorization())
        .collect();
    assert!(sent_elsewhere.is_empty(), "{sent_elsewhere:?}");
    let later = h.fake.requests_to("/v2/later/app/manifests/1");
    assert_eq!(later.len(), 2, "R's own Basic challenge, then Basic");
    assert!(later[1]
        .header("authorization")
        .is_some_and(|a| a.starts_with("Basic ")));
    h.assert_healthy("redirected challenge").await;
}

/// Defect 7: an HTTPS registry's redirect to plain `http://` is refused (a tag has no digest
/// to check the content against), unless the target is an insecure registry.
#[tokio::test]
async fn an_https_redirect_to_plain_http_is_refused_unless_the_target_is_insecure() {
    let ca = TestCa::new().unwrap();
    let secure = FakeRegistry::start_tls(&ca).await.unwrap();
    let plain = FakeRegistry::start().await.unwrap();
    secure.route(
        "/v2/app/manifests/1",
        Behavior::redirect(&format!("{}/v2/app/manifests/1", plain.base_url())),
    );
    plain.route(
        "/v2/app/manifests/1",
        Behavior::manifest(OCI_INDEX, index_body("loong64")),
    );
    let image = format!("{}/app:1", secure.host());
    let resolver = |insecure: Vec<String>| {
        let config = Config {
            insecure_registries: insecure,
            extra_ca_pem: Some(ca.cert_pem().into_bytes()),
            request_timeout: TIMEOUT,
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        };
        Resolver::new(config, &prometheus::Registry::new()).unwrap()
    };

    let error = resolver(Vec::new()).resolve(&image, &[]).await.unwrap_err();
    assert!(
        matches!(&error, Error::InsecureRedirect { target, .. } if *target == plain.host()),
        "{error:?}"
    );
    assert_eq!(
        plain.request_count(),
        0,
        "the plain HTTP target was contacted"
    );

    let resolution = resolver(vec![plain.host()])
        .resolve(&image, &[])
        .await
        .unwrap();
    assert_eq!(resolution.platforms[0].architecture, "loong64");
    assert_eq!(plain.request_count(), 1);
}

/// Defect 5: nested indexes whose entries lack platforms (8 per level, 4 levels) cost a naive
/// client thousands of requests for one image. A lookup sends at most
/// `MAX_REQUESTS_PER_LOOKUP` requests, counted across nesting, and a level that would exceed
/// them fails before it is sent.
#[tokio::test]
async fn a_nested_fan_out_costs_a_bounded_number_of_requests() {
    let mut h = Harness::start().await;
    let fake = h.fake.host();
    let fan_out = h.fake.script_fan_out("fan/app", "1", 8, 4);
    assert_eq!(fan_out.indexes, 1 + 8 + 64 + 512 + 4096);
    h.fake.reset_requests();
    let error = h
        .resolver
        .resolve(&format!("{fake}/fan/app:1"), &[])
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::RequestBudget {
                limit: MAX_REQUESTS_PER_LOOKUP,
                ..
            }
        ),
        "{error:?}"
    );
    // The top index and its 8 children; the 64 grandchildren were never asked for.
    assert_eq!(h.fake.request_count(), 1 + 8);
    assert!(
        h.fake.max_in_flight() <= 4,
        "{} at once",
        h.fake.max_in_flight()
    );
    h.assert_healthy("fan-out").await;
}

/// Defect 5: entries naming the same child digest are fetched once, manifests sharing a config
/// blob fetch it once, and a lookup fetches at most `MAX_CONCURRENT_FETCHES` at a time.
#[tokio::test]
async fn identical_children_are_fetched_once_and_a_few_at_a_time() {
    let mut h = Harness::start().await;
    let fake = h.fake.host();
    let mut entries = Vec::new();
    for (arch, seeds) in [("arm64", 0..3), ("riscv64", 3..6)] {
        let config = serde_json::to_vec(&json!({"os": "linux", "architecture": arch})).unwrap();
        let config_digest = h.fake.script_blob("dedupe/app", &config);
        for seed in seeds {
            let manifest = serde_json::to_vec(&json!({
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": config.len()},
                "layers": [],
                "annotations": {"seed": seed.to_string()},
            }))
            .unwrap();
            let digest = sha256_digest(&manifest);
            h.fake.route(
                &format!("/v2/dedupe/app/manifests/{digest}"),
                Behavior::manifest(OCI_MANIFEST, manifest).delayed(Duration::from_millis(200)),
            );
            // Each listed twice, without a platform.
            for _ in 0..2 {
                entries.push(json!({"mediaType": OCI_MANIFEST, "digest": digest, "size": 1}));
            }
        }
    }
    h.fake.route(
        "/v2/dedupe/app/manifests/1",
        Behavior::manifest(
            OCI_INDEX,
            serde_json::to_vec(
                &json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}),
            )
            .unwrap(),
        ),
    );
    h.fake.reset_requests();
    let resolution = h
        .resolver
        .resolve(&format!("{fake}/dedupe/app:1"), &[])
        .await
        .unwrap();
    let archs: Vec<_> = resolution
        .platforms
        .iter()
        .map(|p| p.architecture.as_str())
        .collect();
    assert_eq!(archs, ["arm64", "riscv64"]);
    // The index, 6 distinct manifests, 2 distinct configs.
    assert_eq!(h.fake.request_count(), 1 + 6 + 2);
    let at_once = h.fake.max_in_flight();
    assert!(
        (2..=MAX_CONCURRENT_FETCHES).contains(&at_once),
        "{at_once} requests at once"
    );
    h.assert_healthy("dedupe").await;
}

/// A token realm answering a token longer than any registry accepts (or a 4 MiB one) does not
/// get it cached: the lookup fails with invalid content, quoting nothing of it.
#[tokio::test]
async fn an_overlong_token_is_refused() {
    let fake = FakeRegistry::start().await.unwrap();
    fake.route(
        "/v2/app/manifests/1",
        Behavior::bearer_challenge(&format!("{}/token", fake.base_url()), "fake"),
    );
    let token = "t".repeat(20 * 1024);
    fake.route(
        "/token",
        Behavior::json(200, &json!({"token": token, "expires_in": u64::MAX})),
    );
    let config = Config {
        insecure_registries: vec![fake.host()],
        request_timeout: TIMEOUT,
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    };
    let resolver = Resolver::new(config, &prometheus::Registry::new()).unwrap();
    let error = resolver
        .resolve(&format!("{}/app:1", fake.host()), &[])
        .await
        .unwrap_err();
    assert!(
        matches!(
            &error,
            Error::InvalidContent {
                what: "token realm",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(!error.to_string().contains("ttttttttttt"), "{error}");
    // The manifest was asked once (the probe): no request carried the token.
    assert!(fake
        .requests_to("/v2/app/manifests/1")
        .iter()
        .all(|r| !r.has_authorization()));
}
