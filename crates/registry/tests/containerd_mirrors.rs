//! containerd `certs.d` mirrors against real registries: `hosts.toml` files in a temp `certs.d`,
//! a containerd `config.toml` whose `config_path` points at it, the real [`ContainerdSource`] as
//! the resolver's hosts provider. A mirror holding the image serves it (the origin sees nothing);
//! unreachable, 500 and 404 mirrors fall back; capabilities, `override_path`, headers, per-host
//! CAs and credential scoping are honoured.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use noe_credentials::containerd::ContainerdSource;
use noe_credentials::{Credential, CredentialCandidate};
use noe_registry::hosts::ContainerdHosts;
use noe_registry::{Config, Resolver};
use noe_test_support::{
    build_image, manifest_path, push_standard_fixtures, Behavior, FakeRegistry, Flavor, Registry,
    TestCa,
};

/// Writes `certs.d/<registry>/hosts.toml` and a `config.toml` pointing at `certs.d`; returns the
/// config file.
fn containerd_config(dir: &Path, registry: &str, hosts_toml: &str) -> std::path::PathBuf {
    let certs = dir.join("certs.d");
    std::fs::create_dir_all(certs.join(registry)).unwrap();
    std::fs::write(certs.join(registry).join("hosts.toml"), hosts_toml).unwrap();
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = {:?}\n",
            certs.display().to_string()
        ),
    )
    .unwrap();
    config
}

/// A resolver whose hosts come from containerd config under `dir`; `insecure` over plain HTTP.
fn resolver(dir: &Path, registry: &str, hosts_toml: &str, insecure: &[String]) -> Resolver {
    let config = containerd_config(dir, registry, hosts_toml);
    Resolver::new(
        Config {
            insecure_registries: insecure.to_vec(),
            request_timeout: Duration::from_secs(2),
            hosts: Some(Arc::new(ContainerdHosts::new(ContainerdSource::new(vec![
                config,
            ])))),
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &prometheus::Registry::new(),
    )
    .unwrap()
}

fn platforms(resolution: &noe_registry::Resolution) -> Vec<String> {
    resolution
        .platforms
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// A `127.0.0.1` port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn mirror_holding_the_image_is_used_before_the_origin() {
    let origin = Registry::start().await.unwrap();
    let mirror = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&origin).await.unwrap();
    let mirrored = push_standard_fixtures(&mirror).await.unwrap();
    assert_eq!(fixtures.oci_index.digest, mirrored.oci_index.digest);
    origin.reset_requests();
    mirror.reset_requests();
    let dir = tempfile::tempdir().unwrap();
    let hosts = format!(
        "[host.\"http://{}\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
        mirror.host()
    );
    let resolver = resolver(dir.path(), &origin.host(), &hosts, &[origin.host()]);

    for fixture in [&fixtures.oci_index, &fixtures.oci_single] {
        let resolution = resolver.resolve(&fixture.reference(), &[]).await.unwrap();
        let mut expected = fixture.platforms.clone();
        expected.sort();
        assert_eq!(platforms(&resolution), expected);
        assert_eq!(resolution.image, fixture.reference());
        let at_mirror = fixture
            .reference()
            .replacen(&origin.host(), &mirror.host(), 1);
        assert_eq!(resolution.resolved, at_mirror);
    }
    assert_eq!(
        origin.requests(),
        vec![],
        "the origin must not be contacted"
    );
    assert!(mirror.request_count() >= 3, "{:?}", mirror.requests());

    // A cache hit still reports the mirror.
    let again = resolver
        .resolve(&fixtures.oci_index.reference(), &[])
        .await
        .unwrap();
    assert!(
        again.resolved.starts_with(&mirror.host()),
        "{}",
        again.resolved
    );
}

#[tokio::test]
async fn deprecated_cri_mirrors_apply_without_certs_d() {
    let origin = Registry::start().await.unwrap();
    let mirror = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&origin).await.unwrap();
    push_standard_fixtures(&mirror).await.unwrap();
    origin.reset_requests();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"{}\"]\n  \
             endpoint = [\"http://127.0.0.1:{}\", \"http://{}\"]\n",
            origin.host(),
            closed_port(),
            mirror.host()
        ),
    )
    .unwrap();
    let resolver = Resolver::new(
        Config {
            insecure_registries: vec![origin.host()],
            request_timeout: Duration::from_secs(2),
            hosts: Some(Arc::new(ContainerdHosts::new(ContainerdSource::new(vec![
                config,
            ])))),
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &prometheus::Registry::new(),
    )
    .unwrap();
    let fixture = &fixtures.windows_index;
    let resolution = resolver.resolve(&fixture.reference(), &[]).await.unwrap();
    assert!(
        resolution.resolved.starts_with(&mirror.host()),
        "{}",
        resolution.resolved
    );
    assert_eq!(origin.requests(), vec![]);
}

#[tokio::test]
async fn unreachable_failing_and_empty_mirrors_fall_back_to_the_origin() {
    let origin = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&origin).await.unwrap();
    let broken = FakeRegistry::start().await.unwrap();
    let empty = FakeRegistry::start().await.unwrap();
    let fixture = &fixtures.docker_list;
    broken.route(
        &manifest_path(&fixture.repository, &fixture.tag),
        Behavior::status(500),
    );
    origin.reset_requests();
    let dir = tempfile::tempdir().unwrap();
    // In order: a closed port, a 500, a 404 (the fake's unscripted answer), then the server.
    let hosts = format!(
        "server = \"http://{origin}\"\n\
         [host.\"http://127.0.0.1:{closed}\"]\n\
         [host.\"http://{broken}\"]\n\
         [host.\"http://{empty}\"]\n",
        origin = origin.host(),
        closed = closed_port(),
        broken = broken.host(),
        empty = empty.host(),
    );
    let resolver = resolver(dir.path(), &origin.host(), &hosts, &[]);
    let resolution = resolver.resolve(&fixture.reference(), &[]).await.unwrap();
    assert_eq!(resolution.resolved, fixture.reference());
    assert_eq!(platforms(&resolution), vec!["linux/amd64", "linux/arm64"]);
    let manifest = manifest_path(&fixture.repository, &fixture.tag);
    assert!(!broken.requests_to(&manifest).is_empty());
    assert_eq!(empty.requests_to(&manifest).len(), 1);
    assert_eq!(origin.request_count(), 1, "{:?}", origin.requests());
}

#[tokio::test]
async fn every_host_failing_reports_the_server_error() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (closed_port(), closed_port());
    let registry = format!("127.0.0.1:{a}");
    let hosts = format!("server = \"http://127.0.0.1:{a}\"\n[host.\"http://127.0.0.1:{b}\"]\n");
    let resolver = resolver(dir.path(), &registry, &hosts, &[]);
    let error = resolver
        .resolve(&format!("{registry}/app:1"), &[])
        .await
        .unwrap_err();
    assert_eq!(error.kind(), "transport", "{error:?}");
    assert!(error.to_string().contains(&registry), "{error}");
}

#[tokio::test]
async fn pull_only_mirror_serves_digests_but_not_tags() {
    let origin = Registry::start().await.unwrap();
    let mirror = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&origin).await.unwrap();
    push_standard_fixtures(&mirror).await.unwrap();
    origin.reset_requests();
    mirror.reset_requests();
    let dir = tempfile::tempdir().unwrap();
    let hosts = format!(
        "[host.\"http://{}\"]\n  capabilities = [\"pull\"]\n",
        mirror.host()
    );
    let resolver = resolver(dir.path(), &origin.host(), &hosts, &[origin.host()]);
    let fixture = &fixtures.oci_index;

    let by_tag = resolver.resolve(&fixture.reference(), &[]).await.unwrap();
    assert_eq!(by_tag.resolved, fixture.reference());
    assert_eq!(
        mirror.requests(),
        vec![],
        "a pull-only host must not resolve tags"
    );
    assert_eq!(origin.request_count(), 1);

    origin.reset_requests();
    let by_digest = resolver
        .resolve(&fixture.digest_reference(), &[])
        .await
        .unwrap();
    assert!(
        by_digest.resolved.starts_with(&mirror.host()),
        "{}",
        by_digest.resolved
    );
    assert_eq!(origin.requests(), vec![]);
    assert_eq!(mirror.request_count(), 1);
}

#[tokio::test]
async fn override_path_makes_the_url_path_the_api_root() {
    let origin = Registry::start().await.unwrap();
    let mirror = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&origin).await.unwrap();
    push_standard_fixtures(&mirror).await.unwrap();
    let fixture = &fixtures.oci_single;
    for (override_path, mirror_serves) in [(true, true), (false, false)] {
        origin.reset_requests();
        mirror.reset_requests();
        let dir = tempfile::tempdir().unwrap();
        let hosts = format!(
            "[host.\"http://{}/v2\"]\n  override_path = {override_path}\n",
            mirror.host()
        );
        let resolver = resolver(dir.path(), &origin.host(), &hosts, &[origin.host()]);
        let resolution = resolver.resolve(&fixture.reference(), &[]).await.unwrap();
        assert_eq!(platforms(&resolution), vec!["linux/arm64"]);
        let mirror_paths: Vec<String> = mirror.requests().into_iter().map(|r| r.path).collect();
        if mirror_serves {
            assert!(resolution.resolved.starts_with(&mirror.host()));
            assert_eq!(origin.requests(), vec![]);
            assert!(mirror_paths
                .iter()
                .all(|p| p.starts_with(&format!("/v2/{}/", fixture.repository))));
        } else {
            // Without override_path `/v2` is appended: `/v2/v2/...` is not found there.
            assert_eq!(resolution.resolved, fixture.reference());
            assert!(
                mirror_paths.iter().all(|p| p.starts_with("/v2/v2/")),
                "{mirror_paths:?}"
            );
        }
    }
}

#[tokio::test]
async fn headers_reach_only_their_own_host() {
    let origin = FakeRegistry::start().await.unwrap();
    let mirror = FakeRegistry::start().await.unwrap();
    let image = build_image("headers", "linux/arm64", Flavor::Oci).unwrap();
    origin.script_image("app", "1", &image);
    let dir = tempfile::tempdir().unwrap();
    let hosts = format!(
        "server = \"http://{origin}\"\n\
         [header]\n  x-origin-token = \"for-origin\"\n\
         [host.\"http://{mirror}\"]\n\
         [host.\"http://{mirror}\".header]\n  x-mirror-token = [\"m1\", \"m2\"]\n",
        origin = origin.host(),
        mirror = mirror.host(),
    );
    let resolver = resolver(dir.path(), &origin.host(), &hosts, &[]);
    let resolution = resolver
        .resolve(&format!("{}/app:1", origin.host()), &[])
        .await
        .unwrap();
    assert_eq!(platforms(&resolution), vec!["linux/arm64"]);

    let to_mirror = mirror.requests();
    assert!(!to_mirror.is_empty());
    for request in &to_mirror {
        let values: Vec<&str> = request
            .headers
            .get_all("x-mirror-token")
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert_eq!(values, vec!["m1", "m2"], "{request:?}");
        assert!(request.header("x-origin-token").is_none(), "{request:?}");
    }
    let to_origin = origin.requests();
    assert_eq!(to_origin.len(), 2, "{to_origin:?}"); // manifest + config blob
    for request in &to_origin {
        assert_eq!(request.header("x-origin-token"), Some("for-origin"));
        assert!(request.header("x-mirror-token").is_none(), "{request:?}");
    }
}

#[tokio::test]
async fn host_headers_are_dropped_on_a_redirect_to_another_host() {
    let mirror = FakeRegistry::start().await.unwrap();
    let image = build_image("redirect", "linux/ppc64le", Flavor::Oci).unwrap();
    mirror.script_image("app", "1", &image);
    let config = image.descriptor.config_digest.clone().unwrap();
    mirror.route(
        &noe_test_support::blob_path("app", &config),
        Behavior::redirect_to_other("/storage/config"),
    );
    mirror.route(
        "/storage/config",
        Behavior::body(200, "application/octet-stream", image.config.clone()),
    );
    let dir = tempfile::tempdir().unwrap();
    let registry = format!("127.0.0.1:{}", closed_port());
    let hosts = format!(
        "server = \"http://{registry}\"\n\
         [host.\"http://{mirror}\"]\n\
         [host.\"http://{mirror}\".header]\n  x-mirror-token = \"m\"\n",
        mirror = mirror.host(),
    );
    let resolver = resolver(dir.path(), &registry, &hosts, &[]);
    let resolution = resolver
        .resolve(&format!("{registry}/app:1"), &[])
        .await
        .unwrap();
    assert_eq!(platforms(&resolution), vec!["linux/ppc64le"]);
    assert_eq!(resolution.resolved, format!("{}/app:1", mirror.host()));
    let storage = mirror.requests_to("/storage/config");
    assert_eq!(storage.len(), 1);
    assert_eq!(storage[0].listener, noe_test_support::Listener::Other);
    assert!(storage[0].header("x-mirror-token").is_none(), "{storage:?}");
    let manifest = mirror.requests_to(&manifest_path("app", "1"));
    assert_eq!(manifest[0].header("x-mirror-token"), Some("m"));
}

#[tokio::test]
async fn a_mirror_gets_only_credentials_matched_for_its_own_host() {
    let origin = Registry::builder()
        .htpasswd("alice", "origin-secret")
        .start()
        .await
        .unwrap();
    let fixtures = push_standard_fixtures(&origin).await.unwrap();
    let mirror = FakeRegistry::start().await.unwrap();
    let fixture = &fixtures.oci_index;
    // The mirror asks for Basic credentials on everything.
    let manifest = manifest_path(&fixture.repository, &fixture.tag);
    mirror.route(&manifest, Behavior::basic_challenge("mirror"));
    mirror.route(
        &manifest_path(&fixture.repository, &fixture.digest),
        Behavior::basic_challenge("mirror"),
    );
    let dir = tempfile::tempdir().unwrap();
    let hosts = format!("[host.\"http://{}\"]\n", mirror.host());
    // Both are "insecure": credentials could travel to either over plain HTTP.
    let resolver = resolver(
        dir.path(),
        &origin.host(),
        &hosts,
        &[origin.host(), mirror.host()],
    );
    let origin_credential = CredentialCandidate::new(
        "docker-config:origin",
        Credential::Basic {
            username: "alice".into(),
            password: "origin-secret".into(),
        },
    );

    let resolution = resolver
        .resolve(
            &fixture.reference(),
            std::slice::from_ref(&origin_credential),
        )
        .await
        .unwrap();
    assert_eq!(resolution.resolved, fixture.reference());
    assert_eq!(
        resolution.credential_source.as_deref(),
        Some("docker-config:origin")
    );
    let to_mirror = mirror.requests_to(&manifest);
    assert!(!to_mirror.is_empty());
    assert!(
        to_mirror.iter().all(|r| !r.has_authorization()),
        "the origin's credentials reached the mirror: {to_mirror:?}"
    );

    // A credential matched for the mirror's host does go to the mirror (and only there).
    let mirror_credential = CredentialCandidate::new(
        "docker-config:mirror",
        Credential::Basic {
            username: "bob".into(),
            password: "mirror-secret".into(),
        },
    )
    .for_mirror(mirror.host());
    mirror.reset_requests();
    let resolution = resolver
        .resolve(
            &fixture.digest_reference(),
            &[origin_credential, mirror_credential],
        )
        .await
        .unwrap();
    assert_eq!(
        resolution.credential_source.as_deref(),
        Some("docker-config:origin")
    );
    let sent: Vec<String> = mirror
        .requests()
        .iter()
        .filter_map(|r| r.header("authorization").map(str::to_owned))
        .collect();
    let bob = format!("Basic {}", base64_encode("bob:mirror-secret"));
    assert!(
        !sent.is_empty() && sent.iter().all(|h| *h == bob),
        "{sent:?}"
    );
}

#[tokio::test]
async fn per_host_ca_and_skip_verify_apply_to_that_host_only() {
    let origin = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&origin).await.unwrap();
    let ca = TestCa::new().unwrap();
    let mirror = Registry::builder().tls(&ca).start().await.unwrap();
    push_standard_fixtures(&mirror).await.unwrap();
    let fixture = &fixtures.docker_single;
    let cases = [
        ("ca = \"mirror-ca.pem\"\n", true),
        ("skip_verify = true\n", true),
        ("", false), // the mirror's CA is not trusted globally
    ];
    for (settings, mirror_serves) in cases {
        let dir = tempfile::tempdir().unwrap();
        let hosts = format!("[host.\"https://{}\"]\n  {settings}", mirror.host());
        let resolver = resolver(dir.path(), &origin.host(), &hosts, &[origin.host()]);
        std::fs::write(
            dir.path()
                .join("certs.d")
                .join(origin.host())
                .join("mirror-ca.pem"),
            ca.cert_pem(),
        )
        .unwrap();
        let resolution = resolver.resolve(&fixture.reference(), &[]).await.unwrap();
        assert_eq!(platforms(&resolution), vec!["linux/s390x"]);
        assert_eq!(
            resolution.resolved.starts_with(&mirror.host()),
            mirror_serves,
            "{settings}: {}",
            resolution.resolved
        );
    }
}

fn base64_encode(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}
