//! Where a registry may be: loopback, unspecified and this host's own addresses are refused as
//! registry targets, tag and token realm and redirect alike, unless `allow_cidrs` lists them;
//! and what a caller learns of a registry it cannot reach is `unreachable`, the same for a port
//! that refuses and one that never answers (the difference is a port probe).

use std::net::IpAddr;
use std::time::Duration;

use noe_registry::manifest::OCI_INDEX;
use noe_registry::{Config, Error, Resolver};
use noe_test_support::{closed_port, Behavior, FakeRegistry, UnansweredPort};

use crate::index_body;

fn resolver(allow: Vec<ipnet::IpNet>, insecure: Vec<String>) -> Resolver {
    Resolver::new(
        Config {
            insecure_registries: insecure,
            request_timeout: Duration::from_secs(1),
            allow_cidrs: allow,
            ..Config::default()
        },
        &prometheus::Registry::new(),
    )
    .unwrap()
}

fn blocked(error: &Error) -> Option<IpAddr> {
    match error {
        Error::Blocked { address, .. } => Some(*address),
        _ => None,
    }
}

/// With the default configuration a registry on loopback (by address or by name), on the
/// unspecified address, or on this host's own address is refused before any connection: the
/// registry there never sees a request.
#[tokio::test]
async fn loopback_unspecified_and_own_addresses_are_refused_by_default() {
    let fake = FakeRegistry::start().await.unwrap();
    fake.route(
        "/v2/app/manifests/1",
        Behavior::manifest(OCI_INDEX, index_body("arm64")),
    );
    let port = fake.host().rsplit_once(':').unwrap().1.to_owned();
    let mut hosts = vec![
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        format!("0.0.0.0:{port}"),
        format!("[::]:{port}"),
        format!("127.1.2.3:{port}"),
    ];
    // This host's own address on its route outwards (TEST-NET-3; no packet is sent), when it
    // has one: where noe's listeners and any sidecar listening on all interfaces are.
    if let Ok(own) = std::net::UdpSocket::bind("0.0.0.0:0").and_then(|socket| {
        socket.connect("203.0.113.7:9")?;
        socket.local_addr()
    }) {
        hosts.push(format!("{}:{port}", own.ip()));
    }
    let default = resolver(Vec::new(), hosts.clone());
    for host in &hosts {
        let error = default
            .resolve(&format!("{host}/app:1"), &[])
            .await
            .unwrap_err();
        assert!(blocked(&error).is_some(), "{host}: {error:?}");
        assert!(
            error.to_string().contains("not registries"),
            "{host}: {error}"
        );
    }
    assert_eq!(fake.request_count(), 0, "nothing reached the registry");
    // Listed, loopback is a registry like any other.
    let allowed = resolver(noe_test_support::loopback_cidrs(), vec![fake.host()]);
    let resolved = allowed
        .resolve(&format!("{}/app:1", fake.host()), &[])
        .await
        .unwrap();
    assert_eq!(resolved.platforms.len(), 1);
}

/// A registry allowed on 127.0.0.1 redirecting to another loopback address, or naming a token
/// realm there, is refused at that step: the guard applies to every target, not only the
/// image's registry.
#[tokio::test]
async fn redirects_and_token_realms_to_refused_addresses_are_refused() {
    let fake = FakeRegistry::start().await.unwrap();
    let other_port = fake.other_host().rsplit_once(':').unwrap().1.to_owned();
    fake.route(
        "/v2/redirected/app/manifests/1",
        Behavior::redirect(&format!(
            "http://127.0.0.2:{other_port}/v2/redirected/app/manifests/1"
        )),
    );
    fake.route(
        "/v2/realm/app/manifests/1",
        Behavior::Respond {
            status: 401,
            headers: vec![(
                "WWW-Authenticate".into(),
                format!(r#"Bearer realm="http://[::1]:{other_port}/token",service="fake""#),
            )],
            body: Default::default(),
        },
    );
    let only_the_registry: Vec<ipnet::IpNet> = vec!["127.0.0.1/32".parse().unwrap()];
    let resolver = resolver(
        only_the_registry,
        vec![
            fake.host(),
            format!("127.0.0.2:{other_port}"),
            format!("[::1]:{other_port}"),
        ],
    );
    for (repository, address) in [("redirected", "127.0.0.2"), ("realm", "::1")] {
        let error = resolver
            .resolve(&format!("{}/{repository}/app:1", fake.host()), &[])
            .await
            .unwrap_err();
        assert_eq!(
            blocked(&error),
            Some(address.parse().unwrap()),
            "{repository}: {error:?}"
        );
    }
    assert!(
        fake.requests()
            .iter()
            .all(|r| r.listener == noe_test_support::Listener::Main),
        "nothing reached the other listener"
    );
}

/// A port that refuses and a port that never answers: the same words to the caller, and the
/// same error kind; nothing of the connection's own (refused, timed out, os error) in them.
#[tokio::test]
async fn a_refused_port_and_a_silent_one_are_both_unreachable() {
    let closed = closed_port().unwrap();
    let silent = UnansweredPort::start().await.unwrap();
    let hosts = [closed.to_string(), silent.addr().to_string()];
    let resolver = resolver(noe_test_support::loopback_cidrs(), hosts.to_vec());
    let mut said = Vec::new();
    for host in &hosts {
        let error = resolver
            .resolve(&format!("{host}/app:1"), &[])
            .await
            .unwrap_err();
        let text = noe_webhook_like_one_line(&error);
        assert!(
            matches!(error, Error::Transport { .. }),
            "{host}: {error:?}"
        );
        assert_eq!(error.kind(), "transport", "{host}");
        assert!(
            text.ends_with(&format!("cannot reach {host}: unreachable")),
            "{host}: {text}"
        );
        for word in ["refused", "timed out", "os error", "tcp", "connect"] {
            assert!(!text.to_lowercase().contains(word), "{host}: {text}");
        }
        said.push(text.replace(host.as_str(), "HOST"));
    }
    assert_eq!(said[0], said[1]);
}

/// What callers are shown: the error and its sources on one line (as the webhook's
/// `one_line`).
fn noe_webhook_like_one_line(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}
