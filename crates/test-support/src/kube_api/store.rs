//! The scripted API server's state: objects per resource, scripted container logs, a resource version counter, a bounded
//! history of changes for watches, recorded requests and scripted faults.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::broadcast;

use super::fault::{Fault, RecordedRequest};

/// How many changes are kept for watches to resume from; older resource versions get `410 Gone`.
pub(crate) const HISTORY: usize = 200_000;
/// Changes buffered per watch before a slow watch is ended (it resumes from the history).
const FANOUT: usize = 8192;
/// How many requests are recorded (the oldest are dropped).
pub(crate) const MAX_RECORDED: usize = 100_000;

/// A resource the server knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    /// `v1` Node (cluster scoped).
    Nodes,
    /// `v1` Pod.
    Pods,
    /// `coordination.k8s.io/v1` Lease.
    Leases,
    /// `events.k8s.io/v1` Event.
    Events,
    /// `v1` Namespace (cluster scoped).
    Namespaces,
    /// `apps/v1` Deployment.
    Deployments,
    /// `apps/v1` StatefulSet.
    StatefulSets,
    /// `apps/v1` DaemonSet.
    DaemonSets,
    /// `apps/v1` ReplicaSet.
    ReplicaSets,
    /// `v1` ReplicationController.
    ReplicationControllers,
    /// `batch/v1` Job.
    Jobs,
    /// `batch/v1` CronJob.
    CronJobs,
    /// `v1` Secret.
    Secrets,
    /// `v1` ServiceAccount (and its `token` subresource, the TokenRequest API).
    ServiceAccounts,
    /// `nfd.k8s-sigs.io/v1alpha1` NodeFeature (node-feature-discovery's CRD).
    NodeFeatures,
    /// `v1` ConfigMap (server-side apply too).
    ConfigMaps,
}

impl Resource {
    pub(crate) fn kind(self) -> &'static str {
        match self {
            Self::Nodes => "Node",
            Self::Pods => "Pod",
            Self::Leases => "Lease",
            Self::Events => "Event",
            Self::Namespaces => "Namespace",
            Self::Deployments => "Deployment",
            Self::StatefulSets => "StatefulSet",
            Self::DaemonSets => "DaemonSet",
            Self::ReplicaSets => "ReplicaSet",
            Self::ReplicationControllers => "ReplicationController",
            Self::Jobs => "Job",
            Self::CronJobs => "CronJob",
            Self::Secrets => "Secret",
            Self::ServiceAccounts => "ServiceAccount",
            Self::NodeFeatures => "NodeFeature",
            Self::ConfigMaps => "ConfigMap",
        }
    }

    pub(crate) fn api_version(self) -> &'static str {
        match self {
            Self::Nodes
            | Self::Pods
            | Self::Namespaces
            | Self::ReplicationControllers
            | Self::Secrets
            | Self::ServiceAccounts
            | Self::ConfigMaps => "v1",
            Self::Deployments | Self::StatefulSets | Self::DaemonSets | Self::ReplicaSets => {
                "apps/v1"
            }
            Self::Jobs | Self::CronJobs => "batch/v1",
            Self::Leases => "coordination.k8s.io/v1",
            Self::Events => "events.k8s.io/v1",
            Self::NodeFeatures => "nfd.k8s-sigs.io/v1alpha1",
        }
    }

    pub(crate) fn namespaced(self) -> bool {
        !matches!(self, Self::Nodes | Self::Namespaces)
    }
}

/// `(namespace, name)`; the namespace is empty for cluster-scoped objects.
pub(crate) type Key = (String, String);

/// A stored object: its JSON and the fields a field or label selector may ask about.
#[derive(Clone, Debug)]
pub(crate) struct Stored {
    pub(crate) json: Bytes,
    /// `spec.nodeName` (empty when unset).
    pub(crate) node_name: String,
    /// `status.phase` (empty when unset).
    pub(crate) phase: String,
    /// `metadata.labels`.
    pub(crate) labels: BTreeMap<String, String>,
}

impl Stored {
    fn new(json: Bytes, object: &Value) -> Self {
        let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
        let labels = object["metadata"]["labels"]
            .as_object()
            .map(|labels| {
                labels
                    .iter()
                    .map(|(key, value)| (key.clone(), text(value)))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            json,
            node_name: text(&object["spec"]["nodeName"]),
            phase: text(&object["status"]["phase"]),
            labels,
        }
    }
}

/// One change, as a watch sends it.
#[derive(Clone, Debug)]
pub(crate) struct Change {
    pub(crate) resource: Resource,
    pub(crate) rv: u64,
    /// `ADDED`, `MODIFIED`, `DELETED`, or `BOOKMARK` (sent to every watch of the resource).
    pub(crate) kind: &'static str,
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) object: Stored,
    /// The object before a `MODIFIED` change (selector watches turn a change into or out of
    /// their selection into `ADDED` or `DELETED`, as the apiserver's watch cache does).
    pub(crate) previous: Option<Stored>,
}

/// A container's scripted log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodLog {
    /// These bytes (any bytes: invalid UTF-8, control characters).
    Text(Vec<u8>),
    /// The answer's headers, then a body that never comes.
    Hang,
    /// A body that never ends and ignores `limitBytes`.
    Endless,
}

/// The state, shared by the server's connections and the test's [`crate::KubeApi`].
pub(crate) type Shared = Arc<Mutex<Inner>>;

/// The state, even after a panicking holder (a test's assertion) poisoned it.
pub(crate) fn lock(state: &Shared) -> MutexGuard<'_, Inner> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) struct Inner {
    pub(crate) rv: u64,
    pub(crate) objects: BTreeMap<Resource, BTreeMap<Key, Stored>>,
    pub(crate) history: VecDeque<Change>,
    /// Watches from a resource version below this get `410 Gone`.
    pub(crate) oldest: u64,
    pub(crate) requests: VecDeque<RecordedRequest>,
    pub(crate) faults: Vec<Fault>,
    pub(crate) changes: broadcast::Sender<Change>,
    /// Every recorded request, for whoever listens ([`crate::KubeApi::subscribe_requests`]).
    pub(crate) recorded: broadcast::Sender<RecordedRequest>,
    pub(crate) uid: u64,
    /// Every watch ends after this long ([`crate::KubeApi::watch_lifetime`]).
    pub(crate) watch_lifetime: Option<std::time::Duration>,
    /// The tokens TokenReviews accept ([`crate::KubeApi::accept_token`]).
    pub(crate) tokens: BTreeMap<String, super::token_review::ScriptedToken>,
    /// Container logs by `(namespace, pod, container, previous)` ([`crate::KubeApi::set_log`]).
    pub(crate) logs: BTreeMap<(String, String, String, bool), PodLog>,
    /// Requests held back until released ([`crate::KubeApi::hold`]).
    pub(crate) holds: Vec<super::hold::Hold>,
}

impl Inner {
    pub(crate) fn new() -> Self {
        let (changes, _) = broadcast::channel(FANOUT);
        let (recorded, _) = broadcast::channel(FANOUT);
        Self {
            recorded,
            rv: 1000,
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            oldest: 0,
            requests: VecDeque::new(),
            faults: Vec::new(),
            changes,
            uid: 0,
            watch_lifetime: None,
            tokens: BTreeMap::new(),
            logs: BTreeMap::new(),
            holds: Vec::new(),
        }
    }

    pub(crate) fn next_rv(&mut self) -> u64 {
        self.rv = self.rv.saturating_add(1);
        self.rv
    }

    /// Stamps `resourceVersion` (and `uid`, `namespace`, `creationTimestamp` when missing) into
    /// the object, stores it and tells the watches. Returns the stored JSON.
    pub(crate) fn put(
        &mut self,
        resource: Resource,
        namespace: &str,
        mut object: Value,
    ) -> Result<Stored, String> {
        let name = object["metadata"]["name"]
            .as_str()
            .filter(|name| !name.is_empty())
            .ok_or("metadata.name is required")?
            .to_owned();
        let key = (namespace.to_owned(), name);
        let previous = self
            .objects
            .get(&resource)
            .and_then(|objects| objects.get(&key))
            .cloned();
        let rv = self.next_rv();
        if !object["metadata"]["uid"].is_string() {
            self.uid = self.uid.saturating_add(1);
            object["metadata"]["uid"] = Value::from(format!("uid-{:012}", self.uid));
        }
        if !object["metadata"]["creationTimestamp"].is_string() {
            object["metadata"]["creationTimestamp"] = Value::from("2026-11-01T00:00:00Z");
        }
        if resource.namespaced() {
            object["metadata"]["namespace"] = Value::from(namespace);
        }
        object["metadata"]["resourceVersion"] = Value::from(rv.to_string());
        object["kind"] = Value::from(resource.kind());
        object["apiVersion"] = Value::from(resource.api_version());
        let stored = Stored::new(Bytes::from(object.to_string()), &object);
        self.objects
            .entry(resource)
            .or_default()
            .insert(key.clone(), stored.clone());
        self.record_change(Change {
            resource,
            rv,
            kind: if previous.is_some() {
                "MODIFIED"
            } else {
                "ADDED"
            },
            namespace: namespace.to_owned(),
            name: key.1.clone(),
            object: stored.clone(),
            previous,
        });
        Ok(stored)
    }

    /// Removes an object and tells the watches (the DELETED event carries a new resource version).
    pub(crate) fn delete(&mut self, resource: Resource, key: &Key) -> Option<Stored> {
        let old = self.objects.get_mut(&resource)?.remove(key)?;
        let rv = self.next_rv();
        let mut object: Value = serde_json::from_slice(&old.json).unwrap_or(Value::Null);
        object["metadata"]["resourceVersion"] = Value::from(rv.to_string());
        let stored = Stored::new(Bytes::from(object.to_string()), &object);
        self.record_change(Change {
            resource,
            rv,
            kind: "DELETED",
            namespace: key.0.clone(),
            name: key.1.clone(),
            object: stored.clone(),
            previous: None,
        });
        Some(stored)
    }

    pub(crate) fn get(&self, resource: Resource, key: &Key) -> Option<&Stored> {
        self.objects.get(&resource)?.get(key)
    }

    fn record_change(&mut self, change: Change) {
        if self.history.len() >= HISTORY {
            if let Some(dropped) = self.history.pop_front() {
                self.oldest = dropped.rv.saturating_add(1);
            }
        }
        self.history.push_back(change.clone());
        // No receiver is fine: nobody watches.
        let _ = self.changes.send(change);
    }

    /// Forgets the history: every watch from an older resource version gets `410 Gone`.
    pub(crate) fn compact(&mut self) {
        self.history.clear();
        self.oldest = self.rv.saturating_add(1);
    }

    /// Sends a BOOKMARK at the current resource version to every watch of `resource`.
    pub(crate) fn bookmark(&mut self, resource: Resource) {
        let rv = self.rv;
        let object = serde_json::json!({
            "kind": resource.kind(),
            "apiVersion": resource.api_version(),
            "metadata": {"resourceVersion": rv.to_string()},
        });
        let _ = self.changes.send(Change {
            resource,
            rv,
            kind: "BOOKMARK",
            namespace: String::new(),
            name: String::new(),
            object: Stored::new(Bytes::from(object.to_string()), &Value::Null),
            previous: None,
        });
    }

    /// Ends every open watch (clients resume from their last resource version).
    pub(crate) fn end_watches(&mut self) {
        let _ = self.changes.send(Change {
            resource: Resource::Nodes,
            rv: self.rv,
            kind: "RESET",
            namespace: String::new(),
            name: String::new(),
            object: Stored::new(Bytes::new(), &Value::Null),
            previous: None,
        });
    }

    pub(crate) fn record(&mut self, request: RecordedRequest) {
        if self.requests.len() >= MAX_RECORDED {
            self.requests.pop_front();
        }
        if self.recorded.receiver_count() > 0 {
            let _ = self.recorded.send(request.clone());
        }
        self.requests.push_back(request);
    }

    /// The first scripted fault matching this request, consumed.
    pub(crate) fn take_fault(&mut self, method: &str, path: &str) -> Option<Fault> {
        let index = self
            .faults
            .iter()
            .position(|fault| fault.matches(method, path))?;
        let fault = self.faults.get_mut(index)?;
        fault.times = fault.times.saturating_sub(1);
        let taken = fault.clone();
        if fault.times == 0 {
            self.faults.remove(index);
        }
        Some(taken)
    }
}
