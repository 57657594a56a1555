//! Idle registry connections are capped process-wide, not only per host: after lookups on many
//! hosts, only [`MAX_POOLED_HOSTS`] hosts keep a connection open; every other host's connection
//! closes with its response. The hosts are small loopback servers that answer every request
//! with a keep-alive 404 and count their open connections (a real registry cannot be started
//! forty times cheaply, and what is counted is the client's behaviour, not the server's).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use noe_registry::resolver::MAX_POOLED_HOSTS;
use noe_registry::{Config, Resolver};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const HOSTS: usize = 40;

/// A server on loopback that answers each request `404` (keep-alive) and counts the
/// connections open on it.
async fn keep_alive_404(open: Arc<AtomicUsize>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let open = open.clone();
            open.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                'connection: loop {
                    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => break 'connection,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                        if buffer.len() > 64 * 1024 {
                            break 'connection;
                        }
                    }
                    buffer.clear();
                    let answer = b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                    if stream.write_all(answer).await.is_err() {
                        break;
                    }
                }
                open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    host
}

#[tokio::test]
async fn lookups_on_many_hosts_leave_idle_connections_on_a_bounded_number_of_them() {
    let open = Arc::new(AtomicUsize::new(0));
    let mut hosts = Vec::new();
    for _ in 0..HOSTS {
        hosts.push(keep_alive_404(open.clone()).await);
    }
    let config = Config {
        insecure_registries: hosts.clone(),
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    };
    let resolver = Resolver::new(config, &prometheus::Registry::new()).unwrap();
    for host in &hosts {
        let error = resolver
            .resolve(&format!("{host}/app:1"), &[])
            .await
            .unwrap_err();
        assert_eq!(error.kind(), "not_found", "{error}");
    }
    // The connections of unpooled hosts close with their responses: wait (bounded) until the
    // servers have seen them go. Without the cap every host keeps its idle connection for the
    // pool's idle timeout, far longer than this wait.
    let mut still_open = open.load(Ordering::SeqCst);
    for _ in 0..300 {
        if still_open <= MAX_POOLED_HOSTS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        still_open = open.load(Ordering::SeqCst);
    }
    assert!(
        still_open <= MAX_POOLED_HOSTS,
        "{still_open} connections still open on {HOSTS} hosts"
    );
    assert!(still_open > 0, "the first hosts keep theirs for reuse");
}
