//! All node-level sources together, built from the flags, with real files and a real plugin.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use noe_credentials::exec::ExecLimits;
use noe_credentials::Credential;
use noe_credentials::{Error, Sources, SourcesConfig};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn basic(u: &str, p: &str) -> Credential {
    Credential::Basic {
        username: u.into(),
        password: p.into(),
    }
}

#[tokio::test]
async fn plugins_then_containerd_then_docker_config() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let bin = t.join("plugins");
    write(
        &bin.join("plugin"),
        "#!/bin/sh\ncat >/dev/null\nprintf '{\"apiVersion\":\"credentialprovider.kubelet.k8s.io/v1\",\"kind\":\"CredentialProviderResponse\",\"cacheKeyType\":\"Registry\",\"auth\":{\"127.0.0.1:5000\":{\"username\":\"plugin\",\"password\":\"pp\"}}}'\n",
    );
    std::fs::set_permissions(bin.join("plugin"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let provider_config = t.join("provider.yaml");
    write(
        &provider_config,
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: plugin\n  matchImages: [\"127.0.0.1:5000\"]\n  defaultCacheDuration: 1m\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n",
    );
    let containerd = t.join("containerd/config.toml");
    write(
        &containerd,
        "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"127.0.0.1:5000\".auth]\nusername = \"ctr\"\npassword = \"cp\"\n",
    );
    let docker = t.join("docker/config.json");
    let auth = base64::engine::general_purpose::STANDARD.encode("docker:dp");
    // The same credential as containerd's is listed once.
    let dup = base64::engine::general_purpose::STANDARD.encode("ctr:cp");
    write(
        &docker,
        &format!(
            r#"{{"auths":{{"127.0.0.1:5000/team":{{"auth":"{auth}"}},"http://127.0.0.1:5000":{{"auth":"{dup}"}}}}}}"#
        ),
    );
    let sources = Sources::new(SourcesConfig {
        docker_config_paths: Some(vec![docker.clone(), t.join("absent.json")]),
        containerd_config_paths: Some(vec![t.join("containerd")]),
        provider_bin_dir: Some(bin),
        provider_config: Some(provider_config),
        helper_dirs: Some(vec![]),
        exec_limits: ExecLimits {
            timeout: Duration::from_secs(2),
            max_output: 1 << 16,
        },
        file_read_timeout: None,
        service_account_tokens: false,
    })
    .await
    .unwrap();
    let got: Vec<(String, Credential)> = sources
        .candidates("127.0.0.1:5000/team/app:1")
        .await
        .into_iter()
        .map(|c| (c.source, c.credential))
        .collect();
    assert_eq!(
        got,
        [
            (
                "credential-provider:plugin".to_owned(),
                basic("plugin", "pp")
            ),
            (
                format!("containerd:{}", containerd.display()),
                basic("ctr", "cp")
            ),
            (
                format!("docker-config:{}", docker.display()),
                basic("docker", "dp")
            ),
        ]
    );
    assert!(sources.candidates("127.0.0.1:5001/app:1").await.is_empty());
}

#[tokio::test]
async fn provider_flags_must_come_together_and_parse() {
    let tmp = tempfile::tempdir().unwrap();
    let only_dir = Sources::new(SourcesConfig {
        provider_bin_dir: Some(tmp.path().to_owned()),
        ..SourcesConfig::default()
    })
    .await;
    assert!(matches!(only_dir, Err(Error::ProviderFlags)));
    let bad = tmp.path().join("bad.yaml");
    write(&bad, "apiVersion: v1\nkind: Pod\n");
    let invalid = Sources::new(SourcesConfig {
        provider_bin_dir: Some(tmp.path().to_owned()),
        provider_config: Some(bad),
        ..SourcesConfig::default()
    })
    .await;
    assert!(matches!(invalid, Err(Error::Provider(_))));
    assert!(Sources::none()
        .candidates("docker.io/library/nginx:1")
        .await
        .is_empty());
}
