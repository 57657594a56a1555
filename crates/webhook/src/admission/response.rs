//! The response AdmissionReview (`admission.k8s.io/v1` and `v1beta1`), written by [`respond`]:
//! kube's `AdmissionResponse` serializes the patch as an array of numbers, where the API
//! documents base64 (and the array is four times larger). An answer written once is
//! [`Rendered`]: answered again (the decision memo) with another request's version and uid.

use base64::Engine;
use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;

use super::review::{V1, V1BETA1};

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

/// The response to a body that cannot be answered normally (`answer`: refused as invalid, or
/// allowed after an internal error), in the version and for the uid the body still tells.
pub fn salvaged(body: &[u8], answer: Answer) -> Bytes {
    let (version, uid) = salvage(body);
    respond(version, &uid, answer)
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

    #[test]
    fn salvage_what_a_broken_body_says() {
        assert_eq!(salvage(b"not json"), (V1, String::new()));
        assert_eq!(
            salvage(br#"{"apiVersion": "admission.k8s.io/v1beta1", "request": {"uid": "u"}}"#),
            (V1BETA1, "u".to_owned())
        );
    }
}
