//! AdmissionReview requests and responses over raw JSON (`admission.k8s.io/v1` and `v1beta1`).

use base64::Engine;
use serde::Serialize;
use serde_json::Value;

pub const V1: &str = "admission.k8s.io/v1";
pub const V1BETA1: &str = "admission.k8s.io/v1beta1";

/// The parts of a request the webhook reads; the object stays raw JSON.
#[derive(Debug)]
pub struct Request<'a> {
    pub api_version: &'static str,
    pub uid: String,
    pub kind: &'a str,
    pub group: &'a str,
    pub operation: &'a str,
    pub sub_resource: &'a str,
    pub namespace: String,
    pub object: Option<&'a Value>,
}

/// Why a body is not an AdmissionReview we can answer normally.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Invalid {
    #[error("the body is not JSON: {0}")]
    NotJson(String),
    #[error("the body is not an AdmissionReview object")]
    NotAnObject,
    #[error("unsupported AdmissionReview apiVersion {0:?}")]
    Version(String),
    #[error("the AdmissionReview has no request")]
    NoRequest,
}

/// The version to answer in: the one asked, `v1` when the body does not say.
pub fn version_of(review: &Value) -> &'static str {
    match review.get("apiVersion").and_then(Value::as_str) {
        Some(V1BETA1) => V1BETA1,
        _ => V1,
    }
}

/// The request's `uid`, or empty when there is none.
pub fn uid_of(review: &Value) -> String {
    review
        .get("request")
        .and_then(|r| r.get("uid"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

pub fn parse(review: &Value) -> Result<Request<'_>, Invalid> {
    let object = review.as_object().ok_or(Invalid::NotAnObject)?;
    match object.get("apiVersion").and_then(Value::as_str) {
        Some(V1 | V1BETA1) => {}
        Some(other) => return Err(Invalid::Version(other.to_owned())),
        None => return Err(Invalid::Version(String::new())),
    }
    let request = object
        .get("request")
        .filter(|r| r.is_object())
        .ok_or(Invalid::NoRequest)?;
    fn text(value: Option<&Value>) -> &str {
        value.and_then(Value::as_str).unwrap_or_default()
    }
    let kind = request.get("kind");
    let pod_object = request.get("object").filter(|o| o.is_object());
    let namespace = Some(text(request.get("namespace")))
        .filter(|n| !n.is_empty())
        .or_else(|| {
            pod_object
                .and_then(|o| o.get("metadata"))
                .and_then(|m| m.get("namespace"))
                .and_then(Value::as_str)
        })
        .unwrap_or_default()
        .to_owned();
    Ok(Request {
        api_version: version_of(review),
        uid: uid_of(review),
        kind: text(kind.and_then(|k| k.get("kind"))),
        group: text(kind.and_then(|k| k.get("group"))),
        operation: text(request.get("operation")),
        sub_resource: text(request.get("subResource")),
        namespace,
        object: pod_object,
    })
}

/// What to answer.
#[derive(Debug, Default)]
pub struct Answer {
    pub allowed: bool,
    pub patch: Option<Vec<crate::patch::Op>>,
    pub warnings: Vec<String>,
    /// `(code, message)` of a denial or an error.
    pub status: Option<(u16, String)>,
}

impl Answer {
    pub fn allow() -> Self {
        Self {
            allowed: true,
            ..Self::default()
        }
    }

    /// A request we cannot read: refused with 400, as the apiserver never sends one.
    pub fn invalid(message: String) -> Self {
        Self {
            allowed: false,
            status: Some((400, message)),
            ..Self::default()
        }
    }
}

/// The response AdmissionReview, in `api_version`, for `uid`.
pub fn respond(api_version: &str, uid: &str, answer: Answer) -> Value {
    serde_json::to_value(Review::new(api_version, uid, answer)).unwrap_or(Value::Null)
}

/// [`respond`], serialized: the bytes of the same JSON, written without building a [`Value`].
pub fn respond_bytes(api_version: &str, uid: &str, answer: Answer) -> Vec<u8> {
    match answer.patch.as_deref() {
        Some(ops) if !ops.is_empty() => {
            write_patched(api_version, uid, &answer, ops).unwrap_or_else(|_| b"{}".to_vec())
        }
        _ => serde_json::to_vec(&Review::new(api_version, uid, answer))
            .unwrap_or_else(|_| b"{}".to_vec()),
    }
}

/// The answer with a patch, written by hand in [`Review`]'s key order: the operations are
/// base64-encoded straight into the answer, and the base64 text (which never needs JSON
/// escaping) is not scanned again. The warm path's most common answer.
fn write_patched(
    api_version: &str,
    uid: &str,
    answer: &Answer,
    ops: &[crate::patch::Op],
) -> Result<Vec<u8>, std::io::Error> {
    use std::io::Write as _;
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(b"{\"apiVersion\":");
    serde_json::to_writer(&mut out, api_version)?;
    out.extend_from_slice(b",\"kind\":\"AdmissionReview\",\"response\":{\"allowed\":");
    out.extend_from_slice(if answer.allowed { b"true" } else { b"false" });
    out.extend_from_slice(b",\"patch\":\"");
    let json = serde_json::to_vec(ops)?;
    let start = out.len();
    let encoded = base64::encoded_len(json.len(), true).ok_or(std::io::ErrorKind::InvalidInput)?;
    out.resize(start + encoded, 0);
    base64::engine::general_purpose::STANDARD
        .encode_slice(&json, &mut out[start..])
        .map_err(std::io::Error::other)?;
    out.extend_from_slice(b"\",\"patchType\":\"JSONPatch\"");
    if let Some(status) = Review::status(answer) {
        out.extend_from_slice(b",\"status\":");
        serde_json::to_writer(&mut out, &status)?;
    }
    out.extend_from_slice(b",\"uid\":");
    serde_json::to_writer(&mut out, uid)?;
    if !answer.warnings.is_empty() {
        out.extend_from_slice(b",\"warnings\":");
        serde_json::to_writer(&mut out, &answer.warnings)?;
    }
    out.write_all(b"}}")?;
    Ok(out)
}

/// The response AdmissionReview. Fields are in the order `serde_json::Map` sorts them, so the
/// bytes equal those of the [`Value`] [`respond`] returns.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Review<'a> {
    api_version: &'a str,
    kind: &'static str,
    response: Response<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Response<'a> {
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status>,
    uid: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

#[derive(Serialize)]
struct Status {
    code: u16,
    message: String,
    #[serde(skip_serializing_if = "str::is_empty")]
    reason: &'static str,
    status: &'static str,
}

impl<'a> Review<'a> {
    fn status(answer: &Answer) -> Option<Status> {
        answer.status.as_ref().map(|(code, message)| Status {
            code: *code,
            message: message.clone(),
            reason: match code {
                400 => "BadRequest",
                403 => "Forbidden",
                _ => "",
            },
            status: if answer.allowed { "Success" } else { "Failure" },
        })
    }

    fn new(api_version: &'a str, uid: &'a str, answer: Answer) -> Self {
        let status = Self::status(&answer);
        let patch = answer.patch.filter(|ops| !ops.is_empty()).map(|ops| {
            let bytes = serde_json::to_vec(&ops).unwrap_or_else(|_| b"[]".to_vec());
            base64::engine::general_purpose::STANDARD.encode(bytes)
        });
        Self {
            api_version,
            kind: "AdmissionReview",
            response: Response {
                allowed: answer.allowed,
                patch_type: patch.is_some().then_some("JSONPatch"),
                patch,
                status,
                uid,
                warnings: answer.warnings,
            },
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The bytes sent equal the serialized [`respond`] value (same JSON, same key order).
    #[test]
    fn bytes_equal_the_value() {
        let answers = || {
            vec![
                Answer::allow(),
                Answer::invalid("bad".into()),
                Answer {
                    allowed: true,
                    patch: Some(vec![crate::patch::add("/a", json!(1))]),
                    warnings: vec!["w1".into(), "w\"2".into()],
                    status: None,
                },
                Answer {
                    allowed: true,
                    patch: Some(Vec::new()),
                    ..Answer::default()
                },
                Answer {
                    allowed: false,
                    warnings: vec!["w".into()],
                    status: Some((403, "no".into())),
                    ..Answer::default()
                },
                Answer {
                    allowed: true,
                    status: Some((200, "ok".into())),
                    ..Answer::default()
                },
            ]
        };
        for (answer, copy) in answers().into_iter().zip(answers()) {
            let value = serde_json::to_vec(&respond(V1BETA1, "u\"1", answer)).unwrap();
            let bytes = respond_bytes(V1BETA1, "u\"1", copy);
            assert_eq!(
                String::from_utf8(bytes).unwrap(),
                String::from_utf8(value).unwrap()
            );
        }
    }

    #[test]
    fn parse_table() {
        let review = json!({
            "apiVersion": V1BETA1, "kind": "AdmissionReview",
            "request": {"uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "operation": "CREATE", "namespace": "ns",
                        "object": {"metadata": {"generateName": "x-"}}, "futureField": 1}
        });
        let request = parse(&review).unwrap();
        assert_eq!(request.api_version, V1BETA1);
        assert_eq!(request.uid, "u1");
        assert_eq!(
            (request.kind, request.group, request.operation),
            ("Pod", "", "CREATE")
        );
        assert_eq!(request.namespace, "ns");
        assert!(request.object.is_some());

        // namespace from the object when the request has none
        let review = json!({"apiVersion": V1, "request": {"uid": "u", "object": {"metadata": {"namespace": "n2"}}}});
        assert_eq!(parse(&review).unwrap().namespace, "n2");

        assert!(matches!(parse(&json!([])), Err(Invalid::NotAnObject)));
        assert!(matches!(
            parse(&json!({"apiVersion": "v2"})),
            Err(Invalid::Version(_))
        ));
        assert!(matches!(
            parse(&json!({"apiVersion": V1})),
            Err(Invalid::NoRequest)
        ));
        assert!(matches!(
            parse(&json!({"apiVersion": V1, "request": 3})),
            Err(Invalid::NoRequest)
        ));
    }

    #[test]
    fn responses() {
        let patched = respond(
            V1,
            "u",
            Answer {
                allowed: true,
                patch: Some(vec![crate::patch::add("/a", json!(1))]),
                warnings: vec!["w".into()],
                status: None,
            },
        );
        assert_eq!(patched["apiVersion"], V1);
        assert_eq!(patched["kind"], "AdmissionReview");
        assert_eq!(patched["response"]["uid"], "u");
        assert_eq!(patched["response"]["patchType"], "JSONPatch");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(patched["response"]["patch"].as_str().unwrap())
            .unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&decoded).unwrap(),
            json!([{"op": "add", "path": "/a", "value": 1}])
        );
        assert_eq!(patched["response"]["warnings"], json!(["w"]));

        let denied = respond(
            V1BETA1,
            "v",
            Answer {
                allowed: false,
                status: Some((403, "no".into())),
                ..Answer::default()
            },
        );
        assert_eq!(denied["apiVersion"], V1BETA1);
        assert_eq!(denied["response"]["allowed"], false);
        assert_eq!(denied["response"]["status"]["code"], 403);
        assert_eq!(denied["response"]["status"]["reason"], "Forbidden");
        assert!(denied["response"].get("patch").is_none());

        let plain = respond(V1, "w", Answer::allow());
        assert_eq!(plain["response"], json!({"uid": "w", "allowed": true}));
    }
}
