//! Kubernetes `Status` answers (errors, and the few successes answered with one) and JSON
//! responses of the scripted API server.

use bytes::Bytes;
use serde_json::Value;

use crate::serve::{response, ResBody};

pub(crate) fn json_response(code: u16, body: impl Into<Bytes>) -> http::Response<ResBody> {
    response(code, &[("content-type", "application/json")], body)
}

/// A `Status` answer with `code`, its reason and `message`.
pub(crate) fn status(code: u16, message: &str) -> http::Response<ResBody> {
    json_response(code, status_body(code, reason(code), message).to_string())
}

/// The `reason` of a Kubernetes `Status` for an HTTP status.
pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "Conflict",
        410 => "Expired",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

/// A Kubernetes `Status` object.
pub(crate) fn status_body(code: u16, reason: &str, message: &str) -> Value {
    let mut status = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": if code < 400 { "Success" } else { "Failure" },
        "message": message,
        "reason": reason,
        "code": code,
    });
    if code == 429 && message.contains("disruption budget") {
        status["details"] = serde_json::json!({
            "causes": [{"reason": "DisruptionBudget", "message": "The disruption budget needs 1 healthy pods and has 1 currently"}]
        });
    }
    status
}
