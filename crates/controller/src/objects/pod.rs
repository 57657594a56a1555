//! A Pod as the pod reflector stores it: identity, node, images, pull secret names, service
//! account, controller owner, phase, the flags that make it out of scope, and the statuses of
//! the containers whose status is an exec-format-error signal (none for a healthy pod).

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use noe_core::images;
use serde::Deserialize;

use super::container::{
    ContainerRun, RawSpecContainer, RawStatus as RawContainerStatus, MAX_STATUSES,
};
use super::meta::{bounded, nullable, RawObject};

/// Pods with more distinct images than this are not judged (see [`PodRecord::too_many_images`]).
pub const MAX_IMAGES: usize = 128;
/// At most this many pull secret names are kept.
const MAX_PULL_SECRETS: usize = 32;
/// The annotation the kubelet puts on mirror pods of static pods.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// `status.phase`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Phase {
    /// Pending.
    Pending,
    /// Running.
    Running,
    /// Succeeded (finished).
    Succeeded,
    /// Failed (finished).
    Failed,
    /// Unknown or missing.
    #[default]
    Unknown,
}

impl Phase {
    fn parse(text: &str) -> Self {
        match text {
            "Pending" => Self::Pending,
            "Running" => Self::Running,
            "Succeeded" => Self::Succeeded,
            "Failed" => Self::Failed,
            _ => Self::Unknown,
        }
    }

    /// Succeeded or Failed: nothing runs any more.
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

/// The owner reference with `controller: true`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// `ReplicaSet`, `StatefulSet`, `DaemonSet`, `Job`, `Node` (mirror pods), ...
    pub kind: String,
    /// Its name.
    pub name: String,
}

/// What pod remediation and exec-format-error detection know of a pod.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(from = "RawPod")]
pub struct PodRecord {
    /// Name and namespace only: the UID is kept below and the resourceVersion is dropped once
    /// the watcher read it ([`PodRecord::forget_version`]), so the store's key (which copies
    /// the UID and version of `metadata` when they are set) holds two strings, not four.
    metadata: ObjectMeta,
    uid: String,
    /// `spec.nodeName`.
    pub node_name: String,
    /// Container, init container and image volume references, deduplicated, in pod order.
    pub images: Vec<String>,
    /// More than [`MAX_IMAGES`] distinct images: the list above is cut and must not be judged.
    pub too_many_images: bool,
    /// `spec.imagePullSecrets` names.
    pub pull_secrets: Vec<String>,
    /// `spec.serviceAccountName` (`None` when empty): credential providers that ask for the
    /// pod's own token (`--credential-provider-sa-tokens`) get one of this account. Shared
    /// between the pods of one account ([`Accounts`]).
    pub service_account: Option<Arc<str>>,
    /// The controller owner.
    pub owner: Option<Owner>,
    /// `status.phase`.
    pub phase: Phase,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// A mirror pod of a static pod (annotation `kubernetes.io/config.mirror`).
    pub mirror: bool,
    /// The containers (and init containers) whose status is a signal of an exec format error
    /// ([`crate::detect::signal`]), trimmed; empty (no allocation) for a healthy pod.
    pub runs: Box<[ContainerRun]>,
}

impl PodRecord {
    /// Name.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// Namespace.
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or_default()
    }

    /// UID.
    pub fn uid(&self) -> &str {
        &self.uid
    }

    /// Drops the `resourceVersion` (the watcher has read it; the store does not need it).
    pub fn forget_version(&mut self) {
        self.metadata.resource_version = None;
    }

    /// A record built in code (tests, benches): a Running pod with a ReplicaSet owner.
    pub fn new(namespace: &str, name: &str, node: &str, images: &[&str]) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            uid: format!("uid-{namespace}-{name}"),
            node_name: node.to_owned(),
            images: images.iter().map(|image| (*image).to_owned()).collect(),
            too_many_images: false,
            pull_secrets: Vec::new(),
            service_account: Some(Arc::from("default")),
            owner: Some(Owner {
                kind: "ReplicaSet".to_owned(),
                name: format!("{name}-rs"),
            }),
            phase: Phase::Running,
            deleting: false,
            mirror: false,
            runs: Box::default(),
        }
    }
}

type RawPod = RawObject<RawSpec, RawStatus>;

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawSpec {
    #[serde(default, deserialize_with = "nullable")]
    node_name: String,
    #[serde(default, deserialize_with = "nullable")]
    containers: Vec<RawSpecContainer>,
    #[serde(default, deserialize_with = "nullable")]
    init_containers: Vec<RawSpecContainer>,
    #[serde(default, deserialize_with = "nullable")]
    volumes: Vec<images::Volume>,
    #[serde(default, deserialize_with = "nullable")]
    image_pull_secrets: Vec<RawName>,
    #[serde(default, deserialize_with = "nullable")]
    service_account_name: String,
}

#[derive(Default, Deserialize)]
struct RawName {
    #[serde(default, deserialize_with = "nullable")]
    name: String,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawStatus {
    #[serde(default, deserialize_with = "nullable")]
    phase: String,
    #[serde(default, deserialize_with = "nullable")]
    container_statuses: Vec<RawContainerStatus>,
    #[serde(default, deserialize_with = "nullable")]
    init_container_statuses: Vec<RawContainerStatus>,
}

/// The statuses that are signals, with their spec container's image and overrides.
fn signal_runs(
    statuses: Vec<RawContainerStatus>,
    containers: &[RawSpecContainer],
) -> Box<[ContainerRun]> {
    let runs: Vec<ContainerRun> = statuses
        .into_iter()
        .take(MAX_STATUSES)
        .map(|status| {
            let spec = containers.iter().find(|c| c.name == status.name());
            status.trim(spec)
        })
        .filter(|run| crate::detect::signal(run) != crate::detect::Signal::Nothing)
        .collect();
    runs.into_boxed_slice()
}

impl From<RawPod> for PodRecord {
    fn from(raw: RawPod) -> Self {
        let RawSpec {
            node_name,
            containers,
            init_containers,
            volumes,
            image_pull_secrets,
            service_account_name,
        } = raw.spec;
        let RawStatus {
            phase,
            mut container_statuses,
            init_container_statuses,
        } = raw.status;
        container_statuses.extend(init_container_statuses);
        let mut spec_containers = containers;
        spec_containers.extend(init_containers);
        let runs = signal_runs(container_statuses, &spec_containers);
        let (images, too_many_images) = images::distinct(
            spec_containers
                .into_iter()
                .map(|c| images::Container::from(c.image))
                .collect(),
            Vec::new(),
            volumes,
            MAX_IMAGES,
        );
        let images = images.iter().map(|image| bounded(image)).collect();
        let pull_secrets = image_pull_secrets
            .into_iter()
            .map(|secret| secret.name)
            .filter(|name| !name.is_empty())
            .take(MAX_PULL_SECRETS)
            .map(|name| bounded(&name))
            .collect();
        let owner = raw
            .metadata
            .owner_references
            .iter()
            .find(|owner| owner.controller)
            .map(|owner| Owner {
                kind: bounded(&owner.kind),
                name: bounded(&owner.name),
            });
        Self {
            node_name: bounded(&node_name),
            images,
            too_many_images,
            pull_secrets,
            service_account: (!service_account_name.is_empty())
                .then(|| Arc::from(bounded(&service_account_name))),
            mirror: raw.metadata.annotations.contains_key(MIRROR_ANNOTATION),
            deleting: raw.metadata.deletion_timestamp.is_some(),
            owner,
            phase: Phase::parse(&phase),
            runs,
            uid: bounded(&raw.metadata.uid),
            metadata: ObjectMeta {
                uid: None,
                ..raw.metadata.identity()
            },
        }
    }
}

super::resource!(PodRecord, "Pod", "pods", NamespaceResourceScope);

/// Most pods of a cluster run as a few accounts: the records of one account share its name
/// instead of holding a copy each (16 bytes per pod, not a string). At most [`MAX_ACCOUNTS`]
/// names are shared; past that, records keep their own copy.
#[derive(Debug, Default)]
pub struct Accounts(HashSet<Arc<str>>);

/// Distinct account names shared.
const MAX_ACCOUNTS: usize = 4096;

impl Accounts {
    /// Points `pod`'s account name at the shared copy (remembering it when it is new).
    pub fn share(&mut self, pod: &mut PodRecord) {
        let Some(account) = &pod.service_account else {
            return;
        };
        if let Some(shared) = self.0.get(account) {
            pod.service_account = Some(shared.clone());
        } else if self.0.len() < MAX_ACCOUNTS {
            self.0.insert(account.clone());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn records_of_one_account_share_its_name() {
        let raw = |account: serde_json::Value| {
            serde_json::from_value::<PodRecord>(serde_json::json!({
                "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
                "spec": {"nodeName": "n1", "serviceAccountName": account,
                         "containers": [{"image": "app:1"}]},
            }))
            .unwrap()
        };
        assert_eq!(raw(serde_json::Value::Null).service_account, None);
        assert_eq!(raw("".into()).service_account, None);
        let mut accounts = Accounts::default();
        let mut first = raw("app".into());
        let mut second = raw("app".into());
        accounts.share(&mut first);
        accounts.share(&mut second);
        let (first, second) = (
            first.service_account.unwrap(),
            second.service_account.unwrap(),
        );
        assert_eq!(&*second, "app");
        assert!(Arc::ptr_eq(&first, &second));
    }
}
