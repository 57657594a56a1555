//! One object of a cluster or a file, read for the report: a top-level workload (its pod
//! template's images, OS, pull secrets and requests, and how many pods it runs), an object its
//! owner stands for, a pod where it runs now, or a node's architecture.

use serde_json::Value;

use super::quantity::{Cpu, Memory, QuantityError};
use crate::images::ImageKind;

/// Most replicas read (the apiserver's int32 bound).
pub const MAX_REPLICAS: u64 = i32::MAX as u64;
/// Most images read from one pod template (containers, init containers, image volumes).
pub const MAX_IMAGES_PER_WORKLOAD: usize = 256;
/// Longest kind, namespace, name or pull secret name kept (Kubernetes names are at most 253).
pub const MAX_NAME_LEN: usize = 253;
/// Longest image reference kept (real ones are well under 512).
pub const MAX_IMAGE_LEN: usize = 4096;

/// What one object is to the report.
#[derive(Clone, Debug, PartialEq)]
pub enum Read {
    /// A top-level workload: its pods come from its template.
    Workload(Workload),
    /// A ReplicaSet, Job or Pod with a controller owner: reported as part of its owner.
    Owned(Owner),
    /// A node, with its `kubernetes.io/arch` label (`--include-pods`).
    Node { name: String, arch: String },
    /// Not a workload (a Service, a ConfigMap...): not reported.
    Other,
}

/// An object that belongs to another (`(kind, namespace, name)` of each side).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub owner_kind: String,
    pub owner_name: String,
    /// For a pod: the node it runs on (`spec.nodeName`), when it is not finished.
    pub running_on: Option<Running>,
}

/// Where a pod is now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Running {
    Node(String),
    /// Pending, not yet bound to a node.
    Unscheduled,
}

/// A top-level workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// Pods it runs: `spec.replicas` (default 1); a Job's parallelism (at most its
    /// completions); a DaemonSet's `status.desiredNumberScheduled` (the nodes its controller
    /// found matching), `None` when the object has no status; 1 for a bare pod.
    pub replicas: Option<u64>,
    /// Containers, init containers and image volumes, each once, in the pod's order.
    pub images: Vec<(String, ImageKind)>,
    /// The pod's OS (`spec.os.name`, a `kubernetes.io/os` selector, else `linux`).
    pub os: String,
    /// `spec.imagePullSecrets[].name`.
    pub pull_secrets: Vec<String>,
    /// `spec.serviceAccountName` (else the deprecated `spec.serviceAccount`, else `default`):
    /// a pod without pull secrets of its own gets this ServiceAccount's.
    pub service_account: String,
    /// What one pod requests.
    pub requests: Requests,
    /// For a bare pod: where it runs now.
    pub running_on: Option<Running>,
}

/// CPU and memory one pod requests, as the scheduler counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Requests {
    pub cpu: Cpu,
    pub memory: Memory,
}

impl Requests {
    pub fn times(self, replicas: u64) -> Self {
        Self {
            cpu: self.cpu.times(replicas),
            memory: self.memory.times(replicas),
        }
    }

    pub fn plus(self, other: Self) -> Self {
        Self {
            cpu: self.cpu.plus(other.cpu),
            memory: self.memory.plus(other.memory),
        }
    }

    fn max(self, other: Self) -> Self {
        Self {
            cpu: self.cpu.max(other.cpu),
            memory: self.memory.max(other.memory),
        }
    }
}

/// Why an object cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    #[error("{field} {value:?} {reason}")]
    Quantity {
        field: String,
        value: String,
        #[source]
        reason: QuantityError,
    },
    #[error("{field} is not a whole number from 0 to {MAX_REPLICAS}")]
    Count { field: &'static str },
    #[error("its pod template names more than {MAX_IMAGES_PER_WORKLOAD} images")]
    TooManyImages,
    #[error("{field} is longer than {max} characters")]
    TooLong { field: &'static str, max: usize },
    #[error(transparent)]
    NoPod(#[from] crate::workload::NoPod),
}

/// The kinds reported as workloads (a ReplicaSet, Job or Pod only without a controller owner).
pub const WORKLOAD_KINDS: [&str; 8] = [
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "CronJob",
    "Job",
    "ReplicaSet",
    "ReplicationController",
    "Pod",
];

fn text<'v>(object: &'v Value, pointer: &str) -> &'v str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn bounded(field: &'static str, value: &str, max: usize) -> Result<String, ReadError> {
    if value.len() > max {
        return Err(ReadError::TooLong { field, max });
    }
    Ok(value.to_owned())
}

/// The controller owner of an object (`ownerReferences[]` with `controller: true`).
fn controller_owner(object: &Value) -> Option<(&str, &str)> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|owner| owner.get("controller").and_then(Value::as_bool) == Some(true))
        .map(|owner| (text(owner, "/kind"), text(owner, "/name")))
}

/// Where a pod is now, unless it finished (`Succeeded` or `Failed`).
fn running(pod: &Value) -> Option<Running> {
    if matches!(text(pod, "/status/phase"), "Succeeded" | "Failed") {
        return None;
    }
    match text(pod, "/spec/nodeName") {
        "" => Some(Running::Unscheduled),
        node => Some(Running::Node(node.to_owned())),
    }
}

/// Reads one object.
pub fn read(object: &Value) -> Result<Read, ReadError> {
    let (kind, namespace, name) = crate::workload::identity(object);
    if kind == "Node" {
        return Ok(Read::Node {
            name: bounded("metadata.name", name, MAX_NAME_LEN)?,
            arch: bounded(
                "kubernetes.io/arch",
                text(object, "/metadata/labels/kubernetes.io~1arch"),
                MAX_NAME_LEN,
            )?,
        });
    }
    if !WORKLOAD_KINDS.contains(&kind) {
        return Ok(Read::Other);
    }
    let identity = (
        bounded("kind", kind, MAX_NAME_LEN)?,
        bounded("metadata.namespace", namespace, MAX_NAME_LEN)?,
        bounded("metadata.name", name, MAX_NAME_LEN)?,
    );
    let owned_kinds = ["ReplicaSet", "Job", "Pod"];
    if let (true, Some((owner_kind, owner_name))) =
        (owned_kinds.contains(&kind), controller_owner(object))
    {
        let (kind, namespace, name) = identity;
        return Ok(Read::Owned(Owner {
            kind,
            namespace,
            name,
            owner_kind: bounded("ownerReferences.kind", owner_kind, MAX_NAME_LEN)?,
            owner_name: bounded("ownerReferences.name", owner_name, MAX_NAME_LEN)?,
            running_on: (kind_is_pod(object)).then(|| running(object)).flatten(),
        }));
    }
    let pod_of = crate::workload::pod_of(object)?;
    let pod = pod_of.pod.as_ref();
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let images = crate::images::of_spec(spec);
    if images.len() > MAX_IMAGES_PER_WORKLOAD {
        return Err(ReadError::TooManyImages);
    }
    let images = images
        .into_iter()
        .map(|(image, kind)| Ok((bounded("image", image, MAX_IMAGE_LEN)?, kind)))
        .collect::<Result<Vec<_>, ReadError>>()?;
    let policy = crate::decide::Policy::default();
    let os = crate::decide::plan(pod, &policy).os.to_owned();
    let pull_secrets = spec
        .get("imagePullSecrets")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|secret| text(secret, "/name"))
        .filter(|secret| !secret.is_empty())
        .take(MAX_IMAGES_PER_WORKLOAD)
        .map(|secret| bounded("imagePullSecrets.name", secret, MAX_NAME_LEN))
        .collect::<Result<Vec<_>, _>>()?;
    let service_account = [
        text(spec, "/serviceAccountName"),
        text(spec, "/serviceAccount"),
    ]
    .into_iter()
    .find(|name| !name.is_empty())
    .unwrap_or("default");
    let (kind, namespace, name) = identity;
    Ok(Read::Workload(Workload {
        service_account: bounded("serviceAccountName", service_account, MAX_NAME_LEN)?,
        replicas: replicas(&kind, object)?,
        running_on: (kind == "Pod").then(|| running(object)).flatten(),
        kind,
        namespace,
        name,
        images,
        os: bounded("os", &os, MAX_NAME_LEN)?,
        pull_secrets,
        requests: pod_requests(spec)?,
    }))
}

fn kind_is_pod(object: &Value) -> bool {
    text(object, "/kind") == "Pod"
}

/// A count field: absent is `default`; present, a whole number up to [`MAX_REPLICAS`].
fn count(
    object: &Value,
    pointer: &str,
    field: &'static str,
    default: u64,
) -> Result<u64, ReadError> {
    match object.pointer(pointer) {
        None | Some(Value::Null) => Ok(default),
        Some(value) => value
            .as_u64()
            .filter(|n| *n <= MAX_REPLICAS)
            .ok_or(ReadError::Count { field }),
    }
}

/// How many pods the workload runs (see [`Workload::replicas`]).
fn replicas(kind: &str, object: &Value) -> Result<Option<u64>, ReadError> {
    let job = |spec: &str| -> Result<Option<u64>, ReadError> {
        let parallelism = count(
            object,
            &format!("{spec}/parallelism"),
            "spec.parallelism",
            1,
        )?;
        let completions = count(
            object,
            &format!("{spec}/completions"),
            "spec.completions",
            MAX_REPLICAS,
        )?;
        Ok(Some(parallelism.min(completions)))
    };
    match kind {
        "Pod" => Ok(Some(1)),
        "DaemonSet" => match object.pointer("/status/desiredNumberScheduled") {
            None | Some(Value::Null) => Ok(None),
            Some(_) => count(
                object,
                "/status/desiredNumberScheduled",
                "status.desiredNumberScheduled",
                0,
            )
            .map(Some),
        },
        "Job" => job("/spec"),
        "CronJob" => job("/spec/jobTemplate/spec"),
        _ => count(object, "/spec/replicas", "spec.replicas", 1).map(Some),
    }
}

/// One container's requests: `resources.requests`, else `resources.limits` (the apiserver
/// defaults a missing request to the limit).
fn container_requests(container: &Value) -> Result<Requests, ReadError> {
    let quantity = |resource: &str| -> Option<&str> {
        ["requests", "limits"].into_iter().find_map(|list| {
            container
                .pointer(&format!("/resources/{list}/{resource}"))
                .and_then(Value::as_str)
        })
    };
    resource_pair(quantity("cpu"), quantity("memory"), "resources.requests")
}

fn resource_pair(
    cpu: Option<&str>,
    memory: Option<&str>,
    field: &str,
) -> Result<Requests, ReadError> {
    let error = |resource: &str, value: &str, reason| ReadError::Quantity {
        field: format!("{field}.{resource}"),
        value: value.chars().take(32).collect(),
        reason,
    };
    Ok(Requests {
        cpu: cpu
            .map(|v| Cpu::parse(v).map_err(|r| error("cpu", v, r)))
            .transpose()?
            .unwrap_or_default(),
        memory: memory
            .map(|v| Memory::parse(v).map_err(|r| error("memory", v, r)))
            .transpose()?
            .unwrap_or_default(),
    })
}

/// What a pod requests, as the scheduler counts it: the sum of its containers and sidecars
/// (init containers with `restartPolicy: Always`), or the largest init container (with the
/// sidecars started before it) when that is more; plus `spec.overhead`. Pod-level
/// `spec.resources.requests` replace the containers' sum for the resources they name.
pub fn pod_requests(spec: &Value) -> Result<Requests, ReadError> {
    let list = |key: &str| {
        spec.get(key)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    };
    let mut sum = Requests::default();
    for container in list("containers") {
        sum = sum.plus(container_requests(container)?);
    }
    let mut sidecars = Requests::default();
    let mut init_peak = Requests::default();
    for init in list("initContainers") {
        let requests = container_requests(init)?;
        let during = if text(init, "/restartPolicy") == "Always" {
            sum = sum.plus(requests);
            sidecars = sidecars.plus(requests);
            sidecars
        } else {
            requests.plus(sidecars)
        };
        init_peak = init_peak.max(during);
    }
    let mut pod = sum.max(init_peak);
    let level = |resource: &str| {
        spec.pointer(&format!("/resources/requests/{resource}"))
            .and_then(Value::as_str)
    };
    let pod_level = resource_pair(level("cpu"), level("memory"), "spec.resources.requests")?;
    if level("cpu").is_some() {
        pod.cpu = pod_level.cpu;
    }
    if level("memory").is_some() {
        pod.memory = pod_level.memory;
    }
    let overhead = |resource: &str| {
        spec.pointer(&format!("/overhead/{resource}"))
            .and_then(Value::as_str)
    };
    Ok(pod.plus(resource_pair(
        overhead("cpu"),
        overhead("memory"),
        "spec.overhead",
    )?))
}
