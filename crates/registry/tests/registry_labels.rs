//! The `registry` metric label is bounded: hosts pod authors invent never become label values;
//! the configured ones (the resolver's own configuration and its hosts provider's) do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use noe_credentials::{Sources, SourcesConfig};
use noe_registry::hosts::NodeHosts;
use noe_registry::{Config, Error, Resolver};
use noe_test_support::{push_standard_fixtures, Registry};

/// The values of `label` across the series of metric `name`.
fn label_values(registry: &prometheus::Registry, name: &str, label: &str) -> BTreeSet<String> {
    registry
        .gather()
        .iter()
        .filter(|family| family.name() == name)
        .flat_map(|family| family.get_metric().iter())
        .flat_map(|metric| metric.get_label().iter())
        .filter(|pair| pair.name() == label)
        .map(|pair| pair.value().to_owned())
        .collect()
}

#[test]
fn three_thousand_invented_provider_hosts_make_one_label_value() {
    let resolver = Resolver::new(
        Config {
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &prometheus::Registry::new(),
    )
    .unwrap();
    let labels: BTreeSet<String> = (0..3000)
        .map(|n| {
            resolver.error_label(&Error::NotFound {
                reference: format!("r{n}.azurecr.io/app:1"),
                registry: format!("r{n}.azurecr.io"),
            })
        })
        .collect();
    assert_eq!(labels, BTreeSet::from(["azurecr.io".to_owned()]));
    // An error that names no registry.
    let invalid = noe_registry::Reference::parse("Not A Reference!").unwrap_err();
    assert_eq!(invalid.registry(), None);
    assert_eq!(resolver.error_label(&invalid), "other");
}

#[tokio::test]
async fn requests_to_invented_hosts_are_recorded_under_other() {
    let metrics = prometheus::Registry::new();
    let resolver = Resolver::new(
        Config {
            request_timeout: Duration::from_secs(2),
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &metrics,
    )
    .unwrap();
    // 127.0.0.2 .. 127.0.3.251 are loopback addresses nothing listens on: each lookup is one
    // refused connection, under a host of its own.
    for n in 0..1000u32 {
        let host = format!("127.0.{}.{}:1", n / 250, n % 250 + 2);
        let error = resolver
            .resolve(&format!("{host}/app:1"), &[])
            .await
            .unwrap_err();
        assert_eq!(error.registry(), Some(host.as_str()));
        assert_eq!(resolver.error_label(&error), "other");
    }
    assert_eq!(
        label_values(
            &metrics,
            "noe_registry_request_duration_seconds",
            "registry"
        ),
        BTreeSet::from(["other".to_owned()])
    );
}

#[tokio::test]
async fn configured_hosts_come_from_the_config_and_the_credential_sources() {
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let docker = dir.path().join("config.json");
    let auth = base64::engine::general_purpose::STANDARD.encode("u:p");
    std::fs::write(
        &docker,
        format!(
            r#"{{"auths":{{"https://harbor.corp/v1/":{{"auth":"{auth}"}},"*.private.corp":{{"auth":"{auth}"}}}}}}"#
        ),
    )
    .unwrap();
    let containerd = dir.path().join("containerd");
    std::fs::create_dir_all(containerd.join("certs.d/mirrored.corp:5000")).unwrap();
    std::fs::write(
        containerd.join("certs.d/mirrored.corp:5000/hosts.toml"),
        "[host.\"https://mirror.corp\"]\n",
    )
    .unwrap();
    let sources = Sources::new(SourcesConfig {
        docker_config_paths: Some(vec![docker]),
        containerd_config_paths: Some(vec![containerd]),
        helper_dirs: Some(Vec::new()),
        ..SourcesConfig::default()
    })
    .await
    .unwrap();
    let resolver = Resolver::new(
        Config {
            insecure_registries: vec![registry.host()],
            proxies: vec![("quay.io".into(), "quay-proxy.corp".into())],
            private_registries: vec!["private.example/team".into()],
            hosts: Some(Arc::new(NodeHosts::new(sources))),
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &prometheus::Registry::new(),
    )
    .unwrap();
    // A lookup takes the hosts provider's hosts.
    resolver
        .resolve(&fixtures.oci_index.reference(), &[])
        .await
        .unwrap();
    let cases = [
        (registry.host(), registry.host()),
        ("quay-proxy.corp".to_owned(), "quay-proxy.corp".to_owned()),
        ("private.example".to_owned(), "private.example".to_owned()),
        ("harbor.corp".to_owned(), "harbor.corp".to_owned()),
        ("x.private.corp".to_owned(), "*.private.corp".to_owned()),
        (
            "mirrored.corp:5000".to_owned(),
            "mirrored.corp:5000".to_owned(),
        ),
        ("r7.azurecr.io".to_owned(), "azurecr.io".to_owned()),
        ("invented.example".to_owned(), "other".to_owned()),
    ];
    for (host, want) in cases {
        assert_eq!(resolver.registry_label(&host), want, "{host}");
    }
}
