//! AdmissionReview requests (`admission.k8s.io/v1` and `v1beta1`), read; the response is written
//! by [`super::response`].
//!
//! Requests are read by [`parse`] into a narrow envelope: the fields kube's
//! `kube::core::admission::AdmissionRequest` requires are required here too (the same bodies are
//! refused), the ones the webhook does not read (`userInfo`, `options`, ...) are skipped without
//! being built, and the object is kept as the raw JSON the apiserver sent, fields newer than our
//! k8s-openapi included, so the decision and the patch work on it directly, less what no step
//! reads (`admission/prune.rs`: the status, field-manager entries, containers but their names and
//! images). Parsing with kube's own types cost more: they buffer the whole review for
//! their flattened type fields, build the object's `metadata` as `ObjectMeta`, and the raw pod had
//! to be rebuilt from it (docs/benchmarks.md, "The admission envelope").

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::Deserialize;
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

/// What the webhook decides about in a request.
#[derive(Debug)]
pub enum Subject<'r> {
    /// The pod of a pod creation ([`Request::pod_creation`]).
    PodCreation(&'r Value),
    /// A pod and its previous version, debug containers being added
    /// ([`Request::ephemeral_update`]).
    DebugContainers(&'r Value, Option<&'r Value>),
    /// Anything else: allowed unchanged.
    Other,
}

impl Request<'_> {
    /// What the webhook decides about in this request.
    pub fn subject(&self) -> Subject<'_> {
        if let Some(pod) = self.pod_creation() {
            return Subject::PodCreation(pod);
        }
        match self.ephemeral_update() {
            Some((pod, old)) => Subject::DebugContainers(pod, old),
            None => Subject::Other,
        }
    }

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
/// [`Envelope::pod_creation`] say.
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
    /// `request.object`, as sent, when the request creates a pod (`Pod` in the core group,
    /// `CREATE`, no subresource).
    pub pod_creation: Option<&'b str>,
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
    let object = request.object.map(RawValue::get);
    let creates = creates_a_pod(
        &request.kind.kind,
        &request.kind.group,
        request.operation,
        request.sub_resource.as_deref(),
    );
    Ok(Envelope {
        api_version,
        uid: request.uid,
        kind: request.kind.kind,
        group: request.kind.group,
        operation: request.operation,
        sub_resource: request.sub_resource,
        namespace: request.namespace,
        object,
        pod_creation: object.filter(|_| creates),
        old_object: request.old_object.map(RawValue::get),
    })
}

impl<'b> Envelope<'b> {
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
