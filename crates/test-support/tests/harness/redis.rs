use std::time::{Duration, Instant};

use noe_test_support::{DelayProxy, RedisServer, TestCa};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

#[test]
fn a_plain_server_stores_and_is_killed_on_demand() {
    let mut redis = RedisServer::start().unwrap();
    assert_eq!(redis.command(&["PING"]).unwrap(), "PONG");
    assert_eq!(redis.command(&["SET", "k", "v"]).unwrap(), "OK");
    assert_eq!(redis.command(&["GET", "k"]).unwrap(), "v");
    assert_eq!(redis.command(&["GET", "absent"]).unwrap(), "(nil)");
    assert_eq!(redis.command(&["KEYS", "*"]).unwrap(), "k");
    assert!(redis.url().starts_with("redis://127.0.0.1:"));
    redis.kill();
    assert!(!redis.is_running());
    assert!(
        redis.command(&["PING"]).is_err(),
        "still answering after kill"
    );
}

#[test]
fn a_password_is_required_when_set() {
    let redis = RedisServer::builder().password("s3cret").start().unwrap();
    // The harness authenticates; a bare connection is refused.
    assert_eq!(redis.command(&["PING"]).unwrap(), "PONG");
    let mut bare = std::net::TcpStream::connect(redis.addr()).unwrap();
    use std::io::{Read as _, Write as _};
    bare.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut reply = [0u8; 64];
    let n = bare.read(&mut reply).unwrap();
    assert!(
        String::from_utf8_lossy(&reply[..n]).starts_with("-NOAUTH"),
        "{:?}",
        String::from_utf8_lossy(&reply[..n])
    );
    assert!(!format!("{redis:?}").contains("s3cret"));
}

#[test]
fn a_tls_server_starts_with_a_test_ca() {
    let ca = TestCa::new().unwrap();
    let redis = RedisServer::builder().tls(&ca).start().unwrap();
    assert!(redis.url().starts_with("rediss://127.0.0.1:"));
    assert_eq!(redis.ca_pem().unwrap(), ca.cert_pem());
}

#[tokio::test]
async fn the_delay_proxy_forwards_intact_and_adds_its_round_trip() {
    // An echo server behind the proxy.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut buffer = vec![0u8; 1 << 20];
        loop {
            let n = stream.read(&mut buffer).await.unwrap();
            if n == 0 {
                break;
            }
            stream.write_all(&buffer[..n]).await.unwrap();
        }
    });
    let round_trip = Duration::from_millis(50);
    let proxy = DelayProxy::start(target, round_trip).await.unwrap();
    let mut client = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    let payload: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let started = Instant::now();
    client.write_all(&payload).await.unwrap();
    let mut echoed = vec![0u8; payload.len()];
    client.read_exact(&mut echoed).await.unwrap();
    // Never sooner than the round trip it adds (a lower bound: the proxy holds every chunk).
    assert!(started.elapsed() >= round_trip, "{:?}", started.elapsed());
    assert_eq!(echoed, payload);
    assert_eq!(proxy.connections(), 1);
}
