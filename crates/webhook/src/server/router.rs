//! Routing by exact path, as a `tower::Service`: each listener serves one [`Router`], built
//! from routes that are themselves services (the admission route [`super::post::Post`], the
//! probes, `/metrics`). A path no route claims is answered 404, and only that is.
//!
//! The routes are a list in the type (`Route<A, Route<B, NotFound>>`), not a table of boxed
//! services: a request walks a few string comparisons and calls its route's service directly;
//! the route's own future is returned as it is (an `Either` per route passed, no box).

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::future::Either;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use tower::Service;

/// What every route answers with.
pub type Answer = Response<Full<Bytes>>;

/// Routes requests by exact path; what no route claims is answered 404.
#[derive(Clone, Copy, Debug)]
pub struct Router<R = NotFound>(R);

impl Router {
    /// No route yet: everything is a 404.
    pub fn new() -> Self {
        Self(get(not_found))
    }
}

impl Default for Router {
    fn default() -> Self {
        Self::new()
    }
}

impl<R> Router<R> {
    /// Adds `service` for requests to exactly `path` (the query string is not part of it).
    pub fn route<S>(self, path: &'static str, service: S) -> Router<Route<S, R>> {
        Router(Route {
            path,
            service,
            next: self.0,
        })
    }
}

impl<R, B> Service<Request<B>> for Router<R>
where
    R: Service<Request<B>, Response = Answer, Error = Infallible>,
{
    type Response = Answer;
    type Error = Infallible;
    type Future = R::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        self.0.call(request)
    }
}

/// One route, then the others.
#[derive(Clone, Copy, Debug)]
pub struct Route<S, N> {
    path: &'static str,
    service: S,
    next: N,
}

impl<S, N, B> Service<Request<B>> for Route<S, N>
where
    S: Service<Request<B>, Response = Answer, Error = Infallible>,
    N: Service<Request<B>, Response = Answer, Error = Infallible>,
{
    type Response = Answer;
    type Error = Infallible;
    type Future = Either<S::Future, N::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        match (self.service.poll_ready(cx), self.next.poll_ready(cx)) {
            (Poll::Ready(Ok(())), Poll::Ready(Ok(()))) => Poll::Ready(Ok(())),
            _ => Poll::Pending,
        }
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if request.uri().path() == self.path {
            Either::Left(self.service.call(request))
        } else {
            Either::Right(self.next.call(request))
        }
    }
}

/// The end of every route list: 404.
pub type NotFound = Get<fn() -> Answer>;

/// A GET-style route answering from `answer` alone (a probe, `/metrics`): no body is read.
pub fn get<F>(answer: F) -> Get<F>
where
    F: Fn() -> Answer,
{
    Get(answer)
}

/// See [`get`].
#[derive(Clone, Copy, Debug)]
pub struct Get<F>(F);

impl<F, B> Service<Request<B>> for Get<F>
where
    F: Fn() -> Answer,
{
    type Response = Answer;
    type Error = Infallible;
    type Future = Ready<Result<Answer, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _request: Request<B>) -> Self::Future {
        ready(Ok((self.0)()))
    }
}

pub fn not_found() -> Answer {
    text(StatusCode::NOT_FOUND, "not found\n")
}

/// A plain-text answer.
pub fn text(status: StatusCode, body: &'static str) -> Answer {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    async fn body(answer: Answer) -> String {
        let bytes = answer.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn exact_paths_and_404_for_the_rest() {
        let router = Router::new()
            .route("/a", get(|| text(StatusCode::OK, "a\n")))
            .route("/b", get(|| text(StatusCode::ACCEPTED, "b\n")));
        let call = |path: &str| {
            let request = Request::get(path).body(()).unwrap();
            router.oneshot(request)
        };
        let a = call("/a").await.unwrap();
        assert_eq!(a.status(), StatusCode::OK);
        assert_eq!(body(a).await, "a\n");
        assert_eq!(call("/b?x=1").await.unwrap().status(), StatusCode::ACCEPTED);
        for path in ["/", "/a/", "/ab", "/A", "/b/x", "//a"] {
            let answer = call(path).await.unwrap();
            assert_eq!(answer.status(), StatusCode::NOT_FOUND, "{path}");
            assert_eq!(body(answer).await, "not found\n");
        }
        let empty = Router::new()
            .oneshot(Request::get("/a").body(()).unwrap())
            .await
            .unwrap();
        assert_eq!(empty.status(), StatusCode::NOT_FOUND);
    }
}
