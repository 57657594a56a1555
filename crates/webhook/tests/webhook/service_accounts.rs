//! KEP-4412 end to end: a kubelet credential provider plugin with `tokenAttributes` gets, for a
//! pod's image, a token of the pod's own ServiceAccount (the TokenRequest API of the scripted
//! kube API, through kube's real client) and the account's annotations; the credential it
//! answers opens a real htpasswd registry; what it found is cached for that account only.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use noe_credentials::{Sources, SourcesConfig};
use noe_registry::{Config, Resolver};
use noe_test_support::{push_standard_fixtures, service_account_json, KubeApi, Registry, Resource};
use noe_webhook::resolve::pull_secrets::PullSecrets;
use noe_webhook::resolve::{Credentials, PodAccess, RegistryLookup, Resolve, Resolved};

const AUDIENCE: &str = "registry.example";
const ROLE: &str = "example.com/registry-role";

/// A plugin that answers the registry's password only when its request carries a token of the
/// scripted API for the audience and the account's role annotation; otherwise it fails.
fn plugin(dir: &std::path::Path, host: &str) -> std::path::PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        r#"#!/bin/sh
req=$(cat)
printf '%s\n' "$req" >> "{log}"
printf '%s' "$req" | grep -q '"serviceAccountToken":"sa-token\.team\.app\.{AUDIENCE}\.' || {{ echo "no token of team/app for the audience" >&2; exit 3; }}
printf '%s' "$req" | grep -qF '"serviceAccountAnnotations":{{"{ROLE}":"puller"}}' || {{ echo "no role annotation" >&2; exit 4; }}
printf '{{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Registry","cacheDuration":"5m","auth":{{"{host}":{{"username":"alice","password":"s3cret"}}}}}}'
"#,
        log = dir.join("plugin.log").display(),
    );
    let path = bin.join("registry-login");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = dir.join("providers.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n  - name: registry-login\n    matchImages: [\"{host}\"]\n    defaultCacheDuration: 1m\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n    tokenAttributes:\n      serviceAccountTokenAudience: {AUDIENCE}\n      requireServiceAccount: true\n      requiredServiceAccountAnnotationKeys: [{ROLE}]\n      cacheType: ServiceAccount\n"
        ),
    )
    .unwrap();
    config
}

fn found(resolved: &Resolved, image: &str) -> bool {
    resolved.lookups.get(image).is_some_and(Result::is_ok)
}

#[tokio::test]
async fn a_pods_service_account_token_opens_its_registry_and_only_for_that_account() {
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
    let api = KubeApi::start().await.unwrap();
    api.put(
        Resource::ServiceAccounts,
        "team",
        service_account_json("team", "app", &[(ROLE, "puller"), ("unrelated", "x")]),
    );
    api.put(
        Resource::ServiceAccounts,
        "team",
        service_account_json("team", "bare", &[]),
    );
    let dir = tempfile::tempdir().unwrap();
    let config = plugin(dir.path(), &host);
    let sources = Sources::new(SourcesConfig {
        docker_config_paths: Some(vec![]),
        containerd_config_paths: Some(vec![]),
        helper_dirs: Some(vec![]),
        provider_bin_dir: Some(dir.path().join("bin")),
        provider_config: Some(config),
        service_account_tokens: true,
        ..SourcesConfig::default()
    })
    .await
    .unwrap();
    let resolver = Resolver::new(
        Config {
            insecure_registries: vec![host.clone()],
            request_timeout: Duration::from_secs(3),
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &prometheus::Registry::new(),
    )
    .unwrap();
    let resolve = Resolve::new(
        Arc::new(RegistryLookup::new(resolver)),
        Arc::new(Credentials {
            sources: Arc::new(sources),
            pull_secrets: Some(
                PullSecrets::new(api.client().unwrap()).with_service_account_tokens(),
            ),
        }),
        Duration::from_secs(5),
    );
    let images = [image.clone()];
    let as_account = |account: Option<&'static str>| PodAccess {
        pull_secrets: &[],
        service_account: account,
    };

    let resolved = resolve
        .platforms_for(
            "team",
            as_account(Some("app")),
            &images,
            tracing::Span::none,
        )
        .await;
    assert!(found(&resolved, &image), "{resolved:?}");

    // The API was asked as the kubelet asks: the account, then a token for the audience, short
    // and bound to nothing (the pod does not exist yet).
    let requests = api.requests();
    let paths: Vec<(&str, &str)> = requests
        .iter()
        .map(|r| (r.method.as_str(), r.path.as_str()))
        .collect();
    assert_eq!(
        paths,
        [
            ("GET", "/api/v1/namespaces/team/serviceaccounts/app"),
            ("POST", "/api/v1/namespaces/team/serviceaccounts/app/token"),
        ]
    );
    let spec = &requests[1].body["spec"];
    assert_eq!(spec["audiences"], serde_json::json!([AUDIENCE]));
    assert_eq!(spec["expirationSeconds"], 600);
    assert!(spec
        .get("boundObjectRef")
        .is_none_or(serde_json::Value::is_null));

    // What the account's token found is not served to another account of the namespace, nor
    // to a pod without one: the plugin is not run for them (a required annotation is missing;
    // no account), the registry refuses them.
    for account in [Some("bare"), None] {
        let resolved = resolve
            .platforms_for("team", as_account(account), &images, tracing::Span::none)
            .await;
        assert!(!found(&resolved, &image), "{account:?}: {resolved:?}");
    }
    let runs = std::fs::read_to_string(dir.path().join("plugin.log")).unwrap();
    assert_eq!(runs.lines().count(), 1, "{runs}");
    // The same account again: from the cache, no registry, no new token.
    registry.reset_requests();
    api.reset_requests();
    let resolved = resolve
        .platforms_for(
            "team",
            as_account(Some("app")),
            &images,
            tracing::Span::none,
        )
        .await;
    assert!(found(&resolved, &image));
    assert_eq!(registry.request_count(), 0);
    assert!(api.requests().iter().all(|r| !r.path.ends_with("/token")));
}
