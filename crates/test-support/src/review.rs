//! AdmissionReview bodies as the apiserver sends them, for benchmarks and tests.

use serde_json::{json, Value};

/// A pod CREATE review whose containers run `images`, like the apiserver sends (about 500 bytes
/// with one image).
pub fn pod_review(uid: &str, images: &[String]) -> Value {
    let containers: Vec<Value> = images
        .iter()
        .enumerate()
        .map(|(i, image)| json!({"name": format!("c{i}"), "image": image, "resources": {}}))
        .collect();
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "web-5d8c7b9f6-", "namespace": "bench",
                      "labels": {"app": "web", "pod-template-hash": "5d8c7b9f6"}},
        "spec": {"containers": containers, "restartPolicy": "Always",
                 "serviceAccountName": "default"}
    });
    admission_review("admission.k8s.io/v1", "CREATE", "bench", uid, &pod)
}

/// The AdmissionReview the apiserver sends for `operation` on the pod `object` in `namespace`,
/// in AdmissionReview `version` (`admission.k8s.io/v1` or `v1beta1`).
pub fn admission_review(
    version: &str,
    operation: &str,
    namespace: &str,
    uid: &str,
    object: &Value,
) -> Value {
    json!({
        "apiVersion": version,
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "object": object,
            "dryRun": false
        }
    })
}

/// The AdmissionReview the apiserver sends when `kubectl debug` adds an ephemeral container to a
/// running pod: an `UPDATE` of the `pods/ephemeralcontainers` subresource, `object` the pod with
/// the new container, `oldObject` the pod before.
pub fn ephemeral_review(
    version: &str,
    namespace: &str,
    uid: &str,
    object: &Value,
    old_object: &Value,
) -> Value {
    json!({
        "apiVersion": version,
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "ephemeralcontainers",
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "requestSubResource": "ephemeralcontainers",
            "name": object["metadata"]["name"],
            "namespace": namespace,
            "operation": "UPDATE",
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
            "object": object,
            "oldObject": old_object,
            "dryRun": false,
            "options": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}
        }
    })
}
