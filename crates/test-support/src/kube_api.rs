//! A scripted Kubernetes API server on `127.0.0.1:0` (plain HTTP, or TLS from a [`TestCa`]) for
//! kube's real `Client`: no kube-apiserver can run here. It speaks the few REST paths noe-rs
//! uses, answering JSON written from the Kubernetes API reference:
//!
//! - `v1` nodes, pods and namespaces, `coordination.k8s.io/v1` leases, `events.k8s.io/v1`
//!   events, node-feature-discovery's `nfd.k8s-sigs.io/v1alpha1` nodefeatures; the workloads (`apps/v1` deployments, statefulsets, daemonsets, replicasets,
//!   `batch/v1` jobs and cronjobs, `v1` replicationcontrollers), `v1` secrets and
//!   serviceaccounts, stored and listed as put (no validation);
//! - list with `limit`/`continue` pages and the list `resourceVersion`; field selectors on
//!   `metadata.name`, `metadata.namespace`, `spec.nodeName` and `status.phase` (`=`, `==`,
//!   `!=`) and label selectors (equality and set-based), all requirements ANDed;
//! - watch (`?watch=1`): newline-delimited `ADDED`/`MODIFIED`/`DELETED` events from the
//!   requested resource version, filtered by the same selectors (an object changing into the
//!   selection is `ADDED`, out of it `DELETED`, like the apiserver's watch cache),
//!   `BOOKMARK`s with `allowWatchBookmarks` ([`KubeApi::bookmark`]),
//!   `timeoutSeconds`, and an `ERROR` event with `410 Gone` when the version is older than the
//!   history ([`KubeApi::compact`]), after which clients relist;
//! - get, create (`409 AlreadyExists`), replace and merge patch with a `metadata.resourceVersion`
//!   precondition (`409 Conflict`), delete with a `uid` precondition;
//! - pod creations and updates validated as the apiserver does for scheduling gates and
//!   KEP-3838 (`422 Invalid` with its messages): gates only removed, never with `nodeName`;
//!   tolerations only added; on a gated pod nodeSelector keys only added and required node
//!   affinity terms only appended to; nothing else in `spec` changed but images and the
//!   fields pods may always change;
//! - `v1` serviceaccounts and `POST serviceaccounts/NAME/token` (the TokenRequest API: `404`
//!   for a missing account, `422` for an expiry under 10 minutes, else a token naming the
//!   account, the audiences and a counter, with its `expirationTimestamp`);
//! - `POST pods/NAME/eviction` (deletes the pod; a PodDisruptionBudget's `429` is scripted with
//!   [`Fault::pdb_blocks_eviction`]);
//! - `GET pods/NAME/log` with `container`, `previous` and `limitBytes`, from logs scripted with
//!   [`KubeApi::set_log`] ([`PodLog`]: any bytes, one that hangs, one that never ends), `400`
//!   for `previous` without a previous run, as the kubelet answers;
//! - `v1` configmaps, and server-side apply of any object (`PATCH` with
//!   `application/apply-patch+yaml`, JSON or YAML: `fieldManager`, `force`, conflicts between
//!   managers, omitted fields removed, `metadata.managedFields` kept; see `kube_api/apply.rs`);
//! - `POST authentication.k8s.io/v1 tokenreviews` for the tokens of [`KubeApi::accept_token`];
//! - scripted [`Fault`]s for any method and path; requests held back until released
//!   ([`KubeApi::hold`]); every request recorded ([`KubeApi::requests`]).
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use noe_test_support::{node_json, KubeApi};
//! let api = KubeApi::start().await?;
//! api.put_node(node_json("n1", "arm64", "linux"));
//! let client = api.client()?; // kube::Client pointed at it
//! # Ok(()) }
//! ```

mod apply;
mod fault;
mod handler;
mod hold;
mod in_memory;
mod logs;
mod objects;
mod query;
mod select;
mod status;
mod store;
mod token_review;
mod validate;

use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use serde_json::Value;

use crate::serve::{Handler, Server};
use crate::TestCa;
pub use fault::{Fault, RecordedRequest};
pub use hold::Held;
pub use objects::{
    crash_loop, gated_pod_json, lease_json, namespace_json, node_feature_json, node_json, pod_json,
    service_account_json, Crash, PodFixture, NFD_NAMESPACE, NOE_GATE, NOE_GATE_LABEL,
};
use store::{lock, Inner, Shared};
pub use store::{PodLog, Resource};

/// The content type of server-side apply.
pub const APPLY_PATCH: &str = "application/apply-patch+yaml";

/// The scripted API server; dropping it stops it.
pub struct KubeApi {
    server: Server,
    state: Shared,
    tls: Option<TestCa>,
}

impl std::fmt::Debug for KubeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeApi")
            .field("addr", &self.server.addr())
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

impl KubeApi {
    /// Starts on `127.0.0.1:0` over plain HTTP.
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with(None).await
    }

    /// Starts on `127.0.0.1:0` over TLS with a loopback certificate from `ca`.
    pub async fn start_tls(ca: &TestCa) -> anyhow::Result<Self> {
        Self::start_with(Some(ca.clone())).await
    }

    async fn start_with(tls: Option<TestCa>) -> anyhow::Result<Self> {
        let state: Shared = Arc::new(Mutex::new(Inner::new()));
        let config = match &tls {
            Some(ca) => Some(ca.loopback_cert()?.server_config()?),
            None => None,
        };
        let shared = state.clone();
        let handler: Handler = Arc::new(move |request, _local| {
            let state = shared.clone();
            Box::pin(handler::handle(state, request))
        });
        let server = Server::start(config, handler).await?;
        Ok(Self { server, state, tls })
    }

    /// `http://127.0.0.1:PORT` or `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.server.addr())
    }

    /// A `kube::Config` for this server (trusting the test CA over TLS), namespace `default`.
    pub fn config(&self) -> anyhow::Result<kube::Config> {
        let url = self.url().parse().context("server URL")?;
        let mut config = kube::Config::new(url);
        if let Some(ca) = &self.tls {
            config.root_cert = Some(vec![ca.cert_der().to_vec()]);
        }
        Ok(config)
    }

    /// kube's real `Client` for this server.
    pub fn client(&self) -> anyhow::Result<kube::Client> {
        kube::Client::try_from(self.config()?).context("building the kube client")
    }

    /// A kubeconfig file's YAML pointing at this server (plain HTTP only).
    pub fn kubeconfig_yaml(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: scripted\n  cluster:\n    server: {}\ncontexts:\n- name: scripted\n  context:\n    cluster: scripted\n    user: scripted\n    namespace: default\ncurrent-context: scripted\nusers:\n- name: scripted\n  user: {{}}\n",
            self.url()
        )
    }

    /// Creates or replaces a Node; watches see `ADDED` or `MODIFIED`.
    pub fn put_node(&self, node: Value) {
        self.put(Resource::Nodes, "", node);
    }

    /// Creates or replaces an NFD `NodeFeature` in `metadata.namespace`; watches see `ADDED` or
    /// `MODIFIED`.
    pub fn put_node_feature(&self, object: Value) {
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or(NFD_NAMESPACE)
            .to_owned();
        self.put(Resource::NodeFeatures, &namespace, object);
    }

    /// Creates or replaces a Pod in `metadata.namespace` (default `default`).
    pub fn put_pod(&self, pod: Value) {
        let namespace = pod["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_owned();
        self.put(Resource::Pods, &namespace, pod);
    }

    /// Creates or replaces any object (stamping a new `resourceVersion`).
    pub fn put(&self, resource: Resource, namespace: &str, object: Value) {
        if let Err(message) = lock(&self.state).put(resource, namespace, object) {
            tracing::warn!(%message, "scripted object refused");
        }
    }

    /// Deletes an object; watches see `DELETED`. Returns whether it existed.
    pub fn delete(&self, resource: Resource, namespace: &str, name: &str) -> bool {
        lock(&self.state)
            .delete(resource, &(namespace.to_owned(), name.to_owned()))
            .is_some()
    }

    /// The stored object.
    pub fn get(&self, resource: Resource, namespace: &str, name: &str) -> Option<Value> {
        lock(&self.state)
            .get(resource, &(namespace.to_owned(), name.to_owned()))
            .and_then(|stored| serde_json::from_slice(&stored.json).ok())
    }

    /// How many objects of `resource` are stored.
    pub fn count(&self, resource: Resource) -> usize {
        lock(&self.state)
            .objects
            .get(&resource)
            .map_or(0, std::collections::BTreeMap::len)
    }

    /// Sends a `BOOKMARK` at the current resource version to watches of `resource` that allow
    /// bookmarks.
    pub fn bookmark(&self, resource: Resource) {
        lock(&self.state).bookmark(resource);
    }

    /// Forgets the change history and ends every watch: clients resuming from an older
    /// resource version get `410 Gone` and must relist.
    pub fn compact(&self) {
        let mut inner = lock(&self.state);
        inner.compact();
        inner.end_watches();
    }

    /// Ends every open watch (clients resume from their last resource version).
    pub fn end_watches(&self) {
        lock(&self.state).end_watches();
    }

    /// TokenReviews accept `token` for `audiences` (and no other), as `username`.
    pub fn accept_token(&self, token: &str, username: &str, audiences: &[&str]) {
        lock(&self.state).tokens.insert(
            token.to_owned(),
            token_review::ScriptedToken {
                username: username.to_owned(),
                audiences: audiences.iter().map(|a| (*a).to_owned()).collect(),
            },
        );
    }

    /// Scripts the log of `container` of `namespace/pod`: its current run's, or with
    /// `previous` its previous run's (without one, `previous=true` answers `400`).
    pub fn set_log(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        previous: bool,
        log: PodLog,
    ) {
        lock(&self.state).logs.insert(
            (
                namespace.to_owned(),
                pod.to_owned(),
                container.to_owned(),
                previous,
            ),
            log,
        );
    }

    /// Holds back every request of `method` whose path contains `path_contains` (`GET`: gets
    /// and lists; `WATCH`: watches) until the returned [`Held`] is released or dropped: a list
    /// still in flight, for as long as a test needs.
    #[must_use = "dropping it releases the requests at once"]
    pub fn hold(&self, method: &str, path_contains: &str) -> Held {
        let (hold, held) = hold::Hold::new(method, path_contains);
        lock(&self.state).holds.push(hold);
        held
    }

    /// Scripts a fault.
    pub fn fault(&self, fault: Fault) {
        lock(&self.state).faults.push(fault);
    }

    /// Every request answered so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state).requests.iter().cloned().collect()
    }

    /// The requests that were not GETs (creates, replaces, patches, deletes, evictions).
    pub fn writes(&self) -> Vec<RecordedRequest> {
        lock(&self.state)
            .requests
            .iter()
            .filter(|request| request.is_write())
            .cloned()
            .collect()
    }

    /// Every request answered from now on, as it is answered (a slow receiver misses some:
    /// `RecvError::Lagged`).
    pub fn subscribe_requests(&self) -> tokio::sync::broadcast::Receiver<RecordedRequest> {
        lock(&self.state).recorded.subscribe()
    }

    /// Forgets the recorded requests.
    pub fn reset_requests(&self) {
        lock(&self.state).requests.clear();
    }
}
