//! Scripted faults and recorded requests of the scripted API server.

use serde_json::Value;

/// A scripted answer to the next `times` requests whose method matches and whose path contains
/// `path_contains`, instead of what the server would do.
#[derive(Clone, Debug)]
pub struct Fault {
    /// `GET`, `POST`, `PUT`, `PATCH`, `DELETE`; `WATCH` matches only watch requests (a `GET`
    /// with `watch`), answered as the apiserver ends a watch: `200` and one `ERROR` event
    /// carrying the `Status`.
    pub method: String,
    /// A substring of the request path (without the query).
    pub path_contains: String,
    /// The HTTP status answered (a Kubernetes `Status` body with the matching reason).
    pub status: u16,
    /// A message for the `Status` body.
    pub message: String,
    /// How many requests it answers.
    pub times: u32,
    /// A `Retry-After` header (seconds) on the answer.
    pub retry_after: Option<u64>,
}

impl Fault {
    /// `status` for the next request matching `method` and `path_contains`.
    pub fn new(method: &str, path_contains: &str, status: u16) -> Self {
        Self {
            method: method.to_owned(),
            path_contains: path_contains.to_owned(),
            status,
            message: format!("scripted {status}"),
            times: 1,
            retry_after: None,
        }
    }

    /// Answers this many matching requests.
    #[must_use]
    pub fn times(mut self, times: u32) -> Self {
        self.times = times;
        self
    }

    /// Answers with `Retry-After: seconds` (as the apiserver's priority and fairness does on
    /// a `429`).
    #[must_use]
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// The `Status` message.
    #[must_use]
    pub fn message(mut self, message: &str) -> Self {
        message.clone_into(&mut self.message);
        self
    }

    /// The next watch matching `path_contains` ends at once with `410 Gone` (an `ERROR` event,
    /// before any other), as when the history was compacted between a list and its watch.
    pub fn expired_watch(path_contains: &str) -> Self {
        Self::new("WATCH", path_contains, 410).message("too old resource version")
    }

    /// The eviction API's answer when a PodDisruptionBudget forbids it (429, reason
    /// `TooManyRequests`, a `DisruptionBudget` cause), for `times` evictions of `pod`.
    pub fn pdb_blocks_eviction(namespace: &str, pod: &str, times: u32) -> Self {
        Self::new(
            "POST",
            &format!("/api/v1/namespaces/{namespace}/pods/{pod}/eviction"),
            429,
        )
        .message("Cannot evict pod as it would violate the pod's disruption budget.")
        .times(times)
    }

    pub(crate) fn matches(&self, method: &str, path: &str) -> bool {
        self.times > 0 && self.method == method && path.contains(&self.path_contains)
    }
}

/// One request the server answered.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// HTTP method.
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The query string, undecoded (empty when absent).
    pub query: String,
    /// `Content-Type`, when sent.
    pub content_type: Option<String>,
    /// The JSON body, or `Null`.
    pub body: Value,
    /// The status answered.
    pub status: u16,
    /// When its body had been read (before it was answered).
    pub received: std::time::Instant,
}

impl RecordedRequest {
    /// Whether this request changed (or tried to change) something.
    pub fn is_write(&self) -> bool {
        self.method != "GET"
    }

    /// The value of query parameter `name`, percent-decoded.
    pub fn query_param(&self, name: &str) -> Option<String> {
        url::form_urlencoded::parse(self.query.as_bytes())
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.into_owned())
    }
}
