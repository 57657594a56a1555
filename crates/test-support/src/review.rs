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

/// A pod CREATE review as the apiserver sends a Deployment's pod (about 3.7 KiB with one image):
/// besides [`pod_review`]'s, field-manager entries, an owner reference, env, ports, resources,
/// probes, a security context, the service account token volume and its mount, the default
/// tolerations and a status. Most of it is read by no step of the decision.
pub fn deployment_pod_review(uid: &str, images: &[String]) -> Value {
    let mut review = pod_review(uid, images);
    let pod = &mut review["request"]["object"];
    let env: Vec<Value> = (0..12)
        .map(|i| json!({"name": format!("SETTING_{i}"), "value": format!("value-{i}-of-the-deployment")}))
        .collect();
    let containers: Vec<Value> = images
        .iter()
        .enumerate()
        .map(|(i, image)| {
            json!({
                "name": format!("c{i}"), "image": image, "imagePullPolicy": "IfNotPresent",
                "env": env, "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                "resources": {"limits": {"cpu": "500m", "memory": "256Mi"},
                              "requests": {"cpu": "100m", "memory": "128Mi"}},
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                                  "periodSeconds": 10, "timeoutSeconds": 1, "failureThreshold": 3,
                                  "successThreshold": 1},
                "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080, "scheme": "HTTP"},
                                   "periodSeconds": 5, "timeoutSeconds": 1, "failureThreshold": 3,
                                   "successThreshold": 1},
                "volumeMounts": [{"name": "kube-api-access-x7k2p", "readOnly": true,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "securityContext": {"allowPrivilegeEscalation": false,
                                    "readOnlyRootFilesystem": true, "runAsNonRoot": true}
            })
        })
        .collect();
    pod["spec"]["containers"] = Value::Array(containers);
    let owner = "5d8c7b9f-0000-4000-8000-000000000000";
    pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "name": "web-5d8c7b9f6", "uid": owner, "controller": true, "blockOwnerDeletion": true}]);
    pod["metadata"]["managedFields"] = json!([{
        "manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
        "time": "2026-11-23T10:00:00Z", "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {"f:generateName": {},
                           "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
                           "f:ownerReferences": {".": {}, format!("k:{{\"uid\":\"{owner}\"}}"): {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"c0\"}": {
                           ".": {}, "f:env": {".": {}}, "f:image": {}, "f:imagePullPolicy": {},
                           "f:livenessProbe": {".": {}}, "f:name": {}, "f:ports": {".": {}},
                           "f:readinessProbe": {".": {}}, "f:resources": {".": {}}}},
                       "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {},
                       "f:schedulerName": {}, "f:securityContext": {},
                       "f:terminationGracePeriodSeconds": {}}
        }
    }]);
    pod["spec"]["volumes"] = json!([{"name": "kube-api-access-x7k2p", "projected": {
        "defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                        "path": "namespace"}]}}]}}]);
    pod["spec"]["tolerations"] = json!([
        {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists",
         "tolerationSeconds": 300},
        {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists",
         "tolerationSeconds": 300}]);
    pod["spec"]["dnsPolicy"] = json!("ClusterFirst");
    pod["spec"]["schedulerName"] = json!("default-scheduler");
    pod["spec"]["terminationGracePeriodSeconds"] = json!(30);
    pod["status"] = json!({"phase": "Pending", "qosClass": "Burstable"});
    review
}

/// The object of [`deployment_pod_review`] for `image`, as the apiserver sends the `n`th pod of
/// its ReplicaSet (`n` below 60): a name generated from `generateName` with the five characters
/// `suffix`, and a uid, creation time, field-manager time, token volume name (mounted in the
/// container) and start time of its own. Pods of one template differ in nothing else.
pub fn deployment_pod_replica(image: &str, n: usize, suffix: &str) -> Value {
    let mut pod = deployment_pod_review("u", &[image.to_owned()])["request"]["object"].clone();
    let time = format!("2026-11-28T09:00:{n:02}Z");
    let metadata = &mut pod["metadata"];
    metadata["name"] = json!(format!("web-5d8c7b9f6-{suffix}"));
    metadata["uid"] = json!(format!("{n:08}-1111-4222-8333-444444444444"));
    metadata["creationTimestamp"] = json!(time);
    metadata["managedFields"][0]["time"] = json!(time);
    let volume = format!("kube-api-access-{suffix}");
    pod["spec"]["volumes"][0]["name"] = json!(volume);
    pod["spec"]["containers"][0]["volumeMounts"][0]["name"] = json!(volume);
    pod["status"]["startTime"] = json!(time);
    pod
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
