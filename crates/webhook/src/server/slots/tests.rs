use super::*;
use crate::server::conn::Close;

fn slots(max_connections: usize, max_handshakes: usize, per_source: usize) -> Arc<Slots> {
    let registry = prometheus::Registry::new();
    let metrics = ConnectionMetrics::register(&registry).unwrap();
    Slots::new(
        SlotLimits {
            max_connections,
            max_handshakes,
            max_handshakes_per_source: per_source,
            handshake_timeout: Duration::from_secs(3),
        },
        metrics.listener(Listener::Webhook),
    )
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// Whether `handshake` was shed (its notification is waiting).
async fn shed(handshake: &Handshake) -> bool {
    let run = handshake.run(futures::future::pending::<()>());
    matches!(
        futures::poll!(std::pin::pin!(run)),
        std::task::Poll::Ready(Err(NotEstablished::Shed))
    )
}

fn shed_count(slots: &Slots, reason: Shed) -> u64 {
    slots.metrics.shed[reason.index()].get()
}

#[tokio::test]
async fn the_oldest_in_handshake_is_shed_for_a_new_connection() {
    let slots = slots(10, 3, 3);
    let a = slots.admit(ip("10.0.0.1"));
    let b = slots.admit(ip("10.0.0.2"));
    let c = slots.admit(ip("10.0.0.3"));
    let d = slots.admit(ip("10.0.0.4"));
    assert!(shed(&a).await, "the oldest is shed");
    assert!(!shed(&b).await && !shed(&c).await && !shed(&d).await);
    assert_eq!(shed_count(&slots, Shed::Handshakes), 1);
    assert_eq!(slots.metrics.handshaking.get(), 3);
    drop((a, b, c, d));
    assert_eq!(slots.metrics.handshaking.get(), 0);
}

#[tokio::test]
async fn a_source_over_its_bound_sheds_its_own_oldest() {
    let slots = slots(10, 8, 2);
    let other = slots.admit(ip("10.0.0.9"));
    let first = slots.admit(ip("10.0.0.1"));
    let second = slots.admit(ip("10.0.0.1"));
    let third = slots.admit(ip("10.0.0.1"));
    assert!(shed(&first).await);
    assert!(!shed(&other).await, "another source keeps its handshake");
    assert!(!shed(&second).await && !shed(&third).await);
    assert_eq!(shed_count(&slots, Shed::Source), 1);
    // IPv6 sources count by their /64; IPv4-mapped ones as IPv4.
    let v6a = slots.admit(ip("2001:db8:1:2::1"));
    let _v6b = slots.admit(ip("2001:db8:1:2::ffff"));
    let _v6c = slots.admit(ip("2001:db8:1:2:aaaa::1"));
    assert!(shed(&v6a).await);
    let _mapped = slots.admit(ip("::ffff:10.0.0.1"));
    assert!(shed(&second).await);
}

#[tokio::test]
async fn a_full_house_closes_its_oldest_idle_connection_for_a_new_one() {
    let slots = slots(2, 8, 8);
    let busy = Activity::new();
    let idle = Activity::new();
    let request = busy.request();
    let first = slots
        .admit(ip("10.0.0.1"))
        .establish(busy.clone())
        .await
        .unwrap();
    let second = slots
        .admit(ip("10.0.0.2"))
        .establish(idle.clone())
        .await
        .unwrap();
    assert_eq!(slots.metrics.established.get(), 2);
    let waiting = tokio::spawn({
        let slots = slots.clone();
        async move { slots.admit(ip("10.0.0.3")).establish(Activity::new()).await }
    });
    // The idle one is asked to close; the one with a request in flight is not.
    let waker = futures::task::noop_waker();
    let cx = std::task::Context::from_waker(&waker);
    for _ in 0..100 {
        if idle.close(&cx) == Close::Gracefully {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(idle.close(&cx), Close::Gracefully);
    assert_eq!(busy.close(&cx), Close::No);
    assert_eq!(shed_count(&slots, Shed::Idle), 1);
    // It closes: the new connection takes its slot.
    drop(second);
    let third = waiting.await.unwrap().unwrap();
    assert_eq!(slots.metrics.established.get(), 2);
    drop((first, third, request));
    assert_eq!(slots.metrics.established.get(), 0);
}

/// Time is paused: a handshake that never ends is closed at the timeout and counted.
#[tokio::test(start_paused = true)]
async fn a_handshake_ends_at_the_timeout() {
    let slots = slots(2, 8, 8);
    let handshake = slots.admit(ip("10.0.0.1"));
    let started = tokio::time::Instant::now();
    let ended = handshake.run(futures::future::pending::<()>()).await;
    assert_eq!(ended, Err(NotEstablished::TimedOut));
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    assert_eq!(shed_count(&slots, Shed::Timeout), 1);
}
