//! AdmissionReview requests and responses (`admission.k8s.io/v1` and `v1beta1`).
//!
//! Requests are read by [`parse`] into a narrow envelope: the fields kube's
//! `kube::core::admission::AdmissionRequest` requires are required here too (the same bodies are
//! refused), the ones the webhook does not read (`userInfo`, `options`, ...) are skipped without
//! being built, and the object is kept as the raw JSON the apiserver sent, fields newer than our
//! k8s-openapi included, so the decision and the patch work on it directly, less what no step
//! reads (`admission/prune.rs`: the status, field-manager entries, containers but their names and
//! images). Parsing with kube's own types cost more: they buffer the whole review for
//! their flattened type fields, build the object's `metadata` as `ObjectMeta`, and the raw pod had
//! to be rebuilt from it (docs/benchmarks.md, "The admission envelope"). Responses are written by [`respond`]: kube's
//! `AdmissionResponse` serializes the patch as an array of numbers, where the API documents
//! base64 (and the array is four times larger).

use std::borrow::Cow;

use base64::Engine;
use bytes::Bytes;
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use super::prune::Pruned;

pub const V1: &str = "admission.k8s.io/v1";
pub const V1BETA1: &str = "admission.k8s.io/v1beta1";

/// The operation of an admission request, as the apiserver names it (what kube's
/// `admission::Operation` reads; ours, so kube's `admission` feature and the second json-patch
/// it brings are not needed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

/// The parts of a request the webhook reads; the object is raw JSON. Its strings borrow the
/// body where they need no unescaping (they almost never do), so reading them allocates nothing.
#[derive(Debug)]
pub struct Request<'b> {
    pub api_version: &'static str,
    pub uid: Cow<'b, str>,
    pub kind: Cow<'b, str>,
    pub group: Cow<'b, str>,
    pub operation: Operation,
    pub sub_resource: Option<Cow<'b, str>>,
    pub namespace: Cow<'b, str>,
    pub object: Option<Value>,
    /// The object before an update (`oldObject`), raw.
    pub old_object: Option<Value>,
}

impl Request<'_> {
    /// The pod of a pod creation (`Pod` in the core group, `CREATE`, no subresource).
    pub fn pod_creation(&self) -> Option<&Value> {
        let is_creation = creates_a_pod(
            &self.kind,
            &self.group,
            self.operation,
            self.sub_resource.as_deref(),
        );
        self.object.as_ref().filter(|_| is_creation)
    }

    /// A pod and its previous version, when ephemeral (debug) containers are being added: an
    /// `UPDATE` of the `pods/ephemeralcontainers` subresource.
    pub fn ephemeral_update(&self) -> Option<(&Value, Option<&Value>)> {
        let is_debug = self.kind == "Pod"
            && self.group.is_empty()
            && self.operation == Operation::Update
            && self.sub_resource.as_deref() == Some("ephemeralcontainers");
        let pod = self.object.as_ref().filter(|_| is_debug)?;
        Some((pod, self.old_object.as_ref()))
    }
}

/// Whether a request of this kind, operation and subresource creates a pod (`Pod` in the core
/// group, `CREATE`, no subresource): what [`Request::pod_creation`] and
/// [`Envelope::is_pod_creation`] ask.
fn creates_a_pod(
    kind: &str,
    group: &str,
    operation: Operation,
    sub_resource: Option<&str>,
) -> bool {
    kind == "Pod"
        && group.is_empty()
        && operation == Operation::Create
        && sub_resource.is_none_or(str::is_empty)
}

/// Why a body is not an AdmissionReview we can answer normally.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Invalid {
    #[error("the body is not an AdmissionReview: {0}")]
    NotAReview(String),
    #[error("unsupported AdmissionReview apiVersion {0:?}")]
    Version(String),
    #[error("the AdmissionReview has no request")]
    NoRequest,
}

/// What an unreadable body still tells: the version to answer in (the one asked, `v1` when the
/// body does not say) and the request's `uid` (empty when there is none).
pub fn salvage(body: &[u8]) -> (&'static str, String) {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let version = match value.get("apiVersion").and_then(Value::as_str) {
        Some(V1BETA1) => V1BETA1,
        _ => V1,
    };
    let uid = value
        .get("request")
        .and_then(|r| r.get("uid"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    (version, uid)
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

/// The review as read: the envelope's required members, the request's when there is one.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire<'b> {
    #[serde(borrow)]
    api_version: Cow<'b, str>,
    /// Required, as by kube's `TypeMeta`; never read.
    #[serde(rename = "kind")]
    _kind: IgnoredString,
    #[serde(default, borrow)]
    request: Option<WireRequest<'b>>,
}

/// `request`: what kube's `AdmissionRequest` requires is required; what the webhook never reads
/// is skipped unbuilt.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireRequest<'b> {
    #[serde(borrow)]
    uid: Cow<'b, str>,
    #[serde(borrow)]
    kind: Gvk<'b>,
    #[serde(rename = "resource")]
    _resource: Gvr,
    #[serde(default, borrow)]
    sub_resource: Option<Cow<'b, str>>,
    #[serde(default, borrow)]
    namespace: Option<Cow<'b, str>>,
    operation: Operation,
    #[serde(rename = "userInfo")]
    _user_info: IgnoredAny,
    /// Kept as the bytes sent until [`Envelope::into_request`] reads it: a pod already decided
    /// (the decision memo, [`super::memo`]) is recognised by these bytes, never read.
    #[serde(default, borrow)]
    object: Option<&'b RawValue>,
    #[serde(default, borrow)]
    old_object: Option<&'b RawValue>,
}

#[derive(Deserialize)]
struct Gvk<'b> {
    #[serde(borrow)]
    group: Cow<'b, str>,
    #[serde(rename = "version")]
    _version: IgnoredString,
    #[serde(borrow)]
    kind: Cow<'b, str>,
}

#[derive(Deserialize)]
struct Gvr {
    #[serde(rename = "group")]
    _group: IgnoredString,
    #[serde(rename = "version")]
    _version: IgnoredString,
    #[serde(rename = "resource")]
    _resource: IgnoredString,
}

/// A string member that must be present and a string, and is not kept.
struct IgnoredString;

impl<'de> Deserialize<'de> for IgnoredString {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = IgnoredString;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<IgnoredString, E> {
                Ok(IgnoredString)
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

/// Reads an AdmissionReview request.
pub fn parse(body: &[u8]) -> Result<Request<'_>, Invalid> {
    parse_envelope(body)?.into_request()
}

/// An AdmissionReview request with its objects not read yet: the envelope's members, checked as
/// [`parse`] checks them, and the objects as the bytes sent.
#[derive(Debug)]
pub struct Envelope<'b> {
    pub api_version: &'static str,
    pub uid: Cow<'b, str>,
    pub kind: Cow<'b, str>,
    pub group: Cow<'b, str>,
    pub operation: Operation,
    pub sub_resource: Option<Cow<'b, str>>,
    /// `request.namespace` as sent (the object's namespace is read by
    /// [`Envelope::into_request`] when this is empty).
    pub namespace: Option<Cow<'b, str>>,
    /// `request.object`, as sent.
    pub object: Option<&'b str>,
    old_object: Option<&'b str>,
}

/// Reads an AdmissionReview's envelope, leaving its objects as sent.
pub fn parse_envelope<'b>(body: &'b [u8]) -> Result<Envelope<'b>, Invalid> {
    let review: Wire =
        serde_json::from_slice(body).map_err(|error| Invalid::NotAReview(error.to_string()))?;
    let api_version = match &*review.api_version {
        V1 => V1,
        V1BETA1 => V1BETA1,
        other => return Err(Invalid::Version(other.to_owned())),
    };
    let request = review.request.ok_or(Invalid::NoRequest)?;
    Ok(Envelope {
        api_version,
        uid: request.uid,
        kind: request.kind.kind,
        group: request.kind.group,
        operation: request.operation,
        sub_resource: request.sub_resource,
        namespace: request.namespace,
        object: request.object.map(RawValue::get),
        old_object: request.old_object.map(RawValue::get),
    })
}

impl<'b> Envelope<'b> {
    /// A pod creation (`Pod` in the core group, `CREATE`, no subresource) with an object.
    pub fn is_pod_creation(&self) -> bool {
        self.object.is_some()
            && creates_a_pod(
                &self.kind,
                &self.group,
                self.operation,
                self.sub_resource.as_deref(),
            )
    }

    /// Reads the objects (less what no step reads, [`super::prune`]).
    pub fn into_request(self) -> Result<Request<'b>, Invalid> {
        let read = |raw: Option<&str>, member: &str| {
            raw.map(|raw| {
                let pruned: Pruned = serde_json::from_str(raw)
                    .map_err(|error| Invalid::NotAReview(format!("request.{member}: {error}")))?;
                checked(pruned.0, member)
            })
            .transpose()
        };
        let object = read(self.object, "object")?;
        let old_object = read(self.old_object, "oldObject")?;
        let namespace = self
            .namespace
            .filter(|n| !n.is_empty())
            .or_else(|| {
                object
                    .as_ref()
                    .and_then(|o| o.get("metadata"))
                    .and_then(|m| m.get("namespace"))
                    .and_then(Value::as_str)
                    .map(|namespace| Cow::Owned(namespace.to_owned()))
            })
            .unwrap_or_default();
        Ok(Request {
            api_version: self.api_version,
            uid: self.uid,
            kind: self.kind,
            group: self.group,
            operation: self.operation,
            sub_resource: self.sub_resource,
            namespace,
            object,
            old_object,
        })
    }
}

/// An object as the decision reads it: a JSON object whose `metadata` is an object (an empty one
/// when the object has none) with the members the decision reads or patches well-typed, as
/// kube's `ObjectMeta` would have required: `name`, `generateName` and `namespace` strings,
/// `labels` and `annotations` maps of strings (each may be null). An annotation value that is a
/// number is refused as before (docs/compatibility.md).
fn checked(mut object: Value, member: &str) -> Result<Value, Invalid> {
    let invalid = |what: &str| Invalid::NotAReview(format!("request.{member}{what}"));
    let Value::Object(map) = &mut object else {
        return Err(invalid(" is not a JSON object"));
    };
    if !map.contains_key("metadata") {
        map.insert("metadata".to_owned(), Value::Object(serde_json::Map::new()));
    }
    let Some(Value::Object(metadata)) = map.get("metadata") else {
        return Err(invalid(".metadata is not a JSON object"));
    };
    for key in ["name", "generateName", "namespace"] {
        if !matches!(
            metadata.get(key),
            None | Some(Value::Null | Value::String(_))
        ) {
            return Err(invalid(&format!(".metadata.{key} is not a string")));
        }
    }
    for key in ["labels", "annotations"] {
        let strings = match metadata.get(key) {
            None | Some(Value::Null) => true,
            Some(Value::Object(entries)) => entries.values().all(Value::is_string),
            Some(_) => false,
        };
        if !strings {
            return Err(invalid(&format!(".metadata.{key} is not a map of strings")));
        }
    }
    Ok(object)
}

/// What to answer.
#[derive(Debug, Default)]
pub struct Answer {
    pub allowed: bool,
    pub patch: Option<Vec<noe_core::patch::Op>>,
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

/// The serialized response AdmissionReview, in `api_version`, for `uid`:
/// `{"apiVersion","kind","response":{"allowed","patch","patchType","status","uid","warnings"}}`
/// (absent members left out). Written directly into one buffer: the patch is base64-encoded in
/// place, and its base64 text (which never needs JSON escaping) is not scanned again, which a
/// serializer of a struct holding the base64 `String` would do (docs/benchmarks.md, "The
/// admission envelope").
pub fn respond(api_version: &str, uid: &str, answer: Answer) -> Bytes {
    // Writing into a Vec cannot fail; the fallback is never taken.
    Bytes::from(write(api_version, uid, &answer).unwrap_or_else(|_| b"{}".to_vec()))
}

/// An answer written once for any request: the response's bytes but the version and the uid
/// ([`Rendered::respond`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rendered {
    /// From after the version through `"uid":`.
    head: Box<[u8]>,
    /// From after the uid to the end.
    tail: Box<[u8]>,
}

impl Rendered {
    pub fn new(answer: &Answer) -> Self {
        let mut head = Vec::with_capacity(512);
        let mut tail = Vec::new();
        // Writing into a Vec cannot fail; the fallback (an empty answer) is never taken.
        if write_head(&mut head, answer)
            .and_then(|()| write_tail(&mut tail, answer))
            .is_err()
        {
            return Self::default();
        }
        Self {
            head: head.into(),
            tail: tail.into(),
        }
    }

    /// The response AdmissionReview, in `api_version`, for `uid`: what [`respond`] writes.
    pub fn respond(&self, api_version: &str, uid: &str) -> Bytes {
        let mut out = Vec::with_capacity(
            self.head
                .len()
                .saturating_add(self.tail.len())
                .saturating_add(uid.len())
                .saturating_add(64),
        );
        let written = write_version(&mut out, api_version)
            .and_then(|()| {
                out.extend_from_slice(&self.head);
                serde_json::to_writer(&mut out, uid)
            })
            .map(|()| out.extend_from_slice(&self.tail));
        match written {
            Ok(()) => Bytes::from(out),
            Err(_) => Bytes::from_static(b"{}"),
        }
    }

    /// Its bytes.
    pub fn len(&self) -> usize {
        self.head.len().saturating_add(self.tail.len())
    }

    /// Whether it holds nothing (never, once written).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn write(api_version: &str, uid: &str, answer: &Answer) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(512);
    write_version(&mut out, api_version)?;
    write_head(&mut out, answer)?;
    serde_json::to_writer(&mut out, uid)?;
    write_tail(&mut out, answer)?;
    Ok(out)
}

fn write_version(out: &mut Vec<u8>, api_version: &str) -> Result<(), serde_json::Error> {
    out.extend_from_slice(b"{\"apiVersion\":");
    serde_json::to_writer(&mut *out, api_version)
}

/// The response from after its version through `"uid":`.
fn write_head(out: &mut Vec<u8>, answer: &Answer) -> Result<(), serde_json::Error> {
    out.extend_from_slice(b",\"kind\":\"AdmissionReview\",\"response\":{\"allowed\":");
    out.extend_from_slice(if answer.allowed { b"true" } else { b"false" });
    if let Some(ops) = answer.patch.as_deref().filter(|ops| !ops.is_empty()) {
        let json = serde_json::to_vec(ops)?;
        out.extend_from_slice(b",\"patch\":\"");
        let start = out.len();
        let encoded = base64::encoded_len(json.len(), true).unwrap_or(0);
        out.resize(start + encoded, 0);
        let written = base64::engine::general_purpose::STANDARD
            .encode_slice(&json, &mut out[start..])
            .unwrap_or(0);
        out.truncate(start + written);
        out.extend_from_slice(b"\",\"patchType\":\"JSONPatch\"");
    }
    if let Some((code, message)) = &answer.status {
        out.extend_from_slice(b",\"status\":");
        let status = Status {
            code: *code,
            message,
            reason: match code {
                400 => "BadRequest",
                403 => "Forbidden",
                _ => "",
            },
            status: if answer.allowed { "Success" } else { "Failure" },
        };
        serde_json::to_writer(&mut *out, &status)?;
    }
    out.extend_from_slice(b",\"uid\":");
    Ok(())
}

/// The response from after its uid to the end.
fn write_tail(out: &mut Vec<u8>, answer: &Answer) -> Result<(), serde_json::Error> {
    if !answer.warnings.is_empty() {
        out.extend_from_slice(b",\"warnings\":");
        serde_json::to_writer(&mut *out, &answer.warnings)?;
    }
    out.extend_from_slice(b"}}");
    Ok(())
}

/// The `status` of a denial or an error.
#[derive(Serialize)]
struct Status<'a> {
    code: u16,
    message: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    reason: &'static str,
    status: &'static str,
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answered(api_version: &str, uid: &str, answer: Answer) -> Value {
        serde_json::from_slice(&respond(api_version, uid, answer)).unwrap()
    }

    fn review(version: &str, operation: &str, sub_resource: &str, kind: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": version, "kind": "AdmissionReview",
            "request": {"uid": "u1", "kind": kind,
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "subResource": sub_resource, "operation": operation, "namespace": "ns",
                        "userInfo": {"username": "u"},
                        "object": {"apiVersion": "v1", "kind": "Pod",
                                   "metadata": {"generateName": "x-", "labels": {"a": "b"}},
                                   "spec": {"containers": [], "futureField": 1}}}
        }))
        .unwrap()
    }

    fn pod_kind() -> Value {
        json!({"group": "", "version": "v1", "kind": "Pod"})
    }

    #[test]
    fn parse_table() {
        let body = review(V1BETA1, "CREATE", "", pod_kind());
        let request = parse(&body).unwrap();
        assert!(
            matches!(request.uid, Cow::Borrowed("u1")),
            "borrowed from the body"
        );
        assert_eq!(request.api_version, V1BETA1);
        assert_eq!(request.uid, "u1");
        assert_eq!(request.namespace, "ns");
        let pod = request.pod_creation().unwrap();
        assert_eq!(pod_name(pod), "x-");
        // The object is raw JSON again: metadata, unknown fields and the type fields kept.
        assert_eq!(pod["metadata"]["labels"], json!({"a": "b"}));
        assert_eq!(pod["spec"]["futureField"], 1);
        assert_eq!(pod["kind"], "Pod");

        // The namespace from the object when the request has none.
        let mut body: Value =
            serde_json::from_slice(&review(V1, "CREATE", "", pod_kind())).unwrap();
        body["request"]["namespace"] = json!(null);
        body["request"]["object"]["metadata"]["namespace"] = json!("n2");
        let bytes = serde_json::to_vec(&body).unwrap();
        let request = parse(&bytes).unwrap();
        assert_eq!(request.namespace, "n2");

        // Strings with escapes are unescaped into owned ones.
        let escaped = String::from_utf8(review(V1, "CREATE", "", pod_kind()))
            .unwrap()
            .replace(r#""uid":"u1""#, r#""uid":"u\u0031""#)
            .replace(r#""namespace":"ns""#, r#""namespace":"n\"s""#);
        let request = parse(escaped.as_bytes()).unwrap();
        assert_eq!(request.uid, "u1");
        assert_eq!(request.namespace, "n\"s");
        assert!(request.pod_creation().is_some());

        assert!(matches!(parse(b"[]"), Err(Invalid::NotAReview(_))));
        assert!(matches!(parse(b"not json"), Err(Invalid::NotAReview(_))));
        assert!(matches!(
            parse(br#"{"apiVersion": "admission.k8s.io/v2", "kind": "AdmissionReview"}"#),
            Err(Invalid::Version(_))
        ));
        assert!(matches!(
            parse(br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}"#),
            Err(Invalid::NoRequest)
        ));
        assert!(matches!(
            parse(br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": 3}"#),
            Err(Invalid::NotAReview(_))
        ));
    }

    /// The members kube's `AdmissionRequest` and `ObjectMeta` require are required; the object
    /// gets an empty `metadata` when it has none; what the webhook does not read is not checked.
    #[test]
    fn the_envelope_refuses_what_kube_refused() {
        fn refused(body: Vec<u8>) -> bool {
            matches!(parse(&body), Err(Invalid::NotAReview(message)) if !message.is_empty())
        }
        let base: Value = serde_json::from_slice(&review(V1, "CREATE", "", pod_kind())).unwrap();
        let with = |pointer: &str, value: Value| {
            let mut body = base.clone();
            *body.pointer_mut(pointer).unwrap() = value;
            serde_json::to_vec(&body).unwrap()
        };
        let without = |parent: &str, member: &str| {
            let mut body = base.clone();
            body.pointer_mut(parent)
                .unwrap()
                .as_object_mut()
                .unwrap()
                .remove(member);
            serde_json::to_vec(&body).unwrap()
        };
        for member in ["uid", "kind", "resource", "operation", "userInfo"] {
            assert!(refused(without("/request", member)), "{member}");
        }
        assert!(refused(without("", "kind")));
        assert!(refused(without("/request/kind", "version")));
        assert!(refused(without("/request/resource", "resource")));
        assert!(refused(with("/request/operation", json!("PATCH"))));
        assert!(refused(with("/request/object", json!([1]))));
        assert!(refused(with("/request/object/metadata", json!("x"))));
        assert!(refused(with(
            "/request/object/metadata/labels",
            json!({"a": 1})
        )));
        assert!(refused(with(
            "/request/object/metadata",
            json!({"annotations": {"n": 1}})
        )));
        assert!(refused(with(
            "/request/object/metadata",
            json!({"namespace": 7})
        )));
        assert!(refused(with(
            "/request/object/metadata/generateName",
            json!(7)
        )));

        // Accepted: a null object, null labels, an object without metadata, unknown members.
        let body = with("/request/object", json!(null));
        assert!(parse(&body).unwrap().pod_creation().is_none());
        let body = with("/request/object/metadata/labels", json!(null));
        let request = parse(&body).unwrap();
        assert_eq!(
            request.pod_creation().unwrap()["metadata"]["labels"],
            json!(null)
        );
        let body = without("/request/object", "metadata");
        let request = parse(&body).unwrap();
        assert_eq!(request.pod_creation().unwrap()["metadata"], json!({}));
        let body = with("/request/userInfo", json!({"username": "u", "future": [1]}));
        assert_eq!(parse(&body).unwrap().uid, "u1");
    }

    #[test]
    fn pod_creations_only() {
        let cases = [
            (review(V1, "CREATE", "", pod_kind()), true),
            (review(V1, "UPDATE", "", pod_kind()), false),
            (review(V1, "CREATE", "binding", pod_kind()), false),
            (
                review(
                    V1,
                    "CREATE",
                    "",
                    json!({"group": "apps", "version": "v1", "kind": "Pod"}),
                ),
                false,
            ),
            (
                review(
                    V1,
                    "CREATE",
                    "",
                    json!({"group": "", "version": "v1", "kind": "Secret"}),
                ),
                false,
            ),
        ];
        for (body, want) in cases {
            let request = parse(&body).unwrap();
            assert_eq!(request.pod_creation().is_some(), want, "{request:?}");
        }
    }

    #[test]
    fn debug_container_updates() {
        let mut body: Value =
            serde_json::from_slice(&review(V1, "UPDATE", "ephemeralcontainers", pod_kind()))
                .unwrap();
        body["request"]["oldObject"] = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p"}, "spec": {"containers": []}});
        let bytes = serde_json::to_vec(&body).unwrap();
        let request = parse(&bytes).unwrap();
        assert!(request.pod_creation().is_none());
        let (pod, old) = request.ephemeral_update().unwrap();
        assert_eq!(pod["spec"]["futureField"], 1);
        assert_eq!(old.unwrap()["metadata"]["name"], "p");
        for (operation, sub_resource) in [
            ("CREATE", ""),
            ("UPDATE", ""),
            ("UPDATE", "status"),
            ("CREATE", "ephemeralcontainers"),
        ] {
            let body = review(V1, operation, sub_resource, pod_kind());
            let request = parse(&body).unwrap();
            assert!(
                request.ephemeral_update().is_none(),
                "{operation} {sub_resource}"
            );
        }
    }

    #[test]
    fn salvage_what_a_broken_body_says() {
        assert_eq!(salvage(b"not json"), (V1, String::new()));
        assert_eq!(
            salvage(br#"{"apiVersion": "admission.k8s.io/v1beta1", "request": {"uid": "u"}}"#),
            (V1BETA1, "u".to_owned())
        );
    }

    /// A patch of any length (modulo 3 included) decodes to the operations' JSON, byte for byte.
    #[test]
    fn patches_of_any_length_are_encoded_whole() {
        for count in [1usize, 2, 3, 100, 101, 102] {
            let ops: Vec<noe_core::patch::Op> = (0..count)
                .map(|i| {
                    noe_core::patch::add(
                        noe_core::patch::pointer(&["metadata", "annotations", &format!("k{i}")]),
                        json!("v".repeat(i % 7)),
                    )
                })
                .collect();
            let expected = serde_json::to_vec(&ops).unwrap();
            let patched = answered(
                V1,
                "u",
                Answer {
                    patch: Some(ops),
                    ..Answer::allow()
                },
            );
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(patched["response"]["patch"].as_str().unwrap())
                .unwrap();
            assert_eq!(decoded, expected, "{count} operations");
        }
    }

    #[test]
    fn responses() {
        let patched = answered(
            V1,
            "u",
            Answer {
                allowed: true,
                patch: Some(vec![noe_core::patch::add(
                    noe_core::patch::pointer(&["a"]),
                    json!(1),
                )]),
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
