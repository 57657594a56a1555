//! One pod's images are bounded: a pod naming many images on many hosts opens at most its share
//! of the process-wide lookups (counted by a fake that holds every connection open), answers
//! within the deadline with the images beyond the bound named as not looked up, and another
//! pod's lookup runs while it is still waiting.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use noe_registry::{Config, Resolver};
use noe_test_support::{push_standard_fixtures, Registry};
use noe_webhook::resolve::{Anonymous, LookupError, LookupLimits, RegistryLookup, Resolve};
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// Connections a fake holds open: never answered, closed only when the client gives up.
#[derive(Default)]
struct Held {
    open: AtomicUsize,
    most: AtomicUsize,
    changed: Notify,
}

/// A listener on a loopback address of its own (a registry host of its own) that accepts and
/// holds every connection until the peer closes it.
async fn hanging_host(n: u8, held: Arc<Held>) -> String {
    let listener = TcpListener::bind(("127.0.1.".to_owned() + &n.to_string(), 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let held = Arc::clone(&held);
            let now = held.open.fetch_add(1, Ordering::SeqCst) + 1;
            held.most.fetch_max(now, Ordering::SeqCst);
            held.changed.notify_waiters();
            tokio::spawn(async move {
                use tokio::io::AsyncReadExt as _;
                let mut sink = [0u8; 1024];
                // Read (and drop) until the client closes.
                while matches!(socket.read(&mut sink).await, Ok(n) if n > 0) {}
                held.open.fetch_sub(1, Ordering::SeqCst);
                held.changed.notify_waiters();
            });
        }
    });
    addr.to_string()
}

#[tokio::test]
async fn a_pod_of_many_hosts_is_bounded_and_does_not_hold_up_another() {
    const HOSTS: u8 = 48;
    let limits = LookupLimits {
        max_images: 40,
        max_concurrent: 8,
        max_concurrent_per_admission: 4,
    };
    let held = Arc::new(Held::default());
    let mut hosts = Vec::new();
    for n in 1..=HOSTS {
        hosts.push(hanging_host(n, Arc::clone(&held)).await);
    }
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let mut insecure = hosts.clone();
    insecure.push(registry.host());
    let resolver = Resolver::new(
        Config {
            insecure_registries: insecure,
            request_timeout: Duration::from_secs(60),
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &prometheus::Registry::new(),
    )
    .unwrap();
    let deadline = Duration::from_secs(3);
    let resolve = Arc::new(
        Resolve::new(
            Arc::new(RegistryLookup::new(resolver)),
            Arc::new(Anonymous),
            deadline,
        )
        .with_limits(limits),
    );

    // Tenant A: one image on each of the hanging hosts.
    let images: Vec<String> = hosts.iter().map(|host| format!("{host}/a:1")).collect();
    let started = tokio::time::Instant::now();
    let crowd = {
        let resolve = Arc::clone(&resolve);
        let images = images.clone();
        tokio::spawn(async move { resolve.platforms("team-a", &[], &images).await })
    };
    // Wait (on the fake's own events) until A holds its share of connections.
    loop {
        let changed = held.changed.notified();
        if held.open.load(Ordering::SeqCst) >= limits.max_concurrent_per_admission {
            break;
        }
        tokio::time::timeout(deadline, changed)
            .await
            .expect("tenant A never opened its share of connections");
    }

    // Tenant B, meanwhile: its image is answered while A still waits on its hosts.
    let other = fixtures.oci_index.reference();
    let answered = resolve
        .platforms("team-b", &[], std::slice::from_ref(&other))
        .await;
    assert!(
        matches!(answered.lookups.get(&other), Some(Ok(platforms)) if !platforms.is_empty()),
        "{:?}",
        answered.lookups
    );
    assert!(!crowd.is_finished(), "tenant B waited for tenant A");

    let crowd = crowd.await.unwrap();
    assert!(
        started.elapsed() < deadline + Duration::from_secs(1),
        "answered after the deadline: {:?}",
        started.elapsed()
    );
    // At most A's share of connections were ever open at once.
    assert_eq!(
        held.most.load(Ordering::SeqCst),
        limits.max_concurrent_per_admission
    );
    assert_eq!(crowd.lookups.len(), images.len());
    let too_many = crowd
        .lookups
        .values()
        .filter(|result| {
            matches!(result, Err(error) if error.kind == noe_core::decide::LookupKind::TooManyImages
                && error.message.contains("--max-images-per-admission"))
        })
        .count();
    assert_eq!(too_many, images.len() - limits.max_images);
    assert!(crowd.lookups.values().all(Result::is_err));
    assert_eq!(crowd.failed_registries.len(), images.len());
    // The error class itself, as the decision's input will carry it.
    let error = LookupError::TooManyImages {
        limit: 40,
        registry: "other".into(),
    };
    assert_eq!(error.registry(), "other");
}
