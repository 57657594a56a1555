//! Nodes, Pods and Leases as the apiserver returns them, written from the Kubernetes API
//! reference (core/v1 Node and Pod, coordination.k8s.io/v1 Lease), with the bulk real objects
//! carry (managedFields, env, volumes, probes, node images) so memory measurements see it.

use serde_json::{json, Value};

/// A Node named `name` with `kubernetes.io/arch` and `kubernetes.io/os` labels, Ready, no taints.
pub fn node_json(name: &str, arch: &str, os: &str) -> Value {
    let images: Vec<Value> = (0..20)
        .map(|i| {
            json!({
                "names": [
                    format!("registry.example.com/team{i}/service@sha256:{:064x}", i),
                    format!("registry.example.com/team{i}/service:v1.{i}.0"),
                ],
                "sizeBytes": 50_000_000 + i * 1_000_000,
            })
        })
        .collect();
    let condition = |kind: &str, status: &str, reason: &str| {
        json!({
            "type": kind, "status": status, "reason": reason,
            "message": format!("kubelet reports {kind}={status}"),
            "lastHeartbeatTime": "2026-11-01T10:00:00Z",
            "lastTransitionTime": "2026-10-01T10:00:00Z",
        })
    };
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "beta.kubernetes.io/arch": arch,
                "beta.kubernetes.io/os": os,
                "kubernetes.io/arch": arch,
                "kubernetes.io/os": os,
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/instance-type": "m7g.xlarge",
                "topology.kubernetes.io/region": "eu-west-1",
                "topology.kubernetes.io/zone": "eu-west-1a",
                "node-role.kubernetes.io/worker": "",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "csi.volume.kubernetes.io/nodeid": format!("{{\"ebs.csi.aws.com\":\"i-{name}\"}}"),
            },
            "managedFields": [
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                 "time": "2026-11-01T10:00:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/arch": {}, "f:kubernetes.io/os": {}, "f:kubernetes.io/hostname": {}}},
                              "f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:lastHeartbeatTime": {}, "f:status": {}}}, "f:images": {}}}},
            ],
        },
        "spec": {
            "podCIDR": "10.0.1.0/24",
            "podCIDRs": ["10.0.1.0/24"],
            "providerID": format!("aws:///eu-west-1a/i-{name}"),
        },
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110", "ephemeral-storage": "95Gi"},
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID"),
                condition("Ready", "True", "KubeletReady"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": "10.0.1.10"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "0123456789abcdef0123456789abcdef",
                "systemUUID": "ec2a0000-0000-0000-0000-000000000000",
                "bootID": "0f0f0f0f-0000-0000-0000-000000000000",
                "kernelVersion": "6.1.0-27",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.24",
                "kubeletVersion": "v1.33.1",
                "kubeProxyVersion": "v1.33.1",
                "operatingSystem": os,
                "architecture": arch,
            },
            "images": images,
        },
    })
}

/// What [`pod_json`] builds.
#[derive(Clone, Debug)]
pub struct PodFixture {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.nodeName` (empty: not bound).
    pub node: String,
    /// One container per image (the first three get env, ports, probes and mounts).
    pub images: Vec<String>,
    /// Init container images.
    pub init_images: Vec<String>,
    /// `spec.imagePullSecrets` names.
    pub pull_secrets: Vec<String>,
    /// The controller owner `(kind, name)`, e.g. `("ReplicaSet", "web-5d8f")`.
    pub owner: Option<(String, String)>,
    /// `status.phase`.
    pub phase: String,
    /// `metadata.annotations` beyond the usual ones (e.g. `kubernetes.io/config.mirror`).
    pub annotations: Vec<(String, String)>,
}

impl PodFixture {
    /// A running pod of a ReplicaSet on `node` with one container per image.
    pub fn new(namespace: &str, name: &str, node: &str, images: &[&str]) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            node: node.to_owned(),
            images: images.iter().map(|image| (*image).to_owned()).collect(),
            init_images: Vec::new(),
            pull_secrets: Vec::new(),
            owner: Some(("ReplicaSet".to_owned(), format!("{name}-rs"))),
            phase: "Running".to_owned(),
            annotations: Vec::new(),
        }
    }

    /// The JSON.
    pub fn json(&self) -> Value {
        pod_json(self)
    }
}

fn container(index: usize, image: &str) -> Value {
    let mut container = json!({
        "name": format!("c{index}"),
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "volumeMounts": [
            {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true},
        ],
    });
    if index < 3 {
        let env: Vec<Value> = (0..10)
            .map(|i| json!({"name": format!("SETTING_{i}"), "value": format!("value-of-setting-number-{i}")}))
            .collect();
        container["env"] = Value::from(env);
        container["ports"] =
            json!([{"containerPort": 8080 + index, "name": "http", "protocol": "TCP"}]);
        container["livenessProbe"] = json!({"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3});
        container["readinessProbe"] = container["livenessProbe"].clone();
        if let Some(mounts) = container["volumeMounts"].as_array_mut() {
            mounts.push(json!({"name": "config", "mountPath": "/etc/app"}));
            mounts.push(json!({"name": "cache", "mountPath": "/cache"}));
        }
    }
    container
}

/// A Pod as the apiserver returns it.
pub fn pod_json(pod: &PodFixture) -> Value {
    let mut annotations = serde_json::Map::new();
    annotations.insert(
        "kubectl.kubernetes.io/restartedAt".into(),
        "2026-11-01T09:00:00Z".into(),
    );
    for (key, value) in &pod.annotations {
        annotations.insert(key.clone(), Value::from(value.as_str()));
    }
    let owner_references: Vec<Value> = pod
        .owner
        .iter()
        .map(|(kind, name)| {
            json!({"apiVersion": if kind == "Node" { "v1" } else { "apps/v1" }, "kind": kind,
                   "name": name, "uid": format!("owner-{name}"), "controller": true, "blockOwnerDeletion": true})
        })
        .collect();
    let containers: Vec<Value> = pod
        .images
        .iter()
        .enumerate()
        .map(|(i, image)| container(i, image))
        .collect();
    let init_containers: Vec<Value> = pod
        .init_images
        .iter()
        .enumerate()
        .map(|(i, image)| {
            let mut init = container(i.saturating_add(100), image);
            init["name"] = Value::from(format!("init{i}"));
            init
        })
        .collect();
    let statuses: Vec<Value> = pod
        .images
        .iter()
        .enumerate()
        .map(|(i, image)| {
            json!({"name": format!("c{i}"), "image": image, "imageID": format!("{image}@sha256:{:064x}", i),
                   "containerID": format!("containerd://{:064x}", i), "ready": true, "restartCount": 0,
                   "started": true, "state": {"running": {"startedAt": "2026-11-01T09:00:05Z"}}})
        })
        .collect();
    let pull_secrets: Vec<Value> = pod
        .pull_secrets
        .iter()
        .map(|name| json!({"name": name}))
        .collect();
    let mut spec = json!({
        "containers": containers,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": true,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "serviceAccount": "default",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
            {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300},
        ],
        "volumes": [
            {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ]}},
            {"name": "config", "configMap": {"name": format!("{}-config", pod.name), "defaultMode": 420}},
            {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
        ],
    });
    if !pod.node.is_empty() {
        spec["nodeName"] = Value::from(pod.node.as_str());
    }
    if !init_containers.is_empty() {
        spec["initContainers"] = Value::from(init_containers);
    }
    if !pull_secrets.is_empty() {
        spec["imagePullSecrets"] = Value::from(pull_secrets);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "generateName": format!("{}-", pod.name),
            "namespace": pod.namespace,
            "labels": {"app.kubernetes.io/name": pod.name, "pod-template-hash": "5d8f9c7b6d"},
            "annotations": annotations,
            "ownerReferences": owner_references,
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                 "time": "2026-11-01T09:00:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app.kubernetes.io/name": {}},
                               "f:ownerReferences": {".": {}, "k:{\"uid\":\"owner\"}": {}}},
                              "f:spec": {"f:containers": {"k:{\"name\":\"c0\"}": {".": {}, "f:env": {}, "f:image": {}, "f:name": {}, "f:ports": {}, "f:resources": {}}},
                                         "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:volumes": {}}}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "subresource": "status",
                 "time": "2026-11-01T09:00:06Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {}, "f:startTime": {}}}},
            ],
        },
        "spec": spec,
        "status": {
            "phase": pod.phase,
            "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-01T09:00:01Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-01T09:00:06Z"},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-11-01T09:00:06Z"},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-01T09:00:00Z"},
            ],
            "hostIP": "10.0.1.10",
            "podIP": "10.0.1.77",
            "podIPs": [{"ip": "10.0.1.77"}],
            "qosClass": "Burstable",
            "startTime": "2026-11-01T09:00:01Z",
            "containerStatuses": statuses,
        },
    })
}

/// A `coordination.k8s.io/v1` Lease held by `holder`, renewed at `renew_time` (RFC 3339 with
/// microseconds) for `duration_seconds`.
pub fn lease_json(name: &str, holder: &str, renew_time: &str, duration_seconds: i32) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration_seconds,
            "acquireTime": renew_time,
            "renewTime": renew_time,
            "leaseTransitions": 3,
        },
    })
}

/// A Namespace named `name` with these labels (and the `kubernetes.io/metadata.name` label the
/// apiserver always sets), as the API returns it.
pub fn namespace_json(name: &str, labels: &[(&str, &str)]) -> Value {
    let mut all = serde_json::Map::new();
    all.insert("kubernetes.io/metadata.name".into(), json!(name));
    for (key, value) in labels {
        all.insert((*key).to_owned(), json!(value));
    }
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "uid": format!("ns-{name}"),
            "creationTimestamp": "2026-10-01T10:00:00Z",
            "labels": all,
            "managedFields": [
                {"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
                 "time": "2026-10-01T10:00:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}}},
            ],
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    })
}

/// The scheduling gate noe's gate mode adds.
pub const NOE_GATE: &str = "arch.noe.adevinta.com/platforms";
/// The label noe's gate mode sets on the pods it gates (`gated`).
pub const NOE_GATE_LABEL: &str = "arch.noe.adevinta.com/lookup";

/// A pod of a ReplicaSet as it is stored after noe's webhook gated it at creation: not bound,
/// `Pending` with the `SchedulingGated` condition, the scheduling gate and `lookup: gated`.
pub fn gated_pod_json(namespace: &str, name: &str, images: &[&str]) -> Value {
    let mut fixture = PodFixture::new(namespace, name, "", images);
    fixture.phase = "Pending".to_owned();
    let mut pod = fixture.json();
    pod["metadata"]["labels"][NOE_GATE_LABEL] = json!("gated");
    pod["spec"]["schedulingGates"] = json!([{"name": NOE_GATE}]);
    pod["status"] = json!({
        "phase": "Pending",
        "qosClass": "Burstable",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                        "message": "Scheduling is blocked due to non-empty scheduling gates",
                        "lastTransitionTime": "2026-11-01T09:00:00Z"}],
    });
    pod
}

/// A `v1` ServiceAccount with these annotations (`uid` stamped when stored).
pub fn service_account_json(namespace: &str, name: &str, annotations: &[(&str, &str)]) -> Value {
    let annotations: serde_json::Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
        .collect();
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
    })
}

/// The namespace nfd-worker writes its `NodeFeature` objects to in a default install.
pub const NFD_NAMESPACE: &str = "node-feature-discovery";

/// An NFD `NodeFeature` (`nfd.k8s-sigs.io/v1alpha1`) as nfd-worker writes it for `node`: in
/// [`NFD_NAMESPACE`], named after the node, labelled `nfd.node.kubernetes.io/node-name`, with
/// `features` as `spec.features` (`{flags, attributes, instances}`) and no `spec.labels`.
pub fn node_feature_json(node: &str, features: Value) -> Value {
    json!({
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeature",
        "metadata": {
            "name": node,
            "namespace": NFD_NAMESPACE,
            "labels": {"nfd.node.kubernetes.io/node-name": node},
            "annotations": {"nfd.node.kubernetes.io/worker.version": "v0.17.3"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": format!("nfd-worker-{node}"),
                "uid": format!("uid-nfd-worker-{node}")}],
        },
        "spec": {"features": features, "labels": {}},
    })
}

/// How a container of a [`pod_json`] pod crashed (see [`crash_loop`]).
#[derive(Clone, Debug)]
pub struct Crash {
    /// `restartCount`.
    pub restarts: u32,
    /// The last run's `exitCode`.
    pub exit_code: i32,
    /// The last run's `reason` (`Error`, `StartError`, ...).
    pub reason: String,
    /// The last run's `message`.
    pub message: String,
    /// How long the last run lasted, in seconds.
    pub seconds: i64,
    /// `imageID` (what the kubelet pulled).
    pub image_id: String,
    /// `state.waiting` `(reason, message)`; `CrashLoopBackOff` with the kubelet's back-off
    /// message when `None`.
    pub waiting: Option<(String, String)>,
}

impl Crash {
    /// A crash loop: `restarts` restarts, the last run ended with exit code 1 at once, the
    /// kubelet backing off; `image_id` as given.
    pub fn new(image_id: &str, restarts: u32) -> Self {
        Self {
            restarts,
            exit_code: 1,
            reason: "Error".to_owned(),
            message: String::new(),
            seconds: 0,
            image_id: image_id.to_owned(),
            waiting: None,
        }
    }
}

/// Writes `crash` into the status of container `index` of a [`pod_json`] pod: not ready,
/// waiting, its last run terminated.
pub fn crash_loop(pod: &mut Value, index: usize, crash: &Crash) {
    let name = pod["spec"]["containers"][index]["name"]
        .as_str()
        .unwrap_or("c0")
        .to_owned();
    let (reason, message) = crash.waiting.clone().unwrap_or_else(|| {
        (
            "CrashLoopBackOff".to_owned(),
            format!(
                "back-off 10s restarting failed container={name} pod={}_{}({})",
                pod["metadata"]["name"].as_str().unwrap_or_default(),
                pod["metadata"]["namespace"].as_str().unwrap_or_default(),
                pod["metadata"]["uid"].as_str().unwrap_or_default()
            ),
        )
    });
    let started = 1_793_523_600_i64; // 2026-11-01T09:00:00Z
    let at = |seconds: i64| {
        k8s_openapi::chrono::DateTime::from_timestamp(seconds, 0)
            .unwrap_or_default()
            .to_rfc3339_opts(k8s_openapi::chrono::SecondsFormat::Secs, true)
    };
    let mut terminated = json!({
        "exitCode": crash.exit_code,
        "reason": crash.reason,
        "startedAt": at(started),
        "finishedAt": at(started.saturating_add(crash.seconds)),
        "containerID": format!("containerd://{:064x}", crash.restarts),
    });
    if !crash.message.is_empty() {
        terminated["message"] = Value::from(crash.message.as_str());
    }
    let status = json!({
        "name": name,
        "image": pod["spec"]["containers"][index]["image"],
        "imageID": crash.image_id,
        "containerID": format!("containerd://{:064x}", crash.restarts),
        "ready": false,
        "started": false,
        "restartCount": crash.restarts,
        "state": {"waiting": {"reason": reason, "message": message}},
        "lastState": {"terminated": terminated},
    });
    if !pod["status"]["containerStatuses"].is_array() {
        pod["status"]["containerStatuses"] = json!([]);
    }
    pod["status"]["containerStatuses"][index] = status;
    pod["status"]["phase"] = json!("Running");
}
