//! A loopback HTTP(S) server answering with a scripted handler and recording every request: the
//! stand-in for the clouds' identity services, which no real component can replace on loopback.
//! A reply may also stream a body without end or drip it byte by byte (hostile services).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, Full, Limited, StreamBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// One request as the fake saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body's `application/x-www-form-urlencoded` field `name`.
    pub fn form(&self, name: &str) -> Option<String> {
        url::form_urlencoded::parse(&self.body)
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    }
}

/// The fake's answer: status, headers, body.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    /// Sent after `body`, when set.
    pub then: Option<Stream>,
}

/// A body sent in parts after the reply's `body`.
#[derive(Clone, Copy, Debug)]
pub enum Stream {
    /// 64 KiB chunks until the client goes (at most 1 GiB).
    Endless,
    /// One byte (`{`, then spaces) per interval until the client goes (at most 10 minutes).
    Drip(std::time::Duration),
}

impl Reply {
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: body.into(),
            then: None,
        }
    }

    /// `body`, then `stream`.
    pub fn streaming(status: u16, body: impl Into<Vec<u8>>, stream: Stream) -> Self {
        Self {
            then: Some(stream),
            ..Self::new(status, body)
        }
    }

    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }
}

type Handler = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// A running fake; dropping it stops it.
pub struct Fake {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: JoinHandle<()>,
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Fake {
    /// Serve `handler` on `127.0.0.1:0`, over TLS when `tls` is given.
    pub async fn start(
        tls: Option<rustls::ServerConfig>,
        handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static,
    ) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let handler: Handler = Arc::new(handler);
        let acceptor = tls.map(|c| tokio_rustls::TlsAcceptor::from(Arc::new(c)));
        let task = tokio::spawn({
            let seen = seen.clone();
            async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let (seen, handler, acceptor) =
                        (seen.clone(), handler.clone(), acceptor.clone());
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |request| {
                            let (seen, handler) = (seen.clone(), handler.clone());
                            async move { Ok::<_, Infallible>(answer(request, &seen, &handler).await) }
                        });
                        let http = hyper::server::conn::http1::Builder::new();
                        match acceptor {
                            Some(acceptor) => {
                                if let Ok(tls) = acceptor.accept(stream).await {
                                    let _ = http.serve_connection(TokioIo::new(tls), service).await;
                                }
                            }
                            None => {
                                let _ = http.serve_connection(TokioIo::new(stream), service).await;
                            }
                        }
                    });
                }
            }
        });
        Ok(Self { addr, seen, task })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn count(&self) -> usize {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

type Body = UnsyncBoxBody<Bytes, Infallible>;

/// `first`, then what `stream` sends.
fn body(first: Vec<u8>, stream: Option<Stream>) -> Body {
    let Some(stream) = stream else {
        return Full::new(Bytes::from(first)).boxed_unsync();
    };
    let first = futures::stream::once(async move { Bytes::from(first) });
    let rest: futures::stream::BoxStream<'static, Bytes> = match stream {
        Stream::Endless => {
            let chunk = Bytes::from(vec![b' '; 64 * 1024]);
            Box::pin(futures::stream::repeat(chunk).take(16 * 1024))
        }
        Stream::Drip(interval) => Box::pin(
            futures::stream::unfold((), move |()| async move {
                tokio::time::sleep(interval).await;
                Some((Bytes::from_static(b" "), ()))
            })
            .take(usize::try_from(600 / interval.as_secs().max(1)).unwrap_or(600)),
        ),
    };
    let frames = first
        .chain(rest)
        .map(|chunk| Ok::<_, Infallible>(hyper::body::Frame::data(chunk)));
    http_body_util::BodyExt::boxed_unsync(StreamBody::new(frames))
}

async fn answer(
    request: http::Request<Incoming>,
    seen: &Mutex<Vec<Seen>>,
    handler: &Handler,
) -> http::Response<Body> {
    let (parts, incoming) = request.into_parts();
    let received = match Limited::new(incoming, 1 << 20).collect().await {
        Ok(collected) => collected.to_bytes().to_vec(),
        Err(_) => Vec::new(),
    };
    let request = Seen {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        headers: parts.headers,
        body: received,
    };
    let reply = handler(&request);
    seen.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(request);
    let mut response = http::Response::new(body(reply.body, reply.then));
    *response.status_mut() =
        http::StatusCode::from_u16(reply.status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    for (name, value) in reply.headers {
        if let Ok(value) = http::HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}
