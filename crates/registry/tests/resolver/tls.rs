//! HTTPS registries: trusted through `extra_ca_pem`, refused otherwise.

use noe_registry::{Config, Error};
use noe_test_support::{push_standard_fixtures, Registry, TestCa};

use super::support::{platforms, resolver_with, sorted};

#[tokio::test]
async fn tls_registry_trusted_through_the_extra_ca() {
    let ca = TestCa::new().unwrap();
    let registry = Registry::builder().tls(&ca).start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();

    let trusting = resolver_with(Config {
        extra_ca_pem: Some(ca.cert_pem().into_bytes()),
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    });
    for fixture in [&fixtures.oci_index, &fixtures.docker_single] {
        let resolution = trusting.resolve(&fixture.reference(), &[]).await.unwrap();
        assert_eq!(platforms(&resolution), sorted(&fixture.platforms));
    }

    let untrusting = resolver_with(Config {
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    });
    let error = untrusting
        .resolve(&fixtures.oci_index.reference(), &[])
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Transport { .. }), "{error:?}");
    assert!(error.to_string().contains(&registry.host()), "{error}");
}

#[tokio::test]
async fn tls_registry_with_htpasswd_gets_credentials_over_https() {
    let ca = TestCa::new().unwrap();
    let registry = Registry::builder()
        .htpasswd("alice", "s3cret")
        .tls(&ca)
        .start()
        .await
        .unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let resolver = resolver_with(Config {
        extra_ca_pem: Some(ca.cert_pem().into_bytes()),
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    });
    let candidate = noe_credentials::CredentialCandidate::new(
        "secret",
        noe_credentials::Credential::Basic {
            username: "alice".into(),
            password: "s3cret".into(),
        },
    );
    let resolution = resolver
        .resolve(&fixtures.docker_list.reference(), &[candidate])
        .await
        .unwrap();
    assert_eq!(
        platforms(&resolution),
        sorted(&fixtures.docker_list.platforms)
    );
}
