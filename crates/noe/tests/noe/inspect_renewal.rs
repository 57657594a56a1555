//! `noe inspect` renews a refused credential as a lookup does: a kubelet credential provider
//! plugin whose first answer a real htpasswd registry refuses is run once more, and its second
//! answer opens the registry.

use std::os::unix::fs::PermissionsExt;

use noe_test_support::{push_standard_fixtures, Registry};

use super::harness::run_noe;

#[tokio::test]
async fn inspect_renews_a_refused_plugin_answer_once() {
    let registry = Registry::builder()
        .htpasswd("alice", "s3cret")
        .start()
        .await
        .unwrap();
    let image = push_standard_fixtures(&registry)
        .await
        .unwrap()
        .oci_index
        .reference();
    let host = registry.host();
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = dir.path().join("runs.log");
    // The first run answers a stale password, every later one the right one.
    let script = format!(
        r#"#!/bin/sh
cat > /dev/null
echo run >> "{log}"
password=s3cret
[ "$(wc -l < "{log}")" -eq 1 ] && password=stale
printf '{{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Registry","cacheDuration":"5m","auth":{{"{host}":{{"username":"alice","password":"%s"}}}}}}' "$password"
"#,
        log = log.display(),
    );
    let plugin = bin.join("registry-login");
    std::fs::write(&plugin, script).unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let providers = dir.path().join("providers.yaml");
    std::fs::write(
        &providers,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n  - name: registry-login\n    matchImages: [\"{host}\"]\n    defaultCacheDuration: 1m\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
        ),
    )
    .unwrap();
    let none = dir.path().join("absent");
    let args = vec![
        "inspect".to_owned(),
        format!("--insecure-registries={host}"),
        format!("--docker-config-path={}", none.display()),
        format!("--containerd-config-path={}", none.display()),
        format!("--image-credential-provider-bin-dir={}", bin.display()),
        format!("--image-credential-provider-config={}", providers.display()),
        "-o".to_owned(),
        "json".to_owned(),
        image,
    ];
    let (code, stdout, stderr) = run_noe(&args).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let found: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        found["credentialSource"], "credential-provider:registry-login",
        "{found}"
    );
    let runs = std::fs::read_to_string(&log).unwrap().lines().count();
    assert_eq!(runs, 2, "one renewal");
}
