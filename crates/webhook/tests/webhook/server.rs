//! The HTTPS listener with a trivial handler: routes, limits, certificate rotation, drain.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cert_dir;
use bytes::Bytes;
use noe_test_support::{https_client, write_cert_dir, TestCa};
use noe_webhook::server::tls::{CertDir, Reloadable, Reloads};
use noe_webhook::server::{self, Addresses, BodyLimits, Handler, Limits, Running};
use rustls_pki_types::pem::PemObject;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

/// Echoes the body back, counting calls; with a gate, each call first says it entered and
/// waits until the test lets it through.
#[derive(Default)]
struct Echo {
    calls: AtomicUsize,
    gate: Option<(tokio::sync::Notify, tokio::sync::Semaphore)>,
}

impl Echo {
    fn gated() -> Self {
        Self {
            gate: Some((tokio::sync::Notify::new(), tokio::sync::Semaphore::new(0))),
            ..Self::default()
        }
    }
}

impl Handler for Echo {
    async fn handle(&self, body: Bytes) -> Bytes {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some((entered, release)) = &self.gate {
            entered.notify_one();
            let _ = release.acquire().await.unwrap();
        }
        if body.as_ref() == b"panic" {
            panic!("scripted bug");
        }
        body
    }

    fn recover(&self, body: &[u8]) -> Bytes {
        let mut answer = b"recovered: ".to_vec();
        answer.extend_from_slice(body);
        Bytes::from(answer)
    }
}

fn loopback() -> Addresses {
    let any = "127.0.0.1:0".parse().unwrap();
    Addresses {
        webhook: any,
        metrics: any,
        health: any,
    }
}

async fn start(dir: &std::path::Path, handler: Arc<Echo>, limits: Limits) -> Running {
    start_with(dir, handler, limits, BodyLimits::default())
        .await
        .0
}

/// The server, and the certificate reloads to wait on.
async fn start_with(
    dir: &std::path::Path,
    handler: Arc<Echo>,
    limits: Limits,
    body: BodyLimits,
) -> (Running, watch::Receiver<Reloads>) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (watched, key) = CertDir::load(dir).unwrap();
    let tls = Reloadable::new(key);
    let reloads = tls.reloads();
    tokio::spawn(watched.watch(tls.clone(), Duration::from_millis(50)));
    let running = server::start(
        loopback(),
        tls,
        server::admission_routes(handler, body),
        limits,
        prometheus::Registry::new(),
    )
    .await
    .unwrap();
    (running, reloads)
}

/// Waits (bounded) until the certificate watcher has done what `done` says.
async fn reloaded(reloads: &mut watch::Receiver<Reloads>, done: impl FnMut(&Reloads) -> bool) {
    tokio::time::timeout(Duration::from_secs(10), reloads.wait_for(done))
        .await
        .expect("the certificate watcher saw the change")
        .unwrap();
}

fn url(running: &Running, path: &str) -> String {
    format!("https://localhost:{}{path}", running.webhook_addr.port())
}

#[tokio::test]
async fn routes_probes_and_metrics() {
    let (dir, ca) = cert_dir("ca");
    let echo = Arc::new(Echo::default());
    let running = start(dir.path(), echo.clone(), Limits::default()).await;
    let client = https_client(&[&ca]).unwrap();

    let answer = client
        .post(url(&running, "/mutate"))
        .body("{\"hello\":1}")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["content-type"], "application/json");
    assert_eq!(answer.text().await.unwrap(), "{\"hello\":1}");

    for (path, status) in [("/", 404), ("/mutate/x", 404), ("/metrics", 404)] {
        let got = client.post(url(&running, path)).send().await.unwrap();
        assert_eq!(got.status(), status, "{path}");
    }
    let got = client.get(url(&running, "/mutate")).send().await.unwrap();
    assert_eq!(got.status(), 405);
    assert_eq!(echo.calls.load(Ordering::SeqCst), 1);

    let plain = reqwest::Client::new();
    let health = |path: &str| format!("http://{}{path}", running.health_addr);
    assert_eq!(
        plain.get(health("/healthz")).send().await.unwrap().status(),
        200
    );
    assert_eq!(
        plain.get(health("/readyz")).send().await.unwrap().status(),
        200
    );
    assert_eq!(
        plain.get(health("/nope")).send().await.unwrap().status(),
        404
    );
    let metrics = format!("http://{}/metrics", running.metrics_addr);
    assert_eq!(plain.get(&metrics).send().await.unwrap().status(), 200);

    // HTTP/2 (ALPN h2), as the apiserver may negotiate.
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(ca.cert_pem().as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let h2 = reqwest::Client::builder()
        .use_preconfigured_tls(config)
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let answer = h2
        .post(url(&running, "/mutate"))
        .body("{\"h2\":true}")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.version(), reqwest::Version::HTTP_2);
    assert_eq!(answer.text().await.unwrap(), "{\"h2\":true}");

    running.shutdown().await;
}

#[tokio::test]
async fn oversized_bodies_are_refused_without_being_read() {
    let (dir, ca) = cert_dir("ca");
    let echo = Arc::new(Echo::default());
    let running = start(dir.path(), echo.clone(), Limits::default()).await;
    let client = https_client(&[&ca]).unwrap();

    // Exactly 8 MiB is accepted.
    let body = vec![b' '; server::MAX_BODY_BYTES];
    let got = client
        .post(url(&running, "/mutate"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), 200);
    assert_eq!(got.bytes().await.unwrap().len(), server::MAX_BODY_BYTES);

    // A declared length above the limit is answered before the body is sent at all: the raw
    // client writes only the headers and still gets 413.
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(ca.cert_pem().as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(running.webhook_addr)
        .await
        .unwrap();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    tls.write_all(
        format!(
            "POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            server::MAX_BODY_BYTES + 1
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut head = vec![0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), tls.read(&mut head))
        .await
        .expect("answered without the body")
        .unwrap();
    let head = String::from_utf8_lossy(&head[..n]).to_string();
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    // The server closes that connection instead of waiting for the body.
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "connection left open");

    // A chunked body (no declared length) is cut at the limit.
    let chunks: Vec<Result<Bytes, std::io::Error>> = (0..9)
        .map(|_| Ok(Bytes::from(vec![b' '; 1024 * 1024 + 1])))
        .collect();
    let streamed = reqwest::Body::wrap_stream(futures::stream::iter(chunks));
    match client
        .post(url(&running, "/mutate"))
        .body(streamed)
        .send()
        .await
    {
        Ok(response) => assert_eq!(response.status(), 413),
        Err(error) => assert!(!error.is_timeout(), "{error}"),
    }
    assert_eq!(
        echo.calls.load(Ordering::SeqCst),
        1,
        "the handler saw only the 8 MiB body"
    );
    drop(client);
    let started = Instant::now();
    running.shutdown().await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "drain waited on a refused body"
    );
}

#[tokio::test]
async fn certificate_rotation_without_failed_requests() {
    let dir = tempfile::tempdir().unwrap();
    let old_ca = TestCa::with_name("old").unwrap();
    let new_ca = TestCa::with_name("new").unwrap();
    write_cert_dir(&old_ca, dir.path()).unwrap();
    let echo = Arc::new(Echo::default());
    let (running, mut reloads) = start_with(
        dir.path(),
        echo.clone(),
        Limits::default(),
        BodyLimits::default(),
    )
    .await;
    let running = Arc::new(running);

    let both = https_client(&[&old_ca, &new_ca]).unwrap();
    let only_old = https_client(&[&old_ca]).unwrap();
    let only_new = https_client(&[&new_ca]).unwrap();
    let mutate = url(&running, "/mutate");
    assert!(only_old.post(&mutate).body("{}").send().await.is_ok());
    assert!(only_new.post(&mutate).body("{}").send().await.is_err());

    // Requests keep flowing on fresh connections while the files are replaced.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let (both, mutate, stop) = (both.clone(), mutate.clone(), stop.clone());
        tokio::spawn(async move {
            let (mut ok, mut failed) = (0u32, Vec::new());
            while !stop.load(Ordering::SeqCst) && ok < 10_000 {
                match both.post(&mutate).body("{}").send().await {
                    Ok(r) if r.status() == 200 => ok += 1,
                    Ok(r) => failed.push(r.status().to_string()),
                    Err(e) => failed.push(e.to_string()),
                }
            }
            (ok, failed)
        })
    };

    // A broken pair first: the watcher sees it and rejects it; the old certificate keeps
    // serving.
    std::fs::write(dir.path().join("tls.crt"), "garbage").unwrap();
    reloaded(&mut reloads, |r| r.rejected > 0).await;
    assert_eq!(reloads.borrow().loaded, 0, "the garbage was not loaded");
    assert!(only_old.post(&mutate).body("{}").send().await.is_ok());
    assert!(only_new.post(&mutate).body("{}").send().await.is_err());

    write_cert_dir(&new_ca, dir.path()).unwrap();
    reloaded(&mut reloads, |r| r.loaded == 1).await;
    assert!(only_new.post(&mutate).body("{}").send().await.is_ok());
    assert!(only_old.post(&mutate).body("{}").send().await.is_err());
    stop.store(true, Ordering::SeqCst);
    let (ok, failed) = load.await.unwrap();
    assert!(ok > 0);
    assert!(failed.is_empty(), "failed during rotation: {failed:?}");
    Arc::try_unwrap(running).unwrap().shutdown().await;
}

#[tokio::test]
async fn shutdown_drains_requests_in_flight() {
    let (dir, ca) = cert_dir("ca");
    let echo = Arc::new(Echo::gated());
    let running = start(dir.path(), echo.clone(), Limits::default()).await;
    let client = https_client(&[&ca]).unwrap();
    let mutate = url(&running, "/mutate");
    let health = format!("http://{}/readyz", running.health_addr);
    let in_flight = tokio::spawn(async move { client.post(&mutate).body("{}").send().await });
    let (entered, release) = echo.gate.as_ref().unwrap();
    entered.notified().await;
    let readiness = running.readiness.clone();
    let mut shutdown = tokio::spawn(running.shutdown());
    // Draining: no longer ready, and waiting for the request in flight.
    let not_ready = async {
        while readiness.is_ready() {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), not_ready)
        .await
        .expect("not ready once draining");
    assert!(
        tokio::time::timeout(Duration::from_millis(50), &mut shutdown)
            .await
            .is_err(),
        "the shutdown waits for the request in flight"
    );
    release.add_permits(1);
    shutdown.await.unwrap();
    let answer = in_flight.await.unwrap().unwrap();
    assert_eq!(answer.status(), 200);
    assert!(reqwest::get(&health).await.is_err(), "probe server stopped");
}

/// Writes a pair the way the kubelet updates a Secret volume: a timestamped directory, an
/// atomically swapped `..data` symlink, and `tls.crt`/`tls.key` symlinks through it.
#[cfg(unix)]
fn kubelet_write(dir: &std::path::Path, ca: &TestCa, generation: u32) {
    let leaf = ca.loopback_cert().unwrap();
    let data = dir.join(format!("..gen_{generation}"));
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("tls.crt"), leaf.cert_pem).unwrap();
    std::fs::write(data.join("tls.key"), leaf.key_pem).unwrap();
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(data.file_name().unwrap(), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    for name in ["tls.crt", "tls.key"] {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), &link).unwrap();
        }
    }
}

#[cfg(unix)]
#[tokio::test]
async fn kubelet_style_symlink_swap_is_picked_up() {
    let dir = tempfile::tempdir().unwrap();
    let old_ca = TestCa::with_name("old").unwrap();
    let new_ca = TestCa::with_name("new").unwrap();
    kubelet_write(dir.path(), &old_ca, 1);
    let (running, mut reloads) = start_with(
        dir.path(),
        Arc::new(Echo::default()),
        Limits::default(),
        BodyLimits::default(),
    )
    .await;
    let mutate = url(&running, "/mutate");
    assert!(https_client(&[&old_ca])
        .unwrap()
        .post(&mutate)
        .send()
        .await
        .is_ok());

    kubelet_write(dir.path(), &new_ca, 2);
    reloaded(&mut reloads, |r| r.loaded == 1).await;
    let only_new = https_client(&[&new_ca]).unwrap();
    assert!(only_new.post(&mutate).send().await.is_ok());
    running.shutdown().await;
}

/// A raw TLS connection to the webhook port, trusting `ca`, offering `alpn`.
async fn tls_connect(
    running: &Running,
    ca: &TestCa,
    alpn: &[&[u8]],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let mut config = ca.client_config().unwrap();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(running.webhook_addr)
        .await
        .unwrap();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    connector.connect(name, tcp).await.unwrap()
}

fn post(body: &str) -> String {
    format!(
        "POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test]
async fn idle_connections_are_closed() {
    let (dir, ca) = cert_dir("ca");
    let limits = Limits {
        idle_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let running = start(dir.path(), Arc::new(Echo::default()), limits).await;

    // A connection that never sends a request, and one idle after its answer: both closed.
    let mut silent = tls_connect(&running, &ca, &[b"http/1.1"]).await;
    let mut used = tls_connect(&running, &ca, &[b"http/1.1"]).await;
    used.write_all(post("{}").as_bytes()).await.unwrap();
    for (name, stream) in [("silent", &mut silent), ("used", &mut used)] {
        let mut seen = Vec::new();
        // Well before the 10 s header-read timeout could close it.
        let closed =
            tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut seen)).await;
        assert!(closed.is_ok(), "{name}: the idle connection stayed open");
        if name == "used" {
            assert!(
                String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"),
                "the answer came before the close"
            );
        }
    }
    running.shutdown().await;
}

#[tokio::test]
async fn a_client_that_never_reads_is_closed_after_the_write_timeout() {
    let (dir, ca) = cert_dir("ca");
    let limits = Limits {
        write_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let echo = Arc::new(Echo::default());
    let running = start(dir.path(), echo.clone(), limits).await;

    // Pipelined requests whose echoed answers (64 × 256 KiB) exceed what the socket buffers
    // hold: the server's writes stall while the client reads nothing.
    let body = " ".repeat(256 * 1024);
    let requests = 64;
    let mut stream = tls_connect(&running, &ca, &[b"http/1.1"]).await;
    let (mut reader, mut writer) = tokio::io::split(&mut stream);
    let send = async {
        for _ in 0..requests {
            if writer.write_all(post(&body).as_bytes()).await.is_err() {
                break;
            }
        }
    };
    // The writes may block on the server's unread answers; bound them.
    let _ = tokio::time::timeout(Duration::from_secs(5), send).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Now read: the answers stop short of all 64 and the connection ends.
    let mut seen = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the stalled connection was never closed");
    assert!(
        seen.len() < requests * body.len(),
        "every answer was delivered: the writes never stalled"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn an_oversized_http2_stream_is_refused_alone() {
    let (dir, ca) = cert_dir("ca");
    let body = BodyLimits {
        max_bytes: 64 * 1024,
        ..BodyLimits::default()
    };
    let (running, _) = start_with(
        dir.path(),
        Arc::new(Echo::default()),
        Limits::default(),
        body,
    )
    .await;
    let tls = tls_connect(&running, &ca, &[b"h2"]).await;
    let (mut sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    let request = |body: Vec<u8>| {
        http::Request::post("https://localhost/mutate")
            .body(http_body_util::Full::new(Bytes::from(body)))
            .unwrap()
    };
    let big = sender.send_request(request(vec![b' '; 1024 * 1024]));
    let small = sender
        .clone()
        .send_request(request(b"{\"small\":1}".to_vec()));
    let (big, small) = tokio::join!(big, small);
    assert_eq!(big.unwrap().status(), 413);
    assert_eq!(small.unwrap().status(), 200);
    // The same connection still answers, well after a refused HTTP/1.1 connection would close.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let again = sender.send_request(request(b"{}".to_vec())).await.unwrap();
    assert_eq!(again.status(), 200);
    running.shutdown().await;
}

/// The value of the sample of `name` whose labels include every pair of `labels`, in a scrape.
pub(crate) fn sample(scrape: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.rsplit_once(' '))
        .filter(|(series, _)| {
            series
                .strip_prefix(name)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('{'))
                && labels
                    .iter()
                    .all(|(key, value)| series.contains(&format!("{key}=\"{value}\"")))
        })
        .filter_map(|(_, value)| value.parse::<f64>().ok())
        .sum()
}

/// One request on a kept HTTP/1.1 connection, and the start of its answer.
async fn exchange(stream: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>) -> String {
    stream.write_all(post("{}").as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = stream.read(&mut buf).await.unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// 1,100 plain TCP connections that never start TLS (the listener's 1024 slots and more), held
/// open from another loopback address and then from the client's own: a new client's admission
/// is answered well within the apiserver's 10 s webhook timeout each time, a keep-alive
/// connection made before goes on, and what was shed is counted.
#[tokio::test]
async fn connections_that_never_start_tls_do_not_keep_a_new_client_waiting() {
    let (dir, ca) = cert_dir("ca");
    let running = start(dir.path(), Arc::new(Echo::default()), Limits::default()).await;
    let client = https_client(&[&ca]).unwrap();
    let mut kept = tls_connect(&running, &ca, &[b"http/1.1"]).await;
    let mut answers = Vec::new();
    answers.push(exchange(&mut kept).await);
    let sources: [std::net::IpAddr; 2] =
        ["127.0.0.2".parse().unwrap(), "127.0.0.1".parse().unwrap()];
    let mut held = Vec::new();
    for source in sources {
        held.push(
            noe_test_support::silent_connections(running.webhook_addr, source, 1100)
                .await
                .unwrap(),
        );
        let started = Instant::now();
        let answered = tokio::time::timeout(
            Duration::from_secs(5),
            client.post(url(&running, "/mutate")).body("{}").send(),
        )
        .await;
        let answer = answered
            .unwrap_or_else(|_| panic!("from {source}: no answer within 5 s"))
            .unwrap();
        assert_eq!(answer.status(), 200);
        eprintln!(
            "a new client's request after 1,100 silent connections from {source}: {:?}",
            started.elapsed()
        );
        answers.push(exchange(&mut kept).await);
    }
    for answer in &answers {
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    let scrape = reqwest::get(format!("http://{}/metrics", running.metrics_addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let webhook = ("listener", "webhook");
    let limits = Limits::default();
    let handshaking = sample(
        &scrape,
        "noe_webhook_connections",
        &[webhook, ("state", "handshake")],
    );
    assert!(handshaking <= limits.max_handshakes as f64, "{scrape}");
    let shed = sample(&scrape, "noe_webhook_connections_shed_total", &[webhook]);
    let expected = (2 * 1100 - limits.max_handshakes) as f64;
    assert!(
        shed >= expected,
        "{shed} shed, expected {expected} at least: {scrape}"
    );
    assert!(
        sample(
            &scrape,
            "noe_webhook_connections_shed_total",
            &[webhook, ("reason", "source")]
        ) >= (1100 - limits.max_handshakes_per_source) as f64,
        "{scrape}"
    );
    drop(held);
    running.shutdown().await;
}

#[tokio::test]
async fn a_certificate_written_after_start_makes_the_server_ready() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let (watched, tls) = CertDir::open(dir.path()).unwrap();
    let mut reloads = tls.reloads();
    tokio::spawn(watched.watch(tls.clone(), Duration::from_millis(50)));
    let running = server::start(
        loopback(),
        tls,
        server::admission_routes(Arc::new(Echo::default()), BodyLimits::default()),
        Limits::default(),
        prometheus::Registry::new(),
    )
    .await
    .unwrap();
    let readyz = format!("http://{}/readyz", running.health_addr);
    let status = reqwest::get(&readyz).await.unwrap().status();
    assert_eq!(status, 503, "not ready without a certificate");

    let ca = TestCa::with_name("late").unwrap();
    let client = https_client(&[&ca]).unwrap();
    assert!(
        client.post(url(&running, "/mutate")).send().await.is_err(),
        "no handshake without a certificate"
    );
    write_cert_dir(&ca, dir.path()).unwrap();
    reloaded(&mut reloads, |r| r.loaded == 1).await;
    let status = reqwest::get(&readyz).await.unwrap().status();
    assert_eq!(status, 200, "ready once the certificate is loaded");
    let answer = client
        .post(url(&running, "/mutate"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    running.shutdown().await;
}
