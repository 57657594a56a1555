//! Pull-secret scoping through the real resolver, the real credential matching and the real
//! registry (pull secrets read through kube's client over a scripted API): what one namespace's
//! pull secret found is never served from the cache to another namespace, or to a pod without
//! that secret, without the registry being asked with their own credentials; what anyone may
//! read is cached for everyone.

use std::sync::Arc;
use std::time::Duration;

use noe_credentials::{Sources, SourcesConfig};
use noe_registry::{Config, Resolver};
use noe_test_support::{push_standard_fixtures, Registry};
use noe_webhook::resolve::pull_secrets::PullSecrets;
use noe_webhook::resolve::{Credentials, RegistryLookup, Resolve};

use super::pull_secrets::{b64, path, scripted_client, secret, Script};

fn docker_config(host: &str, user: &str, password: &str) -> String {
    format!(
        r#"{{"auths":{{"{host}":{{"auth":"{}"}}}}}}"#,
        b64(&format!("{user}:{password}"))
    )
}

fn pull_secret(namespace: &str, config: &str) -> (String, Option<(u16, serde_json::Value)>) {
    (
        path(namespace, "regcred"),
        Some((
            200,
            secret(
                namespace,
                "regcred",
                "kubernetes.io/dockerconfigjson",
                ".dockerconfigjson",
                config,
            ),
        )),
    )
}

#[tokio::test]
async fn a_private_answer_is_served_only_in_the_scope_that_found_it() {
    let private = Registry::builder()
        .htpasswd("alice", "s3cret")
        .start()
        .await
        .unwrap();
    let public = Registry::start().await.unwrap();
    let private_image = push_standard_fixtures(&private)
        .await
        .unwrap()
        .oci_index
        .reference();
    let public_image = push_standard_fixtures(&public)
        .await
        .unwrap()
        .oci_index
        .reference();
    let host = private.host();
    let script: Script = [
        pull_secret("team", &docker_config(&host, "alice", "s3cret")),
        pull_secret("other", &docker_config(&host, "alice", "wrong")),
        pull_secret("copycat", &docker_config(&host, "alice", "s3cret")),
    ]
    .into_iter()
    .collect();
    let (client, api) = scripted_client(script);
    let resolver = Resolver::new(
        Config {
            insecure_registries: vec![host.clone(), public.host()],
            request_timeout: Duration::from_secs(3),
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &prometheus::Registry::new(),
    )
    .unwrap();
    let sources = Sources::new(SourcesConfig {
        docker_config_paths: Some(vec![]),
        containerd_config_paths: Some(vec![]),
        helper_dirs: Some(vec![]),
        ..SourcesConfig::default()
    })
    .await
    .unwrap();
    let resolve = Resolve::new(
        Arc::new(RegistryLookup::new(resolver)),
        Arc::new(Credentials {
            sources: Arc::new(sources),
            pull_secrets: Some(PullSecrets::new(client)),
        }),
        Duration::from_secs(5),
    );
    let regcred = ["regcred".to_owned()];
    let images = [private_image.clone(), public_image.clone()];
    let found = |resolved: &noe_webhook::resolve::Resolved, image: &str| {
        resolved.lookups.get(image).is_some_and(Result::is_ok)
    };

    // The team's pull secret finds the private image; the public one needs none.
    let resolved = resolve.platforms("team", &regcred, &images).await;
    assert!(found(&resolved, &private_image), "{resolved:?}");
    assert!(found(&resolved, &public_image), "{resolved:?}");

    // Again in the same scope: both from the cache, no registry asked.
    private.reset_requests();
    public.reset_requests();
    let resolved = resolve.platforms("team", &regcred, &images).await;
    assert!(found(&resolved, &private_image) && found(&resolved, &public_image));
    assert_eq!(private.request_count(), 0);
    assert_eq!(public.request_count(), 0);

    // The public answer is everyone's: another namespace, a pod without secrets.
    for (namespace, secrets) in [("other", &regcred[..]), ("team", &[][..])] {
        let resolved = resolve
            .platforms(namespace, secrets, std::slice::from_ref(&public_image))
            .await;
        assert!(found(&resolved, &public_image), "{namespace}");
    }
    assert_eq!(public.request_count(), 0);

    // The private answer is not: a pod of the same namespace without the secret is refused by
    // the registry, and so is another namespace whose secret holds a wrong password.
    for (namespace, secrets) in [("team", &[][..]), ("other", &regcred[..])] {
        private.reset_requests();
        let resolved = resolve
            .platforms(namespace, secrets, std::slice::from_ref(&private_image))
            .await;
        let error = resolved.lookups[&private_image].as_ref().unwrap_err();
        assert!(
            error.message.contains("access denied"),
            "{namespace}: {error}"
        );
        assert_eq!(error.kind, noe_core::decide::LookupKind::Unauthorized);
        assert!(
            private.request_count() >= 1,
            "{namespace}: asked the registry"
        );
    }

    // The same credentials in another namespace: that namespace proves its access itself.
    private.reset_requests();
    let resolved = resolve
        .platforms("copycat", &regcred, std::slice::from_ref(&private_image))
        .await;
    assert!(found(&resolved, &private_image), "{resolved:?}");
    assert!(private.request_count() >= 1);

    drop(resolve);
    api.finish().await;
}
