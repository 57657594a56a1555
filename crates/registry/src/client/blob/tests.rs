#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

/// A body far larger than the read buffer.
const BODY: usize = 4 << 20;

/// Answers one request with `BODY` bytes, written as fast as the socket takes them.
async fn serve_one(listener: TcpListener) {
    let (mut stream, _) = listener.accept().await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.unwrap() == 0 {
            return;
        }
        head.push(byte[0]);
    }
    let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {BODY}\r\n\r\n");
    stream.write_all(answer.as_bytes()).await.unwrap();
    let _ = stream.write_all(&vec![7u8; BODY]).await;
}

/// A server of one answer ([`serve_one`]) on loopback: a blob URL on it, and its task.
async fn serve() -> (Url, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let url = Url::parse(&format!("http://{address}/v2/a/blobs/sha256:0")).unwrap();
    (url, tokio::spawn(serve_one(listener)))
}

/// GETs `url` through a layer connection allowed on loopback.
async fn get(url: &Url) -> reqwest::Response {
    let blobs = Blobs::new(tls(), &loopback(), Duration::from_secs(2));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    blobs.get(url, &HeaderMap::new(), deadline).await.unwrap()
}

fn loopback() -> Guard {
    Guard::new(vec!["127.0.0.0/8".parse().unwrap()])
}

fn tls() -> rustls::ClientConfig {
    let roots = super::super::tls::shared_roots(None).unwrap();
    super::super::tls::client_config(&roots).unwrap()
}

/// Reads `response` slower than the sender writes (the socket fills up between reads); the
/// bytes read and the largest chunk.
async fn read_slowly(mut response: reqwest::Response) -> (usize, usize) {
    let (mut total, mut largest) = (0, 0);
    tokio::time::sleep(Duration::from_millis(100)).await;
    while let Some(chunk) = response.chunk().await.unwrap() {
        total += chunk.len();
        largest = largest.max(chunk.len());
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    (total, largest)
}

#[tokio::test]
async fn a_layer_body_comes_in_chunks_no_larger_than_the_read_buffer() {
    let (url, server) = serve().await;
    let response = get(&url).await;
    assert_eq!(response.status(), http::StatusCode::OK);
    let (total, largest) = read_slowly(response).await;
    assert_eq!(total, BODY);
    assert!(largest <= READ_BUFFER, "a chunk of {largest} bytes");
    server.await.unwrap();

    // The same reading through the shared client gets hyper's grown buffer: the bound above is
    // this connection's, not the sender's pace.
    let (url, server) = serve().await;
    let shared = super::super::build_client(tls(), &loopback(), Duration::from_secs(2), 0).unwrap();
    let response = shared.get(url).send().await.unwrap();
    let (total, largest) = read_slowly(response).await;
    assert_eq!(total, BODY);
    assert!(
        largest > READ_BUFFER,
        "the shared client's largest chunk: {largest}"
    );
    server.await.unwrap();
}

#[tokio::test]
async fn a_layer_connection_goes_through_the_address_guard() {
    let blobs = Blobs::new(tls(), &Guard::default(), Duration::from_secs(2));
    let url = Url::parse("http://localhost:9/v2/a/blobs/sha256:0").unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let Err(Failure::Connect(error)) = blobs.get(&url, &HeaderMap::new(), deadline).await else {
        panic!("localhost was not refused");
    };
    assert!(
        error
            .downcast_ref::<crate::ssrf::BlockedAddress>()
            .is_some(),
        "{error}"
    );
}

#[tokio::test]
async fn a_dropped_body_closes_its_connection() {
    let (url, server) = serve().await;
    let mut response = get(&url).await;
    assert!(response.chunk().await.unwrap().is_some());
    drop(response);
    // The server's write of the rest fails once the connection is closed: it returns.
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the connection stayed open")
        .unwrap();
}
