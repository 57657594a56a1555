//! Registries that require a TLS client certificate (the real registry with `http.tls.clientcas`):
//! containerd `hosts.toml` `client` entries and docker-style `certs.d` `*.cert`/`*.key` pairs
//! are presented to the hosts they are configured for, and to no other.

use std::path::Path;
use std::sync::Arc;

use noe_credentials::containerd::ContainerdSource;
use noe_registry::hosts::ContainerdHosts;
use noe_registry::{Config, Error};
use noe_test_support::{push_standard_fixtures, Registry, ServerCert, TestCa};

use super::support::{platforms, resolver_with, sorted};

struct Setup {
    server_ca: TestCa,
    client_ca: TestCa,
    registry: Registry,
    image: String,
    expected: Vec<String>,
}

async fn mtls_registry() -> Setup {
    let server_ca = TestCa::with_name("registry server CA").unwrap();
    let client_ca = TestCa::with_name("registry client CA").unwrap();
    let registry = Registry::builder()
        .tls(&server_ca)
        .require_client_cert(&client_ca)
        .start()
        .await
        .unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    Setup {
        image: fixtures.oci_index.reference(),
        expected: sorted(&fixtures.oci_index.platforms),
        server_ca,
        client_ca,
        registry,
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A resolver whose containerd configuration is the directory `root` (holding `certs.d/`).
fn resolver_with_containerd(root: &Path) -> noe_registry::Resolver {
    resolver_with(Config {
        hosts: Some(Arc::new(ContainerdHosts::new(ContainerdSource::new(vec![
            root.to_owned(),
        ])))),
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    })
}

#[tokio::test]
async fn hosts_toml_client_pair_reaches_an_mtls_registry() {
    let setup = mtls_registry().await;
    let client = setup.client_ca.client_cert("noe").unwrap();
    let root = tempfile::tempdir().unwrap();
    let host_dir = root.path().join("certs.d").join(setup.registry.host());
    write(&host_dir.join("ca.pem"), &setup.server_ca.cert_pem());
    write(&host_dir.join("client.cert"), &client.cert_pem);
    write(&host_dir.join("client.key"), &client.key_pem);
    write(
        &host_dir.join("hosts.toml"),
        &format!(
            "server = \"https://{}\"\nca = \"ca.pem\"\nclient = [[\"client.cert\", \"client.key\"]]\n",
            setup.registry.host()
        ),
    );
    let resolution = resolver_with_containerd(root.path())
        .resolve(&setup.image, &[])
        .await
        .unwrap();
    assert_eq!(platforms(&resolution), setup.expected);
}

#[tokio::test]
async fn hosts_toml_single_file_client_and_docker_certs_d_pairs() {
    let setup = mtls_registry().await;
    let client = setup.client_ca.client_cert("noe").unwrap();

    // containerd: one file holding the certificate and its key, given as a bare path.
    let combined = tempfile::tempdir().unwrap();
    let host_dir = combined.path().join("certs.d").join(setup.registry.host());
    write(&host_dir.join("ca.pem"), &setup.server_ca.cert_pem());
    write(
        &host_dir.join("both.pem"),
        &format!("{}{}", client.cert_pem, client.key_pem),
    );
    write(
        &host_dir.join("hosts.toml"),
        &format!(
            "server = \"https://{}\"\nca = \"ca.pem\"\nclient = \"both.pem\"\n",
            setup.registry.host()
        ),
    );
    let resolution = resolver_with_containerd(combined.path())
        .resolve(&setup.image, &[])
        .await
        .unwrap();
    assert_eq!(platforms(&resolution), setup.expected);

    // docker: certs.d/HOST_PORT with ca.crt, client.cert and client.key, no hosts.toml.
    let docker = tempfile::tempdir().unwrap();
    let host_dir = docker
        .path()
        .join("certs.d")
        .join(setup.registry.host().replace(':', "_"));
    write(&host_dir.join("ca.crt"), &setup.server_ca.cert_pem());
    write(&host_dir.join("client.cert"), &client.cert_pem);
    write(&host_dir.join("client.key"), &client.key_pem);
    let resolution = resolver_with_containerd(docker.path())
        .resolve(&setup.image, &[])
        .await
        .unwrap();
    assert_eq!(platforms(&resolution), setup.expected);
}

/// The error an mTLS registry's refusal gives, for the messages below.
async fn refusal(resolver: &noe_registry::Resolver, image: &str) -> Error {
    let error = resolver.resolve(image, &[]).await.unwrap_err();
    assert!(matches!(error, Error::Transport { .. }), "{error:?}");
    error
}

#[tokio::test]
async fn without_its_pair_an_mtls_registry_fails_clearly() {
    let setup = mtls_registry().await;
    // Trusting the server but presenting nothing.
    let trusting = resolver_with(Config {
        extra_ca_pem: Some(setup.server_ca.cert_pem().into_bytes()),
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    });
    let error = refusal(&trusting, &setup.image).await;
    let message = error.to_string();
    assert!(message.contains(&setup.registry.host()), "{message}");
    assert!(
        message.contains("requires a client certificate"),
        "{message}"
    );

    // A pair from a CA the registry does not trust.
    let stranger: ServerCert = TestCa::with_name("someone else")
        .unwrap()
        .client_cert("noe")
        .unwrap();
    let root = tempfile::tempdir().unwrap();
    let host_dir = root.path().join("certs.d").join(setup.registry.host());
    write(&host_dir.join("ca.crt"), &setup.server_ca.cert_pem());
    write(&host_dir.join("client.cert"), &stranger.cert_pem);
    write(&host_dir.join("client.key"), &stranger.key_pem);
    let error = refusal(&resolver_with_containerd(root.path()), &setup.image).await;
    assert!(error.to_string().contains("client certificate"), "{error}");
}

#[tokio::test]
async fn a_pair_is_presented_only_to_the_host_it_is_configured_for() {
    let setup = mtls_registry().await;
    // A second mTLS registry trusting the same client CA, with no certs.d entry of its own.
    let other = Registry::builder()
        .tls(&setup.server_ca)
        .require_client_cert(&setup.client_ca)
        .start()
        .await
        .unwrap();
    let other_fixtures = push_standard_fixtures(&other).await.unwrap();
    let client = setup.client_ca.client_cert("noe").unwrap();
    let root = tempfile::tempdir().unwrap();
    let host_dir = root.path().join("certs.d").join(setup.registry.host());
    write(&host_dir.join("ca.crt"), &setup.server_ca.cert_pem());
    write(&host_dir.join("client.cert"), &client.cert_pem);
    write(&host_dir.join("client.key"), &client.key_pem);
    let resolver = resolver_with(Config {
        extra_ca_pem: Some(setup.server_ca.cert_pem().into_bytes()),
        hosts: Some(Arc::new(ContainerdHosts::new(ContainerdSource::new(vec![
            root.path().to_owned(),
        ])))),
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    });
    let resolution = resolver.resolve(&setup.image, &[]).await.unwrap();
    assert_eq!(platforms(&resolution), setup.expected);
    let error = refusal(&resolver, &other_fixtures.oci_index.reference()).await;
    let message = error.to_string();
    assert!(message.contains(&other.host()), "{message}");
    assert!(
        message.contains("requires a client certificate"),
        "{message}"
    );
}
