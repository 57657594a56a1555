//! Layer bodies read over a connection of their own, with a bounded read buffer.
//!
//! reqwest's connections read with hyper's adaptive buffer, which grows to about 408 KiB
//! under a sender faster than its reader (a registry serving a layer to a verification that
//! inflates it): each chunk of the body is a slice of one such buffer, and every chunk on its
//! way from the network to the verification's thread keeps its whole buffer alive. A layer
//! is therefore read here over HTTP/1.1 with hyper's read buffer capped at [`READ_BUFFER`],
//! on a connection opened for that one request and closed with its body.
//!
//! Only the connection differs from every other request: the request itself goes through
//! [`super::Http`]'s exchange (limiter, breaker, request budget, redirects and their
//! `Authorization` rule, metrics, timeout), the address comes from the guard's resolver, and
//! TLS uses the client's own configuration (roots, containerd host files, client
//! certificates), offering HTTP/1.1 only. A layer behind an HTTP(S) proxy is read through the
//! shared client instead (the proxy is reqwest's).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HOST, USER_AGENT};
use http::{HeaderMap, HeaderValue};
use http_body_util::{BodyExt as _, Empty};
use hyper_util::rt::TokioIo;
use reqwest::dns::{Name, Resolve as _};
use tokio::net::TcpStream;
use url::{Position, Url};

use crate::ssrf::Guard;

/// The most a layer's connection reads at once, so the most one chunk of its body holds.
pub const READ_BUFFER: usize = 32 * 1024;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a layer's request failed before its answer.
#[derive(Debug)]
pub(crate) enum Failure {
    /// No connection: the name resolved to nothing allowed, or no address answered in time.
    Connect(BoxError),
    /// Connected, then the TLS handshake or the HTTP exchange failed.
    Exchange(BoxError),
}

/// Opens layer connections for one TLS configuration.
#[derive(Clone, Debug)]
pub(crate) struct Blobs {
    tls: Arc<rustls::ClientConfig>,
    guard: Guard,
    connect_timeout: Duration,
}

impl Blobs {
    /// `tls`: the client's configuration (its ALPN narrowed to HTTP/1.1 here).
    pub fn new(mut tls: rustls::ClientConfig, guard: &Guard, connect_timeout: Duration) -> Self {
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Self {
            tls: Arc::new(tls),
            guard: guard.clone(),
            connect_timeout,
        }
    }

    /// GETs `url` with `headers`; the body, unread, ends with an error once `deadline` passes.
    pub async fn get(
        &self,
        url: &Url,
        headers: &HeaderMap,
        deadline: tokio::time::Instant,
    ) -> Result<reqwest::Response, Failure> {
        let tcp = self.connect(url).await?;
        if url.scheme() != "https" {
            return send(TokioIo::new(tcp), url, headers, deadline).await;
        }
        let name = server_name(url).map_err(Failure::Exchange)?;
        let tls = tokio_rustls::TlsConnector::from(self.tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|error| Failure::Exchange(Box::new(error)))?;
        send(TokioIo::new(tls), url, headers, deadline).await
    }

    /// A TCP connection to the first of the host's allowed addresses that answers within the
    /// connect timeout (names resolved through the guard; IP literals were checked before).
    async fn connect(&self, url: &Url) -> Result<TcpStream, Failure> {
        let port = url.port_or_known_default().unwrap_or(443);
        let addresses: Vec<SocketAddr> = match url.host() {
            Some(url::Host::Ipv4(ip)) => vec![SocketAddr::new(ip.into(), port)],
            Some(url::Host::Ipv6(ip)) => vec![SocketAddr::new(ip.into(), port)],
            Some(url::Host::Domain(host)) => {
                let name: Name = host
                    .parse()
                    .map_err(|_| Failure::Connect(format!("{host:?} is not a host name").into()))?;
                let resolving = self.guard.resolver().resolve(name);
                match tokio::time::timeout(self.connect_timeout, resolving).await {
                    Ok(Ok(addresses)) => addresses
                        .map(|address| SocketAddr::new(address.ip(), port))
                        .collect(),
                    Ok(Err(error)) => return Err(Failure::Connect(error)),
                    Err(_) => return Err(Failure::Connect("resolving timed out".into())),
                }
            }
            None => return Err(Failure::Connect("no host".into())),
        };
        let attempts = async {
            let mut last = std::io::Error::other("no address");
            for address in addresses {
                match TcpStream::connect(address).await {
                    Ok(stream) => return Ok(stream),
                    Err(error) => last = error,
                }
            }
            Err(last)
        };
        match tokio::time::timeout(self.connect_timeout, attempts).await {
            Ok(Ok(stream)) => {
                // Requests are written whole; Nagle would only delay them.
                let _ = stream.set_nodelay(true);
                Ok(stream)
            }
            Ok(Err(error)) => Err(Failure::Connect(Box::new(error))),
            Err(_) => Err(Failure::Connect("connecting timed out".into())),
        }
    }
}

fn server_name(url: &Url) -> Result<rustls_pki_types::ServerName<'static>, BoxError> {
    match url.host() {
        Some(url::Host::Domain(host)) => {
            Ok(rustls_pki_types::ServerName::try_from(host)?.to_owned())
        }
        Some(url::Host::Ipv4(ip)) => Ok(std::net::IpAddr::from(ip).into()),
        Some(url::Host::Ipv6(ip)) => Ok(std::net::IpAddr::from(ip).into()),
        None => Err("no host".into()),
    }
}

/// The request over `io`; its answer with the body left to read. The connection is driven by
/// a task that ends with the body (read to its end, or dropped).
async fn send<I>(
    io: I,
    url: &Url,
    headers: &HeaderMap,
    deadline: tokio::time::Instant,
) -> Result<reqwest::Response, Failure>
where
    I: hyper::rt::Read + hyper::rt::Write + Send + Unpin + 'static,
{
    let failed = |error: hyper::Error| Failure::Exchange(Box::new(error));
    let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
        .max_buf_size(READ_BUFFER)
        .handshake::<_, Empty<Bytes>>(io)
        .await
        .map_err(failed)?;
    let (body_alive, body_gone) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        tokio::select! {
            ended = connection => {
                if let Err(error) = ended {
                    tracing::debug!(%error, "layer connection failed");
                }
            }
            _ = body_gone => {}
        }
    });
    let mut request = http::Request::new(Empty::new());
    *request.uri_mut() = url[Position::BeforePath..Position::AfterQuery]
        .parse()
        .map_err(|error: http::uri::InvalidUri| Failure::Exchange(Box::new(error)))?;
    *request.headers_mut() = headers.clone();
    let host = HeaderValue::from_str(&url[Position::BeforeHost..Position::AfterPort])
        .map_err(|error| Failure::Exchange(Box::new(error)))?;
    request.headers_mut().insert(HOST, host);
    request
        .headers_mut()
        .insert(USER_AGENT, HeaderValue::from_static(super::NOE_USER_AGENT));
    let answer = sender.send_request(request).await.map_err(failed)?;
    let (parts, body) = answer.into_parts();
    let chunks = futures::stream::unfold(Some((body, body_alive)), move |state| async move {
        let (mut body, alive) = state?;
        loop {
            let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
                Err(_) => {
                    let late: BoxError = "the layer's body did not end in time".into();
                    return Some((Err(late), None));
                }
                Ok(None) => return None,
                Ok(Some(Err(error))) => return Some((Err(BoxError::from(error)), None)),
                Ok(Some(Ok(frame))) => frame,
            };
            if let Ok(data) = frame.into_data() {
                return Some((Ok(data), Some((body, alive))));
            }
        }
    });
    Ok(reqwest::Response::from(http::Response::from_parts(
        parts,
        reqwest::Body::wrap_stream(chunks),
    )))
}

#[cfg(test)]
mod tests;
