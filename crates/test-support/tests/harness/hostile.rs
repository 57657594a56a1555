//! The hostile-registry side of the fake, the stalled client and the CONNECT proxy.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use noe_test_support::media_types::OCI_INDEX;
use noe_test_support::{Behavior, ConnectProxy, FakeRegistry, Listener, StalledClient, TestCa};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[tokio::test]
async fn raw_retry_after_redirects_anywhere_and_late_answers() {
    let fake = FakeRegistry::start().await.unwrap();
    fake.route(
        "/v2/absurd/manifests/1",
        Behavior::retry_after(503, "18446744073709551615"),
    );
    fake.route(
        "/v2/down/manifests/1",
        Behavior::redirect("http://127.0.0.1:9/v2/down/manifests/1"),
    );
    fake.route(
        "/v2/late/manifests/1",
        Behavior::status(429)
            .delayed(Duration::from_millis(50))
            .with_header("retry-after", "1"),
    );
    let client = client();
    let get = |repo: &str| {
        client
            .get(format!("{}/v2/{repo}/manifests/1", fake.base_url()))
            .send()
    };
    let absurd = get("absurd").await.unwrap();
    assert_eq!(absurd.status(), 503);
    assert_eq!(absurd.headers()["retry-after"], "18446744073709551615");
    let down = get("down").await.unwrap();
    assert_eq!(down.status(), 307);
    assert_eq!(
        down.headers()["location"],
        "http://127.0.0.1:9/v2/down/manifests/1"
    );
    let late = get("late").await.unwrap();
    assert_eq!(late.status(), 429);
    assert_eq!(late.headers()["retry-after"], "1");
}

#[tokio::test]
async fn generated_answers_are_built_per_request_and_huge_strings_have_their_length() {
    let fake = FakeRegistry::start().await.unwrap();
    let built = Arc::new(AtomicUsize::new(0));
    let counter = built.clone();
    fake.route(
        "/v2/gen/manifests/1",
        Behavior::generated(move || {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            Behavior::body(200, "text/plain", format!("answer {n}"))
        }),
    );
    fake.route(
        "/v2/huge/manifests/1",
        Behavior::huge_platform_index("architecture", 100_000, 7),
    );
    let client = client();
    for expected in ["answer 0", "answer 1"] {
        let body = client
            .get(format!("{}/v2/gen/manifests/1", fake.base_url()))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(body, expected);
    }
    assert_eq!(built.load(Ordering::SeqCst), 2);
    let huge = client
        .get(format!("{}/v2/huge/manifests/1", fake.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(huge.headers()["content-type"], OCI_INDEX);
    let index: serde_json::Value = huge.json().await.unwrap();
    let platform = &index["manifests"][0]["platform"];
    let arch = platform["architecture"].as_str().unwrap();
    assert_eq!(arch.len(), 100_000);
    assert!(arch.starts_with("00000007"));
    assert_eq!(platform["os"], "linux");
}

#[tokio::test]
async fn fan_out_trees_foreign_challenges_and_in_flight_counts() {
    let fake = FakeRegistry::start().await.unwrap();
    let fan_out = fake.script_fan_out("fan", "1", 3, 2);
    assert_eq!(fan_out.indexes, 1 + 3 + 9);
    let client = client();
    let get = |path: String| client.get(format!("{}{path}", fake.base_url())).send();
    let top: serde_json::Value = get("/v2/fan/manifests/1".into())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let entries = top["manifests"].as_array().unwrap();
    assert_eq!(entries.len(), 3);
    assert!(entries.iter().all(|e| e.get("platform").is_none()));
    let child = get(format!(
        "/v2/fan/manifests/{}",
        entries[0]["digest"].as_str().unwrap()
    ))
    .await
    .unwrap();
    assert_eq!(child.status(), 200);

    let realm = fake.script_foreign_challenge("moved", "1");
    let redirect = get("/v2/moved/manifests/1".into()).await.unwrap();
    assert_eq!(redirect.status(), 307);
    let location = redirect.headers()["location"].to_str().unwrap().to_owned();
    assert!(location.starts_with(&fake.other_base_url()), "{location}");
    let challenge = client.get(&location).send().await.unwrap();
    assert_eq!(challenge.status(), 401);
    let header = challenge.headers()["www-authenticate"].to_str().unwrap();
    assert!(
        header.contains(&format!("{}{realm}", fake.other_base_url())),
        "{header}"
    );
    assert!(fake
        .requests_to("/foreign/moved/manifests/1")
        .iter()
        .all(|r| r.listener == Listener::Other));

    fake.route(
        "/v2/slow/manifests/1",
        Behavior::status(200).delayed(Duration::from_millis(300)),
    );
    fake.reset_requests();
    assert_eq!(fake.max_in_flight(), 0);
    let (a, b) = tokio::join!(
        get("/v2/slow/manifests/1".into()),
        get("/v2/slow/manifests/1".into())
    );
    assert_eq!(a.unwrap().status(), 200);
    assert_eq!(b.unwrap().status(), 200);
    assert_eq!(fake.max_in_flight(), 2);
}

/// Reads up to the end of a request head.
async fn read_head<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).await.unwrap(), 1, "closed early");
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

#[tokio::test]
async fn a_stalled_client_sends_then_never_reads() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let request = StalledClient::post(&addr.to_string(), "/mutate", b"{}");
    let (client, accepted) = tokio::join!(StalledClient::tcp(addr, &request, 3), listener.accept());
    let client = client.unwrap();
    assert_eq!(client.sent(), 3);
    let (mut server, _) = accepted.unwrap();
    assert!(read_head(&mut server)
        .await
        .starts_with("POST /mutate HTTP/1.1\r\n"));
    // The server's writes stop after the socket buffers fill: the client reads nothing.
    let chunk = vec![b'x'; 64 * 1024];
    let mut written = 0usize;
    loop {
        match server.try_write(&chunk) {
            Ok(n) => written += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("{e}"),
        }
        assert!(written < 64 * 1024 * 1024, "the client is reading");
    }
    drop(client);

    // Over TLS: the request arrives after the handshake.
    let ca = TestCa::new().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(
        ca.loopback_cert().unwrap().server_config().unwrap(),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = async {
        let (stream, _) = listener.accept().await.unwrap();
        let mut tls = acceptor.accept(stream).await.unwrap();
        read_head(&mut tls).await
    };
    let (client, head) = tokio::join!(
        StalledClient::tls(addr, "localhost", &ca, &request, 1),
        server
    );
    assert_eq!(client.unwrap().sent(), 1);
    assert!(head.starts_with("POST /mutate HTTP/1.1\r\n"), "{head}");
}

#[tokio::test]
async fn the_connect_proxy_records_targets_and_tunnels_to_loopback() {
    let fake = FakeRegistry::start().await.unwrap();
    let port = fake.host().rsplit_once(':').unwrap().1.to_owned();
    let proxy = ConnectProxy::start().await.unwrap();
    let proxy_addr = proxy.url().trim_start_matches("http://").to_owned();

    let mut tunnel = tokio::net::TcpStream::connect(&proxy_addr).await.unwrap();
    tunnel
        .write_all(
            format!("CONNECT anything.test:{port} HTTP/1.1\r\nhost: anything.test:{port}\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    assert!(read_head(&mut tunnel).await.starts_with("HTTP/1.1 200"));
    tunnel
        .write_all(b"GET /v2/ HTTP/1.1\r\nhost: anything.test\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    tunnel.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(fake.requests_to("/v2/").len(), 1);

    let mut plain = tokio::net::TcpStream::connect(&proxy_addr).await.unwrap();
    plain
        .write_all(b"GET http://x.test/ HTTP/1.1\r\nhost: x.test\r\n\r\n")
        .await
        .unwrap();
    assert!(read_head(&mut plain).await.starts_with("HTTP/1.1 405"));
    assert_eq!(proxy.targets(), [format!("anything.test:{port}")]);
}
