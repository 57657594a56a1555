//! Credentials from each node-level source resolve a private image on the real registry
//! (htpasswd and token auth), and a wrong credential from an earlier source falls through to the
//! right one from a later source.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use noe_credentials::exec::ExecLimits;
use noe_credentials::{FileSource as _, Sources, SourcesConfig};
use noe_registry::{Config, Resolver};
use noe_test_support::{push_standard_fixtures, Registry, TokenServer};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn executable(path: &Path, body: &str) {
    write(path, &format!("#!/bin/sh\n{body}\n"));
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn resolver(insecure: Vec<String>) -> Resolver {
    Resolver::new(
        Config {
            insecure_registries: insecure,
            request_timeout: Duration::from_secs(2),
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &prometheus::Registry::new(),
    )
    .unwrap()
}

/// Sources reading nothing but what a test writes (no `$PATH`, no `/etc/containerd`).
fn only(config: SourcesConfig) -> SourcesConfig {
    SourcesConfig {
        docker_config_paths: config.docker_config_paths.or(Some(vec![])),
        containerd_config_paths: config.containerd_config_paths.or(Some(vec![])),
        helper_dirs: config.helper_dirs.or(Some(vec![])),
        exec_limits: ExecLimits {
            timeout: Duration::from_secs(2),
            max_output: 1 << 16,
        },
        ..config
    }
}

#[tokio::test]
async fn each_source_resolves_a_private_image_on_an_htpasswd_registry() {
    let registry = Registry::builder()
        .htpasswd("alice", "s3cret")
        .start()
        .await
        .unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let image = fixtures.oci_index.reference();
    let host = registry.host();
    let resolver_for = |host: &str| resolver(vec![host.to_owned()]);
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();

    // docker config.json with `auth`.
    let docker = t.join("docker/config.json");
    write(
        &docker,
        &format!(
            r#"{{"auths":{{"{host}":{{"auth":"{}"}}}}}}"#,
            b64("alice:s3cret")
        ),
    );
    // A docker credential helper named by credHelpers.
    let helper_dir = t.join("helpers");
    executable(
        &helper_dir.join("docker-credential-test"),
        r#"read -r server; printf '{"ServerURL":"%s","Username":"alice","Secret":"s3cret"}' "$server""#,
    );
    let helped = t.join("helped/config.json");
    write(
        &helped,
        &format!(r#"{{"credHelpers":{{"{host}":"test"}}}}"#),
    );
    // containerd CRI auth.
    let containerd = t.join("containerd/config.toml");
    write(
        &containerd,
        &format!("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"{host}\".auth]\nusername = \"alice\"\npassword = \"s3cret\"\n"),
    );
    // A kubelet credential provider plugin.
    let bin = t.join("plugins");
    executable(
        &bin.join("plugin"),
        &format!("cat >/dev/null\nprintf '{{\"apiVersion\":\"credentialprovider.kubelet.k8s.io/v1\",\"kind\":\"CredentialProviderResponse\",\"cacheKeyType\":\"Registry\",\"auth\":{{\"{host}\":{{\"username\":\"alice\",\"password\":\"s3cret\"}}}}}}'"),
    );
    let provider_config = t.join("provider.yaml");
    write(
        &provider_config,
        &format!("apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: plugin\n  matchImages: [\"{host}\"]\n  defaultCacheDuration: 1m\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n"),
    );

    let cases = [
        (
            only(SourcesConfig {
                docker_config_paths: Some(vec![docker.clone()]),
                ..SourcesConfig::default()
            }),
            format!("docker-config:{}", docker.display()),
        ),
        (
            only(SourcesConfig {
                docker_config_paths: Some(vec![helped]),
                helper_dirs: Some(vec![helper_dir]),
                ..SourcesConfig::default()
            }),
            "docker-credential-helper:test".to_owned(),
        ),
        (
            only(SourcesConfig {
                containerd_config_paths: Some(vec![containerd.clone()]),
                ..SourcesConfig::default()
            }),
            format!("containerd:{}", containerd.display()),
        ),
        (
            only(SourcesConfig {
                provider_bin_dir: Some(bin),
                provider_config: Some(provider_config),
                ..SourcesConfig::default()
            }),
            "credential-provider:plugin".to_owned(),
        ),
    ];
    for (config, expected_source) in cases {
        let sources = Sources::new(config).await.unwrap();
        let candidates = sources.candidates(&image).await;
        assert_eq!(candidates.len(), 1, "{expected_source}");
        // A fresh resolver each: the node's credentials are one scope, cached for every caller.
        let resolver = resolver_for(&host);
        let resolution = resolver.resolve(&image, &candidates).await.unwrap();
        assert_eq!(
            resolution.credential_source.as_deref(),
            Some(expected_source.as_str())
        );
        assert!(!resolution.platforms.is_empty());
    }

    // Without any source the private image cannot be read.
    let none = Sources::new(only(SourcesConfig::default())).await.unwrap();
    let candidates = none.candidates(&image).await;
    assert!(candidates.is_empty());
    assert!(resolver_for(&host)
        .resolve(&image, &candidates)
        .await
        .is_err());
}

#[tokio::test]
async fn wrong_credential_from_an_earlier_source_falls_through() {
    let (tokens, registry) = {
        let tokens = TokenServer::builder()
            .user("alice", "s3cret")
            .start()
            .await
            .unwrap();
        let registry = Registry::builder()
            .token_auth(&tokens)
            .start()
            .await
            .unwrap();
        (tokens, registry)
    };
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let image = fixtures.oci_single.reference();
    let host = registry.host();
    // The realm is plain HTTP on loopback: listed as insecure so credentials may go there.
    let resolver = resolver(vec![host.clone(), tokens.addr().to_string()]);
    let tmp = tempfile::tempdir().unwrap();
    let containerd = tmp.path().join("containerd.toml");
    write(
        &containerd,
        &format!("[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"{host}\".auth]\nusername = \"alice\"\npassword = \"wrong\"\n"),
    );
    let docker = tmp.path().join("config.json");
    write(
        &docker,
        &format!(
            r#"{{"auths":{{"http://{host}/v2/":{{"username":"alice","password":"s3cret"}}}}}}"#
        ),
    );
    let sources = Sources::new(only(SourcesConfig {
        docker_config_paths: Some(vec![docker.clone()]),
        containerd_config_paths: Some(vec![containerd.clone()]),
        ..SourcesConfig::default()
    }))
    .await
    .unwrap();
    let candidates = sources.candidates(&image).await;
    assert_eq!(
        candidates
            .iter()
            .map(|c| c.source.clone())
            .collect::<Vec<_>>(),
        [
            format!("containerd:{}", containerd.display()),
            format!("docker-config:{}", docker.display()),
        ]
    );
    let resolution = resolver.resolve(&image, &candidates).await.unwrap();
    assert_eq!(
        resolution.credential_source,
        Some(format!("docker-config:{}", docker.display()))
    );
    assert_eq!(
        resolution
            .platforms
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        fixtures.oci_single.platforms
    );
}

/// A docker config file whose credential changes: the answer found with the old credential is
/// no longer served from the cache once the file was read again (the sources' generation
/// moved), and the next lookup uses the new credential (here a wrong one: it fails), instead of
/// the old answer being served until its TTL.
#[tokio::test]
async fn a_changed_docker_config_credential_is_not_hidden_by_the_cache() {
    use noe_credentials::docker_config::{CredentialHelpers, DockerConfigSource};
    use noe_credentials::Generation;

    let registry = Registry::builder()
        .htpasswd("alice", "s3cret")
        .start()
        .await
        .unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let image = fixtures.oci_index.reference();
    let host = registry.host();
    let tmp = tempfile::tempdir().unwrap();
    let docker = tmp.path().join("docker/config.json");
    let config_with = |password: &str| {
        format!(
            r#"{{"auths":{{"{host}":{{"auth":"{}"}}}}}}"#,
            b64(&format!("alice:{password}"))
        )
    };
    write(&docker, &config_with("s3cret"));
    let generation = Generation::default();
    let source = DockerConfigSource::with_reload_interval(
        vec![docker.clone()],
        CredentialHelpers::new(Vec::new(), ExecLimits::default()),
        Duration::from_millis(1),
    )
    .with_generation(generation.clone());
    let resolver = Resolver::new(
        Config {
            insecure_registries: vec![host.clone()],
            request_timeout: Duration::from_secs(2),
            credentials_generation: Some(generation.clone()),
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &prometheus::Registry::new(),
    )
    .unwrap();

    let candidates = source.candidates(&image).await;
    assert_eq!(candidates.len(), 1);
    resolver.resolve(&image, &candidates).await.unwrap();
    assert!(resolver.cached(&image, None).is_some(), "cached as usual");

    write(&docker, &config_with("rotated-away"));
    // The source reads the file again in the background once asked after its interval: ask
    // until the change is noticed (bounded).
    for _ in 0..500 {
        if generation.current() > 0 {
            break;
        }
        let _ = source.candidates(&image).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(generation.current() > 0, "the change was never noticed");
    assert!(
        resolver.cached(&image, None).is_none(),
        "an answer found with the old credential is still served"
    );
    let candidates = source.candidates(&image).await;
    let error = resolver.resolve(&image, &candidates).await.unwrap_err();
    assert_eq!(error.kind(), "unauthorized", "{error}");
}
