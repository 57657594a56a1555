//! What a [`crate::FakeRegistry`] route answers.

use std::time::Duration;

use bytes::Bytes;

use crate::push::sha256_digest;

/// A scripted answer for one path of a [`crate::FakeRegistry`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Behavior {
    /// A complete response.
    Respond {
        /// Status code.
        status: u16,
        /// Headers.
        headers: Vec<(String, String)>,
        /// Body.
        body: Bytes,
    },
    /// Read the request and never answer (the connection is dropped after 10 minutes or when the
    /// fake is dropped).
    Hang,
    /// Status and headers at once, then the body one byte per `interval`.
    Trickle {
        /// Status code.
        status: u16,
        /// Headers.
        headers: Vec<(String, String)>,
        /// Body, sent byte by byte.
        body: Bytes,
        /// Delay between bytes.
        interval: Duration,
    },
    /// A `len`-byte body of spaces streamed in 64 KiB chunks, never allocated whole.
    Oversized {
        /// Status code.
        status: u16,
        /// Headers.
        headers: Vec<(String, String)>,
        /// Body length.
        len: u64,
        /// Send `Content-Length` (true) or use chunked encoding (false).
        declare_length: bool,
    },
    /// `307` to `path` on the fake's second listener ([`crate::FakeRegistry::other_base_url`]).
    RedirectToOther {
        /// Path on the other listener.
        path: String,
    },
    /// `307` to an absolute URL (another server, another scheme: an `https` fake redirecting to
    /// a plain `http` one).
    Redirect {
        /// The `Location` header.
        location: String,
    },
    /// Waits `delay`, then answers as `then` (a slow response whose headers come late).
    Delayed {
        /// How long to wait before answering.
        delay: Duration,
        /// The answer.
        then: Box<Behavior>,
    },
    /// The n-th request gets the n-th behavior; the last one repeats.
    Sequence(Vec<Behavior>),
    /// A behavior built when the request arrives ([`Behavior::generated`]).
    Generated(super::hostile::Generator),
}

impl Behavior {
    /// A bodiless response with `status`.
    pub fn status(status: u16) -> Self {
        Self::Respond {
            status,
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }

    /// A response with `status`, `Content-Type` and `body`.
    pub fn body(status: u16, content_type: &str, body: impl Into<Bytes>) -> Self {
        Self::Respond {
            status,
            headers: vec![("content-type".to_owned(), content_type.to_owned())],
            body: body.into(),
        }
    }

    /// A JSON response.
    pub fn json(status: u16, value: &serde_json::Value) -> Self {
        Self::body(status, "application/json", value.to_string())
    }

    /// `200` with a manifest: `Content-Type: media_type` and the correct `Docker-Content-Digest`.
    pub fn manifest(media_type: &str, body: impl Into<Bytes>) -> Self {
        let body = body.into();
        let digest = sha256_digest(&body);
        Self::manifest_with_digest(media_type, body, &digest)
    }

    /// `200` with a manifest whose `Docker-Content-Digest` is `digest` (e.g. a wrong one).
    pub fn manifest_with_digest(media_type: &str, body: impl Into<Bytes>, digest: &str) -> Self {
        Self::body(200, media_type, body).with_header("docker-content-digest", digest)
    }

    /// `429` with `Retry-After: seconds`.
    pub fn too_many_requests(retry_after_seconds: u64) -> Self {
        Self::status(429).with_header("retry-after", &retry_after_seconds.to_string())
    }

    /// `status` (429 or 5xx) with a `Retry-After` header of any text, e.g. `u64::MAX` seconds
    /// (`"18446744073709551615"`) or an HTTP date.
    pub fn retry_after(status: u16, value: &str) -> Self {
        Self::status(status).with_header("retry-after", value)
    }

    /// `200`, `Content-Type: application/vnd.oci.image.index.v1+json`, a body that is not JSON.
    pub fn invalid_json() -> Self {
        Self::body(
            200,
            "application/vnd.oci.image.index.v1+json",
            "{\"schemaVersion\": 2, \"manifests\": [ this is not json",
        )
    }

    /// `401` with `WWW-Authenticate: Bearer realm="..",service=".."` and the registry's error
    /// envelope.
    pub fn bearer_challenge(realm: &str, service: &str) -> Self {
        Self::json(
            401,
            &serde_json::json!({"errors": [{"code": "UNAUTHORIZED", "message": "authentication required", "detail": null}]}),
        )
        .with_header(
            "www-authenticate",
            &format!("Bearer realm=\"{realm}\",service=\"{service}\""),
        )
    }

    /// `401` with `WWW-Authenticate: Basic realm=".."`.
    pub fn basic_challenge(realm: &str) -> Self {
        Self::status(401).with_header("www-authenticate", &format!("Basic realm=\"{realm}\""))
    }

    /// `200`, `body` one byte per `interval`.
    pub fn trickle(content_type: &str, body: impl Into<Bytes>, interval: Duration) -> Self {
        Self::Trickle {
            status: 200,
            headers: vec![("content-type".to_owned(), content_type.to_owned())],
            body: body.into(),
            interval,
        }
    }

    /// `200` with a `len`-byte body (with `Content-Length` when `declare_length`).
    pub fn oversized(content_type: &str, len: u64, declare_length: bool) -> Self {
        Self::Oversized {
            status: 200,
            headers: vec![("content-type".to_owned(), content_type.to_owned())],
            len,
            declare_length,
        }
    }

    /// `307` to `path` on the second listener.
    pub fn redirect_to_other(path: &str) -> Self {
        Self::RedirectToOther {
            path: path.to_owned(),
        }
    }

    /// `307` to `location`, an absolute URL.
    pub fn redirect(location: &str) -> Self {
        Self::Redirect {
            location: location.to_owned(),
        }
    }

    /// Answers as `self` after `delay`.
    pub fn delayed(self, delay: Duration) -> Self {
        Self::Delayed {
            delay,
            then: Box::new(self),
        }
    }

    /// Adds a header (ignored by `Hang`, the redirects, `Sequence` and `Generated`; passed on by
    /// `Delayed`).
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        match &mut self {
            Self::Respond { headers, .. }
            | Self::Trickle { headers, .. }
            | Self::Oversized { headers, .. } => {
                headers.push((name.to_owned(), value.to_owned()));
            }
            Self::Delayed { then, .. } => {
                let inner = std::mem::replace(then.as_mut(), Self::Hang);
                **then = inner.with_header(name, value);
            }
            Self::Hang
            | Self::RedirectToOther { .. }
            | Self::Redirect { .. }
            | Self::Sequence(_)
            | Self::Generated(_) => {}
        }
        self
    }
}
