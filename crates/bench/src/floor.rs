//! The floor: the least an HTTPS admission server on our TLS stack can do. Same stack as `noe`
//! (hyper 1 auto builder, HTTP/1.1 header-read timeout, tokio-rustls with ring, ALPN h2 and
//! http/1.1, TCP_NODELAY), parses the request body as JSON, answers a constant AdmissionReview;
//! for the lookup endpoint, a constant body given as a file (`--response`): the endpoint's own
//! answer to the benchmark's request, so both send the same bytes and the comparison measures
//! the work between them, not the size of the answer.
//!
//! Two floors ([`Work`]): `parse` builds the request as a JSON value (what any server that reads
//! the review does); `read` only reads the body, cuts the request's uid out of it by a byte
//! search and answers with that uid in place (what TLS and HTTP alone cost on this stack: the
//! limit of any admission server here).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

const RESPONSE: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"00000000-0000-0000-0000-000000000000","allowed":true}}"#;
const MAX_BODY: usize = 8 * 1024 * 1024;
/// What precedes the uid of a request and of a response.
const UID: &[u8] = b"\"uid\":\"";

/// What the floor does with a request body before it answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Work {
    /// Parses it into a JSON value, answers the constant body.
    Parse,
    /// Reads it, parses nothing: its first uid is cut out by a byte search and written into the
    /// answer in place of the answer's own.
    Read,
}

impl Work {
    pub fn name(self) -> &'static str {
        match self {
            Self::Parse => "parse",
            Self::Read => "read",
        }
    }
}

/// The constant answer, whole and split around its uid (all of it in `head` when it has none).
#[derive(Clone)]
struct Answer {
    whole: Bytes,
    head: Bytes,
    tail: Bytes,
}

impl Answer {
    fn new(whole: Bytes) -> Self {
        let split = memchr::memmem::find(&whole, UID).and_then(|at| {
            let start = at + UID.len();
            let len = memchr::memchr(b'"', whole.get(start..)?)?;
            Some((start, start + len))
        });
        let (head, tail) = match split {
            Some((start, end)) => (whole.slice(..start), whole.slice(end..)),
            None => (whole.clone(), Bytes::new()),
        };
        Self { whole, head, tail }
    }

    /// The body with `uid` in place of its own.
    fn with_uid(&self, uid: &[u8]) -> Bytes {
        let mut out = Vec::with_capacity(self.head.len() + uid.len() + self.tail.len());
        out.extend_from_slice(&self.head);
        out.extend_from_slice(uid);
        out.extend_from_slice(&self.tail);
        Bytes::from(out)
    }
}

/// The first uid in `body` (the request's: the apiserver writes it first), as sent.
fn uid_of(body: &[u8]) -> Option<&[u8]> {
    let start = memchr::memmem::find(body, UID)? + UID.len();
    let rest = body.get(start..)?;
    rest.get(..memchr::memchr(b'"', rest)?)
}

/// Reads `tls.crt` / `tls.key` from `cert_dir` into a rustls server config like noe's.
pub fn server_config(cert_dir: &Path) -> anyhow::Result<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(cert_dir.join("tls.crt"))
        .context("reading tls.crt")?
        .collect::<Result<Vec<_>, _>>()
        .context("parsing tls.crt")?;
    let key = PrivateKeyDer::from_pem_file(cert_dir.join("tls.key")).context("reading tls.key")?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Serves until the process is killed, answering `response`'s bytes (default [`RESPONSE`]).
pub async fn serve(
    addr: SocketAddr,
    cert_dir: &Path,
    response: Option<&Path>,
    work: Work,
) -> anyhow::Result<()> {
    let response = match response {
        Some(path) => {
            Bytes::from(std::fs::read(path).with_context(|| format!("reading {}", path.display()))?)
        }
        None => Bytes::from_static(RESPONSE.as_bytes()),
    };
    let response = Answer::new(response);
    let acceptor = TlsAcceptor::from(Arc::new(server_config(cert_dir)?));
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(10));
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let builder = builder.clone();
        let response = response.clone();
        tokio::spawn(async move {
            let Ok(Ok(tls)) =
                tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await
            else {
                return;
            };
            let service =
                hyper::service::service_fn(move |request| answer(request, response.clone(), work));
            let _ = builder.serve_connection(TokioIo::new(tls), service).await;
        });
    }
}

async fn answer(
    request: Request<Incoming>,
    answer: Answer,
    work: Work,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (status, response_body) = match Limited::new(request.into_body(), MAX_BODY).collect().await
    {
        Ok(body) => {
            let body = body.to_bytes();
            match work {
                Work::Parse => match serde_json::from_slice::<serde_json::Value>(&body) {
                    Ok(_) => (StatusCode::OK, answer.whole),
                    Err(_) => (StatusCode::BAD_REQUEST, Bytes::new()),
                },
                Work::Read => match uid_of(&body) {
                    Some(uid) => (StatusCode::OK, answer.with_uid(uid)),
                    None => (StatusCode::BAD_REQUEST, Bytes::new()),
                },
            }
        }
        Err(_) => (StatusCode::PAYLOAD_TOO_LARGE, Bytes::new()),
    };
    let mut response = Response::new(Full::new(response_body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}
