//! AdmissionReview requests and responses over raw JSON (`admission.k8s.io/v1` and `v1beta1`).
//!
//! The request is read from the `serde_json::Value` the body parses into, so the pod object stays
//! raw JSON (fields newer than our k8s-openapi survive, and the patch is built against exactly
//! what the apiserver sent). kube's `kube::core::admission` types are not used: deserializing them
//! buffers the review twice (`#[serde(flatten)]` at two levels) and their response writes the
//! patch as an array of numbers instead of base64; docs/benchmarks.md ("The admission envelope")
//! has the measurement.

use base64::Engine;
use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;

pub const V1: &str = "admission.k8s.io/v1";
pub const V1BETA1: &str = "admission.k8s.io/v1beta1";

/// The parts of a request the webhook reads; the object stays raw JSON.
#[derive(Debug)]
pub struct Request<'a> {
    pub api_version: &'static str,
    pub uid: &'a str,
    pub kind: &'a str,
    pub group: &'a str,
    pub operation: &'a str,
    pub sub_resource: &'a str,
    pub namespace: String,
    pub object: Option<&'a Value>,
}

impl<'a> Request<'a> {
    /// The pod of a pod creation (`Pod` in the core group, `CREATE`, no subresource).
    pub fn pod_creation(&self) -> Option<&'a Value> {
        let is_creation = self.kind == "Pod"
            && self.group.is_empty()
            && self.operation == "CREATE"
            && self.sub_resource.is_empty();
        self.object.filter(|_| is_creation)
    }
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
pub fn uid_of(review: &Value) -> &str {
    review
        .get("request")
        .and_then(|r| r.get("uid"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `metadata.name` of an object, else its `metadata.generateName`, else empty.
pub fn pod_name(object: &Value) -> &str {
    let metadata = object.get("metadata");
    let field = |name| {
        metadata
            .and_then(|m| m.get(name))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
    };
    field("name")
        .or_else(|| field("generateName"))
        .unwrap_or_default()
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

/// The serialized response AdmissionReview, in `api_version`, for `uid`.
pub fn respond(api_version: &str, uid: &str, answer: Answer) -> Bytes {
    let review = Review::new(api_version, uid, answer);
    // Serializing these types cannot fail (string keys, no maps of non-strings); an empty object
    // would still be answered as an error by the apiserver rather than dropped.
    Bytes::from(serde_json::to_vec(&review).unwrap_or_else(|_| b"{}".to_vec()))
}

/// The response AdmissionReview.
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
    /// Base64 of the JSON array of operations.
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
    fn new(api_version: &'a str, uid: &'a str, answer: Answer) -> Self {
        let Answer {
            allowed,
            patch,
            warnings,
            status,
        } = answer;
        let status = status.map(|(code, message)| Status {
            code,
            message,
            reason: match code {
                400 => "BadRequest",
                403 => "Forbidden",
                _ => "",
            },
            status: if allowed { "Success" } else { "Failure" },
        });
        let patch = patch
            .filter(|ops| !ops.is_empty())
            .and_then(|ops| serde_json::to_vec(&ops).ok())
            .map(|json| base64::engine::general_purpose::STANDARD.encode(json));
        Self {
            api_version,
            kind: "AdmissionReview",
            response: Response {
                allowed,
                patch_type: patch.is_some().then_some("JSONPatch"),
                patch,
                status,
                uid,
                warnings,
            },
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answered(api_version: &str, uid: &str, answer: Answer) -> Value {
        serde_json::from_slice(&respond(api_version, uid, answer)).unwrap()
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
        let pod = request.pod_creation().unwrap();
        assert_eq!(pod_name(pod), "x-");

        // namespace from the object when the request has none; not a creation
        let review = json!({"apiVersion": V1, "request": {"uid": "u", "object": {"metadata": {"namespace": "n2"}}}});
        let request = parse(&review).unwrap();
        assert_eq!(request.namespace, "n2");
        assert!(request.pod_creation().is_none());

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
    fn pod_creations_only() {
        let request = |kind: Value, operation: &str, sub: &str| {
            json!({"apiVersion": V1, "request": {"uid": "u", "kind": kind, "operation": operation,
                   "subResource": sub, "object": {"metadata": {"name": "p"}}}})
        };
        let pod = json!({"group": "", "version": "v1", "kind": "Pod"});
        let cases = [
            (request(pod.clone(), "CREATE", ""), true),
            (request(pod.clone(), "UPDATE", ""), false),
            (request(pod.clone(), "CREATE", "binding"), false),
            (
                request(json!({"group": "apps", "kind": "Pod"}), "CREATE", ""),
                false,
            ),
            (
                request(json!({"group": "", "kind": "Secret"}), "CREATE", ""),
                false,
            ),
        ];
        for (review, want) in cases {
            let request = parse(&review).unwrap();
            assert_eq!(request.pod_creation().is_some(), want, "{review}");
        }
    }

    #[test]
    fn responses() {
        let patched = answered(
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

        let denied = answered(
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

        let plain = answered(V1, "w", Answer::allow());
        assert_eq!(plain["response"], json!({"uid": "w", "allowed": true}));

        // An empty patch is no patch; strings needing escapes stay valid JSON.
        let empty = answered(
            V1,
            "x\"1",
            Answer {
                allowed: true,
                patch: Some(Vec::new()),
                warnings: vec!["w\"2\n".into()],
                ..Answer::default()
            },
        );
        assert_eq!(
            empty["response"],
            json!({"uid": "x\"1", "allowed": true, "warnings": ["w\"2\n"]})
        );
    }
}
