//! One route per cold image through the admission's lookups: the real resolver, the real
//! credential matching and the real registry, with a hosts provider that counts what it is
//! asked. A cold image asks for the hosts of its registry once (not once to match credentials
//! and again to look it up), a cached one not at all; an image that does not parse fails in the
//! lookup with the resolver's message and its counted error; a lookup the deadline cuts short
//! is labelled with the registry it was routed to.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use noe_core::decide::LookupKind;
use noe_credentials::Sources;
use noe_registry::hosts::HostsConfig;
use noe_registry::{Config, HostsProvider, Reference, Resolver};
use noe_test_support::{push_standard_fixtures, Registry};
use noe_webhook::resolve::{one_line, Credentials, RegistryLookup, Resolve};

/// Asks for no host configuration (each registry's own server), recording each registry asked.
#[derive(Debug, Default)]
struct Counting {
    asked: Mutex<Vec<String>>,
}

impl Counting {
    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl HostsProvider for Counting {
    fn hosts<'a>(&'a self, registry: &'a str) -> BoxFuture<'a, Option<HostsConfig>> {
        self.asked.lock().unwrap().push(registry.to_owned());
        Box::pin(async { None })
    }
}

fn resolve(insecure: Vec<String>, hosts: Arc<Counting>, deadline: Duration) -> Resolve {
    let metrics = prometheus::Registry::new();
    resolve_on(insecure, hosts, deadline, &metrics)
}

fn resolve_on(
    insecure: Vec<String>,
    hosts: Arc<Counting>,
    deadline: Duration,
    metrics: &prometheus::Registry,
) -> Resolve {
    let resolver = Resolver::new(
        Config {
            insecure_registries: insecure,
            request_timeout: Duration::from_secs(30),
            hosts: Some(hosts),
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        metrics,
    )
    .unwrap();
    let credentials = Credentials {
        sources: Arc::new(Sources::none()),
        pull_secrets: None,
    };
    Resolve::new(
        Arc::new(RegistryLookup::new(resolver)),
        Arc::new(credentials),
        deadline,
    )
}

#[tokio::test]
async fn a_cold_image_is_routed_once_and_a_cached_one_not_at_all() {
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let counting = Arc::new(Counting::default());
    let resolve = resolve(
        vec![registry.host()],
        counting.clone(),
        Duration::from_secs(20),
    );
    let images = [
        fixtures.oci_index.reference(),
        fixtures.docker_single.reference(),
        fixtures.oci_single.digest_reference(),
    ];

    let cold = resolve.platforms("ns", &[], &images).await;
    for image in &images {
        assert!(
            matches!(cold.lookups.get(image), Some(Ok(_))),
            "{image}: {:?}",
            cold.lookups.get(image)
        );
    }
    assert_eq!(
        counting.asked(),
        [registry.host(), registry.host(), registry.host()],
        "one route per cold image"
    );

    let warm = resolve.platforms("ns", &[], &images).await;
    assert_eq!(warm.lookups, cold.lookups);
    assert_eq!(counting.asked().len(), 3, "a cached image is not routed");
}

#[tokio::test]
async fn an_image_that_does_not_parse_fails_in_the_lookup_once_counted() {
    let metrics = prometheus::Registry::new();
    let counting = Arc::new(Counting::default());
    let resolve = resolve_on(
        Vec::new(),
        counting.clone(),
        Duration::from_secs(5),
        &metrics,
    );
    let bad = "Not A/Reference:!";
    let expected = one_line(&Reference::parse(bad).unwrap_err());

    let resolved = resolve.platforms("ns", &[], &[bad]).await;
    let error = resolved.lookups[bad].as_ref().unwrap_err();
    assert_eq!(error.kind, LookupKind::InvalidReference);
    assert_eq!(error.message, expected);
    assert_eq!(error.registry, "other");
    assert_eq!(resolved.failed_registries, ["other"]);
    assert!(counting.asked().is_empty(), "{:?}", counting.asked());
    let counted: f64 = metrics
        .gather()
        .iter()
        .filter(|family| family.name() == "noe_registry_errors_total")
        .flat_map(|family| family.get_metric())
        .filter(|m| {
            m.get_label()
                .iter()
                .any(|l| l.value() == "invalid_reference")
        })
        .map(|m| m.get_counter().get_value())
        .sum();
    assert_eq!(counted, 1.0);
}

#[tokio::test]
async fn a_lookup_cut_by_the_deadline_is_labelled_by_its_route() {
    // A registry that accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    let counting = Arc::new(Counting::default());
    let resolve = resolve(
        vec![host.clone()],
        counting.clone(),
        Duration::from_millis(500),
    );
    let image = format!("{host}/team/app:1");

    let resolved = resolve.platforms("ns", &[], &[image.as_str()]).await;
    let error = resolved.lookups[&image].as_ref().unwrap_err();
    assert_eq!(error.kind, LookupKind::Deadline, "{error:?}");
    assert_eq!(
        error.registry, host,
        "the insecure registry is a label value"
    );
    assert_eq!(counting.asked(), [host]);
    held.abort();
}
