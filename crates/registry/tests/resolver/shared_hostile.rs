//! A hostile shared cache on loopback (a fake: no real server answers like this): it answers
//! the set-up and the writes like Redis, and every read with a bulk string of 4 GiB, which it
//! then streams for as long as the client reads. The connection must be dropped after a bounded
//! number of bytes, and lookups go on through the registry.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use noe_registry::shared::SharedConfig;
use noe_registry::{Answered, Config, Resolver};
use noe_test_support::{push_standard_fixtures, Registry};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// What the fake streams at most per connection (before the fix, a client read all of it).
const STREAM_AT_MOST: u64 = 256 * 1024 * 1024;
/// What a client may have taken before dropping the connection: its allowance (a read of 16
/// values) and the kernel's socket buffers on loopback.
const BOUND: u64 = 32 * 1024 * 1024;

#[derive(Default)]
struct Seen {
    /// Bytes of the oversized answer the fake could send, summed over connections.
    streamed: AtomicU64,
    /// A connection on which the fake streamed everything without the client closing it.
    read_whole: AtomicBool,
    /// Connections the client closed while the fake was streaming.
    dropped: AtomicU64,
}

/// One RESP command (an array of bulk strings) from the client; `None` at its end.
async fn command(reader: &mut BufReader<TcpStream>) -> Option<Vec<Vec<u8>>> {
    let mut line = String::new();
    reader.read_line(&mut line).await.ok()?;
    let count: usize = line.trim().strip_prefix('*')?.parse().ok()?;
    let mut args = Vec::with_capacity(count.min(16));
    for _ in 0..count {
        line.clear();
        reader.read_line(&mut line).await.ok()?;
        let len: usize = line.trim().strip_prefix('$')?.parse().ok()?;
        if len > 1 << 20 {
            return None;
        }
        let mut arg = vec![0; len + 2];
        reader.read_exact(&mut arg).await.ok()?;
        arg.truncate(len);
        args.push(arg);
    }
    Some(args)
}

async fn serve(stream: TcpStream, seen: Arc<Seen>) {
    let mut reader = BufReader::new(stream);
    while let Some(args) = command(&mut reader).await {
        let name = args
            .first()
            .map(|a| a.to_ascii_uppercase())
            .unwrap_or_default();
        if name != b"GETRANGE" {
            if reader.get_mut().write_all(b"+OK\r\n").await.is_err() {
                return;
            }
            continue;
        }
        let stream = reader.get_mut();
        if stream.write_all(b"$4294967296\r\n").await.is_err() {
            return;
        }
        let chunk = vec![b'x'; 64 * 1024];
        let mut sent = 0u64;
        while sent < STREAM_AT_MOST {
            if stream.write_all(&chunk).await.is_err() {
                seen.streamed.fetch_add(sent, Ordering::Relaxed);
                seen.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            sent += chunk.len() as u64;
        }
        seen.streamed.fetch_add(sent, Ordering::Relaxed);
        seen.read_whole.store(true, Ordering::Relaxed);
        return;
    }
}

#[tokio::test]
async fn an_oversized_answer_drops_the_connection_and_lookups_go_on() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let accepting = {
        let seen = seen.clone();
        tokio::spawn(async move {
            // Bounded: a few connections per lookup at most.
            for _ in 0..64 {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(serve(stream, seen.clone()));
            }
        })
    };
    let registry = Registry::start().await.unwrap();
    let fixtures = push_standard_fixtures(&registry).await.unwrap();
    let metrics = prometheus::Registry::new();
    let resolver = Resolver::new(
        Config {
            insecure_registries: vec![registry.host()],
            request_timeout: Duration::from_secs(2),
            shared_cache: Some(SharedConfig {
                url: format!("redis://{addr}/0"),
                password: None,
                ca_pem: None,
                key: b"0123456789abcdef-install-key".to_vec(),
                key_file_mode: None,
                timeout: Duration::from_millis(200),
            }),
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &metrics,
    )
    .unwrap();

    for fixture in [
        &fixtures.oci_index,
        &fixtures.docker_list,
        &fixtures.oci_single,
    ] {
        let found = resolver.resolve(&fixture.reference(), &[]).await.unwrap();
        assert_eq!(found.answered_by, Answered::Get);
    }
    // The fake learns of the close when a write fails: wait for it (bounded).
    for _ in 0..500 {
        if seen.dropped.load(Ordering::Relaxed) > 0 || seen.read_whole.load(Ordering::Relaxed) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let streamed = seen.streamed.load(Ordering::Relaxed);
    let dropped = seen.dropped.load(Ordering::Relaxed);
    println!("streamed {streamed} bytes over {dropped} dropped connections");
    assert!(
        !seen.read_whole.load(Ordering::Relaxed),
        "the client read {STREAM_AT_MOST} bytes of one answer"
    );
    assert!(dropped >= 1, "no connection was dropped");
    assert!(
        streamed < BOUND * dropped,
        "{streamed} bytes over {dropped} connections"
    );
    accepting.abort();
}
