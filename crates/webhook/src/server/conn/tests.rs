use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

/// Time is paused: a write into a pipe nobody reads fails after exactly the write timeout.
#[tokio::test(start_paused = true)]
async fn a_write_nobody_reads_times_out() {
    let (server, _client) = tokio::io::duplex(64);
    let mut watched = Watched::new(server, Activity::new(), Duration::from_secs(10));
    let started = Instant::now();
    let error = watched.write_all(&[0u8; 1024]).await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    assert_eq!(started.elapsed(), Duration::from_secs(10));
}

#[tokio::test(start_paused = true)]
async fn a_slow_reader_is_not_a_stalled_one() {
    let (server, mut client) = tokio::io::duplex(64);
    let mut watched = Watched::new(server, Activity::new(), Duration::from_secs(10));
    let reader = tokio::spawn(async move {
        let mut buf = [0u8; 64];
        let mut total = 0;
        while total < 1024 {
            tokio::time::sleep(Duration::from_secs(5)).await;
            total += client.read(&mut buf).await.unwrap();
        }
        total
    });
    // Each wait for space is shorter than the timeout: the write completes.
    watched.write_all(&[1u8; 1024]).await.unwrap();
    drop(watched);
    assert_eq!(reader.await.unwrap(), 1024);
}

fn verdict(activity: &Activity) -> Close {
    let waker = futures::task::noop_waker();
    activity.close(&Context::from_waker(&waker))
}

/// Time is paused: the watchdog's verdicts, at the exact times they are due.
#[tokio::test(start_paused = true)]
async fn idle_means_no_request_and_no_bytes_between_two_looks() {
    let (_keep, shutdown) = watch::channel(false);
    let activity = Activity::new();
    let started = Instant::now();
    let request = activity.request();
    let watching = tokio::spawn(watchdog(
        activity.clone(),
        Duration::from_secs(60),
        Duration::from_millis(500),
        shutdown,
    ));
    tokio::time::sleep(Duration::from_secs(100)).await;
    assert_eq!(
        verdict(&activity),
        Close::No,
        "a request in flight is not idle"
    );
    drop(request);
    watching.await.unwrap();
    // Looks at 60 s (busy), 120 s (the request ended at 100 s: activity), 180 s (idle).
    assert_eq!(started.elapsed(), Duration::from_secs(180));
    assert_eq!(verdict(&activity), Close::Gracefully);
}

#[tokio::test(start_paused = true)]
async fn shutdown_and_refusals_close() {
    let (stop, shutdown) = watch::channel(false);
    let activity = Activity::new();
    let watching = tokio::spawn(watchdog(
        activity.clone(),
        Duration::from_secs(60),
        Duration::from_millis(500),
        shutdown,
    ));
    stop.send(true).unwrap();
    watching.await.unwrap();
    assert_eq!(verdict(&activity), Close::Gracefully);

    let (_keep, shutdown) = watch::channel(false);
    let activity = Activity::new();
    let started = Instant::now();
    let watching = tokio::spawn(watchdog(
        activity.clone(),
        Duration::from_secs(60),
        Duration::from_millis(500),
        shutdown,
    ));
    activity.refused();
    watching.await.unwrap();
    assert_eq!(started.elapsed(), Duration::from_millis(500));
    assert_eq!(verdict(&activity), Close::Now);
}
