//! NFD's `NodeFeature` objects (`--watch-node-features`): one reflector over
//! `nodefeatures.nfd.k8s-sigs.io` in every namespace, records trimmed while they are
//! deserialized, and [`NodeFeatureView`], each node's features by name, read synchronously by
//! image selection. The features of a node described by several objects are merged (as NFD
//! does) when one of them changes, not at each read.
//!
//! Without the CRD (NFD not installed, or older than its `NodeFeature` API) the list fails with
//! `404`: a warning says so once, the reflector keeps retrying with backoff, and image selection
//! sees no features (what is no label stays unknown).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use futures::StreamExt as _;
use kube::runtime::{watcher, WatchStreamExt as _};
use kube::Api;
use noe_core::selection::NodeFeatures;

use crate::objects::NodeFeatureRecord;
use crate::shutdown::Shutdown;
use crate::Metrics;

/// At most this many `NodeFeature` objects are held (further new ones are ignored, with a
/// warning).
pub const MAX_OBJECTS: usize = 20_000;

type Key = (String, String);

/// The objects, and each node's merged features.
#[derive(Debug, Default)]
struct State {
    /// Object → (its node, its features).
    objects: HashMap<Key, (String, Arc<NodeFeatures>)>,
    /// Node → its objects.
    by_node: HashMap<String, BTreeSet<Key>>,
    /// Node → the merged features of its objects.
    merged: HashMap<String, Arc<NodeFeatures>>,
    /// Objects ignored past [`MAX_OBJECTS`] since the last list.
    ignored: usize,
}

impl State {
    fn remerge(&mut self, node: &str) {
        let mut parts = self
            .by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|key| self.objects.get(key).map(|(_, f)| f));
        let Some(first) = parts.next().cloned() else {
            self.merged.remove(node);
            self.by_node.remove(node);
            return;
        };
        let merged = parts.fold(first, |acc, next| Arc::new(acc.merged(next)));
        self.merged.insert(node.to_owned(), merged);
    }

    fn delete(&mut self, key: &Key) {
        if let Some((node, _)) = self.objects.remove(key) {
            if let Some(keys) = self.by_node.get_mut(&node) {
                keys.remove(key);
            }
            self.remerge(&node);
        }
    }

    fn apply(&mut self, record: NodeFeatureRecord) {
        let key = record.key();
        // A relabelled object leaves its former node first.
        self.delete(&key);
        let Some(node) = record.node else {
            return;
        };
        if self.objects.len() >= MAX_OBJECTS {
            self.ignored = self.ignored.saturating_add(1);
            return;
        }
        self.objects
            .insert(key.clone(), (node.clone(), record.features));
        self.by_node.entry(node.clone()).or_default().insert(key);
        self.remerge(&node);
    }
}

/// The node features' read side. Clones share everything; reads take a read lock and clone one
/// `Arc`, never waiting on the API.
#[derive(Clone, Debug, Default)]
pub struct NodeFeatureView {
    state: Arc<RwLock<State>>,
    listed: Arc<AtomicBool>,
}

impl NodeFeatureView {
    /// The features of `node` (merged over its objects); `None` when no object describes it.
    pub fn features(&self, node: &str) -> Option<Arc<NodeFeatures>> {
        self.read().merged.get(node).cloned()
    }

    /// How many nodes have features.
    pub fn len(&self) -> usize {
        self.read().merged.len()
    }

    /// Whether no node has features.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the first complete list arrived.
    pub fn is_ready(&self) -> bool {
        self.listed.load(Ordering::Acquire)
    }

    /// A view over records given in code, ready at once (tests, benches).
    pub fn from_records(records: Vec<NodeFeatureRecord>) -> Self {
        let view = Self::default();
        {
            let mut state = view.write();
            for record in records {
                state.apply(record);
            }
        }
        view.listed.store(true, Ordering::Release);
        view
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether a watcher error says the resource does not exist (no CRD).
fn not_installed(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(response))
        | watcher::Error::WatchStartFailed(kube::Error::Api(response)) => response.code == 404,
        _ => false,
    }
}

/// Starts nothing: returns the view and the task that fills it (run by the runtime).
pub(crate) fn reflector(
    client: kube::Client,
    metrics: Metrics,
    shutdown: Shutdown,
) -> (
    NodeFeatureView,
    impl std::future::Future<Output = ()> + Send + 'static,
) {
    let view = NodeFeatureView::default();
    let filled = view.clone();
    let task = async move {
        let api: Api<NodeFeatureRecord> = Api::all(client);
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut shutdown = shutdown;
        // The objects of a list in progress, swapped in when it completes.
        let mut listing: Option<State> = None;
        let mut warned_missing = false;
        loop {
            let event = tokio::select! {
                () = shutdown.wait() => break,
                event = events.next() => event,
            };
            match event {
                Some(Ok(watcher::Event::Init)) => listing = Some(State::default()),
                Some(Ok(watcher::Event::InitApply(record))) => {
                    if let Some(state) = listing.as_mut() {
                        state.apply(record);
                    }
                }
                Some(Ok(watcher::Event::InitDone)) => {
                    let state = listing.take().unwrap_or_default();
                    if state.ignored > 0 {
                        tracing::warn!(
                            ignored = state.ignored,
                            limit = MAX_OBJECTS,
                            "too many NodeFeature objects: the ones past the limit are ignored"
                        );
                    }
                    let nodes = state.merged.len();
                    *filled.write() = state;
                    if !filled.listed.swap(true, Ordering::AcqRel) || warned_missing {
                        tracing::info!(nodes, "NodeFeature objects listed");
                    }
                    warned_missing = false;
                }
                Some(Ok(watcher::Event::Apply(record))) => filled.write().apply(record),
                Some(Ok(watcher::Event::Delete(record))) => filled.write().delete(&record.key()),
                Some(Err(error)) => {
                    metrics
                        .watch_errors
                        .with_label_values(&["nodefeatures"])
                        .inc();
                    if not_installed(&error) {
                        if !warned_missing {
                            tracing::warn!(
                                "--watch-node-features: nodefeatures.nfd.k8s-sigs.io is not served (is node-feature-discovery installed, v0.14 or later?); node features that are not labels stay unknown, retrying with backoff"
                            );
                            warned_missing = true;
                        }
                    } else {
                        tracing::warn!(%error, "NodeFeature watch failed; retrying with backoff");
                    }
                }
                None => break,
            }
        }
    };
    (view, task)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn features(flag: &str) -> NodeFeatures {
        let raw = serde_json::json!({"flags": {"kernel.loadedmodule": {"elements": {flag: {}}}}});
        NodeFeatures::from_spec_features(&raw).unwrap()
    }

    fn modules(view: &NodeFeatureView, node: &str) -> Vec<String> {
        view.features(node)
            .map(|f| f.flags["kernel.loadedmodule"].iter().cloned().collect())
            .unwrap_or_default()
    }

    #[test]
    fn objects_of_one_node_merge_and_leave_it() {
        let view = NodeFeatureView::from_records(vec![
            NodeFeatureRecord::new("nfd", "n1", "n1", features("kvm")),
            NodeFeatureRecord::new("gpu", "n1-gpu", "n1", {
                let raw = serde_json::json!({"flags": {"kernel.enabledmodule": {"elements": {"nvidia": {}}}}});
                NodeFeatures::from_spec_features(&raw).unwrap()
            }),
            NodeFeatureRecord::new("nfd", "n2", "n2", features("vfio")),
        ]);
        assert!(view.is_ready());
        assert_eq!(view.len(), 2);
        let n1 = view.features("n1").unwrap();
        assert!(n1.flags.contains_key("kernel.loadedmodule"));
        assert!(n1.flags.contains_key("kernel.enabledmodule"));
        assert_eq!(modules(&view, "n2"), ["vfio"]);
        // n2's object relabelled to n3: n2 has none left.
        view.write()
            .apply(NodeFeatureRecord::new("nfd", "n2", "n3", features("vfio")));
        assert!(view.features("n2").is_none());
        assert_eq!(modules(&view, "n3"), ["vfio"]);
        view.write().delete(&("gpu".into(), "n1-gpu".into()));
        assert!(!view
            .features("n1")
            .unwrap()
            .flags
            .contains_key("kernel.enabledmodule"));
        view.write().delete(&("nfd".into(), "n1".into()));
        assert!(view.features("n1").is_none());
        assert_eq!(view.len(), 1);
    }
}
