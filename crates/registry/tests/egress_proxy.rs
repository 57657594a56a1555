//! Registries reached through an HTTPS proxy (`HTTPS_PROXY`, corporate egress): the proxy
//! resolves the names it is given itself, so the resolver resolves and checks each name before
//! handing it over. Its own test binary: the proxy is configured through the process
//! environment, which every resolver built in the process reads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use noe_registry::manifest::{OCI_INDEX, OCI_MANIFEST};
use noe_registry::{Config, Error, Resolver};
use noe_test_support::{sha256_digest, Behavior, ConnectProxy, FakeRegistry, TestCa};
use serde_json::json;

#[tokio::test]
async fn names_are_resolved_and_checked_before_they_go_to_the_proxy() {
    let ca = TestCa::new().unwrap();
    let fake = FakeRegistry::start_tls(&ca).await.unwrap();
    let index = json!({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [{"mediaType": OCI_MANIFEST, "digest": sha256_digest(b"x"), "size": 1,
                       "platform": {"os": "linux", "architecture": "riscv64"}}],
    });
    fake.route(
        "/v2/app/manifests/1",
        Behavior::manifest(OCI_INDEX, index.to_string()),
    );
    let port = fake.host().rsplit_once(':').unwrap().1.to_owned();
    let proxy = ConnectProxy::start().await.unwrap();
    for name in [
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
        "https_proxy",
        "NO_PROXY",
        "no_proxy",
    ] {
        std::env::remove_var(name);
    }
    std::env::set_var("HTTPS_PROXY", proxy.url());
    let config = Config {
        extra_ca_pem: Some(ca.cert_pem().into_bytes()),
        request_timeout: Duration::from_secs(5),
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    };
    let resolver = Resolver::new(config, &prometheus::Registry::new()).unwrap();

    // Proxy support is kept: `localhost` resolves here to loopback, then goes to the proxy.
    let resolution = resolver
        .resolve(&format!("localhost:{port}/app:1"), &[])
        .await
        .unwrap();
    assert_eq!(resolution.platforms[0].architecture, "riscv64");
    assert_eq!(proxy.targets(), [format!("localhost:{port}")]);

    // A name that does not resolve here (the proxy would reach it: `CONNECT meta.test:443`
    // where meta.test is 169.254.169.254 for the proxy) is refused before the proxy sees it.
    let error = resolver
        .resolve(&format!("meta.test:{port}/app:1"), &[])
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::Unresolvable { host } if host == "meta.test"),
        "{error:?}"
    );
    assert_eq!(error.kind(), "unresolvable");

    // Metadata addresses, IPv4 or carried in IPv6 (NAT64), never reach the proxy either.
    for host in [
        format!("169.254.169.254:{port}"),
        format!("[64:ff9b::a9fe:a9fe]:{port}"),
    ] {
        let error = resolver
            .resolve(&format!("{host}/app:1"), &[])
            .await
            .unwrap_err();
        assert!(matches!(error, Error::Blocked { .. }), "{host}: {error:?}");
    }
    assert_eq!(
        proxy.targets(),
        [format!("localhost:{port}")],
        "only the checked name went to the proxy"
    );
}
