//! A route whose requests are JSON bodies POSTed to a [`Handler`] (the admission at
//! [`super::MUTATE_PATH`]; the policy engines' lookup routes are the same shape): 405 for any
//! other method, 413 for a body above the limit (declared or read, on HTTP/1.1 and per HTTP/2
//! stream alike), 400 or 408 for a body that cannot be read in time, and otherwise the handler's
//! answer, which is always JSON (even for garbage input, even when the handler panicked).
//!
//! It knows nothing of the listener: the connection it came on, TLS, drain.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full, LengthLimitError, Limited};
use tower::Service;

use super::router::{text, Answer};

/// Admission request bodies above this are refused: the apiserver caps an object at 3 MiB and a
/// review may carry the object and its old version (docs/architecture.md, "Limits").
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// What answers the bodies of a [`Post`] route: always JSON (for the admission route, an
/// AdmissionReview), even for garbage input.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, body: Bytes) -> impl Future<Output = Bytes> + Send;

    /// The answer when [`Handler::handle`] panicked: a bug must not drop the apiserver's
    /// connection.
    fn recover(&self, body: &[u8]) -> Bytes;
}

/// Bounds on reading a body.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimits {
    /// Larger bodies are refused (413) without being read whole.
    pub max_bytes: usize,
    /// The whole body must arrive within this.
    pub read_timeout: Duration,
}

impl Default for BodyLimits {
    fn default() -> Self {
        Self {
            max_bytes: MAX_BODY_BYTES,
            read_timeout: Duration::from_secs(10),
        }
    }
}

/// The route's future: one box per request, holding the body read and the handler's future
/// (whose type an `async fn` in a trait cannot name).
pub type PostFuture = Pin<Box<dyn Future<Output = Result<Answer, Infallible>> + Send>>;

/// What answers the requests of one route, whatever their body; [`Answering`] makes it the
/// route's tower `Service`. [`Post`] is one, the policy engines' lookup routes are others.
pub trait Answerer: Clone + Send + Sync + 'static {
    fn answer<B>(&self, request: Request<B>) -> impl Future<Output = Answer> + Send
    where
        B: hyper::body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>;
}

/// The route of an [`Answerer`]: every request gets its answer (the service never fails).
#[derive(Clone, Debug)]
pub struct Answering<A>(pub A);

impl<A, B> Service<Request<B>> for Answering<A>
where
    A: Answerer,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Answer;
    type Error = Infallible;
    type Future = PostFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let answerer = self.0.clone();
        Box::pin(async move { Ok(answerer.answer(request).await) })
    }
}

/// Answers POSTed JSON bodies with `H`. Cheap to clone.
#[derive(Debug)]
pub struct Post<H> {
    handler: Arc<H>,
    limits: BodyLimits,
}

impl<H> Clone for Post<H> {
    fn clone(&self) -> Self {
        Self {
            handler: self.handler.clone(),
            limits: self.limits,
        }
    }
}

impl<H: Handler> Post<H> {
    pub fn new(handler: Arc<H>, limits: BodyLimits) -> Self {
        Self { handler, limits }
    }
}

impl<H: Handler> Answerer for Post<H> {
    async fn answer<B>(&self, request: Request<B>) -> Answer
    where
        B: hyper::body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        answer(request, &*self.handler, self.limits).await
    }
}

/// Answers one request: 405 for anything but POST, 413 for a body above the limit (declared or
/// read), else the handler's answer.
async fn answer<H, B>(request: Request<B>, handler: &H, limits: BodyLimits) -> Answer
where
    H: Handler,
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if request.method() != Method::POST {
        return method_not_allowed();
    }
    let body = match read_body(request, limits).await {
        Ok(body) => body,
        Err(refused) => return refused,
    };
    let answer = {
        use futures::FutureExt as _;
        match std::panic::AssertUnwindSafe(handler.handle(body.clone()))
            .catch_unwind()
            .await
        {
            Ok(answer) => answer,
            Err(_) => handler.recover(&body),
        }
    };
    let mut response = Response::new(Full::new(answer));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// 405, naming POST.
pub fn method_not_allowed() -> Answer {
    let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "use POST\n");
    response
        .headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static("POST"));
    response
}

/// Reads a request's body within `limits`; the refusal otherwise: 413 for a body above the
/// limit (declared or read), 400 when it cannot be read, 408 when it does not arrive in time.
pub async fn read_body<B>(request: Request<B>, limits: BodyLimits) -> Result<Bytes, Answer>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limits.max_bytes as u64) {
        return Err(too_large());
    }
    let mut body = std::pin::pin!(Limited::new(request.into_body(), limits.max_bytes).collect());
    // A small body usually came in with the headers: polled once, it is complete, and no
    // timer is armed (arming and dropping one takes the timer wheel's lock for every request).
    let polled = match futures::poll!(body.as_mut()) {
        Poll::Ready(collected) => Ok(collected),
        Poll::Pending => tokio::time::timeout(limits.read_timeout, body).await,
    };
    match polled {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(error)) if error.is::<LengthLimitError>() => Err(too_large()),
        Ok(Err(_)) => Err(text(
            StatusCode::BAD_REQUEST,
            "cannot read the request body\n",
        )),
        Err(_) => Err(text(
            StatusCode::REQUEST_TIMEOUT,
            "request body read timed out\n",
        )),
    }
}

/// Bytes of a refused request's body read and dropped before its refusal is sent, at most.
pub const DRAIN_BYTES: usize = 64 * 1024;
/// How long a refused request's body may take to arrive before its refusal is sent anyway.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);

/// Reads and drops what is left of a refused request's body, at most [`DRAIN_BYTES`] within
/// [`DRAIN_TIMEOUT`], before its refusal is sent. An HTTP/2 stream whose answer ends while its
/// client is still sending is reset (`RST_STREAM`), and some clients (curl before 8) then drop
/// the answer they were given and report a stream error; an HTTP/1.1 connection whose body was
/// not read cannot carry another request. A body beyond those bounds is refused unread.
pub async fn drain<B>(body: B)
where
    B: hyper::body::Body<Data = Bytes>,
{
    let mut body = std::pin::pin!(body);
    let mut read = 0usize;
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while read <= DRAIN_BYTES {
            match body.frame().await {
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        read = read.saturating_add(data.len());
                    }
                }
                Some(Err(_)) | None => return,
            }
        }
    })
    .await;
}

/// 413, asking an HTTP/1.1 client to close (the listener closes such a connection shortly after
/// rather than read the rest of a body nobody wants).
pub fn too_large() -> Answer {
    let mut response = text(StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n");
    response.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    response
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::server::router::Router;
    use crate::server::MUTATE_PATH;
    use tower::ServiceExt as _;

    /// Echoes the body; panics on the body `panic`.
    struct Echo;

    impl Handler for Echo {
        async fn handle(&self, body: Bytes) -> Bytes {
            if body.as_ref() == b"panic" {
                panic!("scripted bug");
            }
            body
        }

        fn recover(&self, body: &[u8]) -> Bytes {
            Bytes::from([b"recovered: ", body].concat())
        }
    }

    /// The admission route as the server has it, in-process.
    async fn call(method: Method, path: &str, body: &'static [u8]) -> Answer {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .body(Full::new(Bytes::from_static(body)))
            .unwrap();
        let limits = BodyLimits {
            max_bytes: 16,
            ..BodyLimits::default()
        };
        let router = Router::new().route(MUTATE_PATH, Answering(Post::new(Arc::new(Echo), limits)));
        router.oneshot(request).await.unwrap()
    }

    async fn text_of(response: Answer) -> String {
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn routes_in_process() {
        let answered = call(Method::POST, MUTATE_PATH, b"{}").await;
        assert_eq!(answered.status(), StatusCode::OK);
        assert_eq!(answered.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(text_of(answered).await, "{}");

        for path in ["/", "/mutate/x", "/metrics", "/healthz"] {
            assert_eq!(
                call(Method::POST, path, b"{}").await.status(),
                StatusCode::NOT_FOUND
            );
        }
        let get = call(Method::GET, MUTATE_PATH, b"").await;
        assert_eq!(get.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(get.headers()[header::ALLOW], "POST");

        let too_large = call(Method::POST, MUTATE_PATH, b"01234567890123456789").await;
        assert_eq!(too_large.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(too_large.headers()[header::CONNECTION], "close");
    }

    #[tokio::test]
    async fn a_panicking_handler_still_answers() {
        let answered = call(Method::POST, MUTATE_PATH, b"panic").await;
        assert_eq!(answered.status(), StatusCode::OK);
        assert_eq!(text_of(answered).await, "recovered: panic");
    }

    /// Time is paused: a body that never ends is answered 408 at the read timeout.
    #[tokio::test(start_paused = true)]
    async fn a_body_that_never_ends_times_out() {
        let never = futures::stream::pending::<Result<hyper::body::Frame<Bytes>, Infallible>>();
        let body = http_body_util::StreamBody::new(never);
        let request = Request::post(MUTATE_PATH).body(body).unwrap();
        let started = tokio::time::Instant::now();
        let answered = Answering(Post::new(Arc::new(Echo), BodyLimits::default()))
            .oneshot(request)
            .await
            .unwrap();
        assert_eq!(answered.status(), StatusCode::REQUEST_TIMEOUT);
        assert_eq!(started.elapsed(), BodyLimits::default().read_timeout);
    }
}
