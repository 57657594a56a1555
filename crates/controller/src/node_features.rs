//! NFD's `NodeFeature` objects (`--watch-node-features`): one reflector over
//! `nodefeatures.nfd.k8s-sigs.io` in every namespace, records trimmed while they are
//! deserialized, and [`NodeFeatureView`], each node's features by name, read synchronously by
//! image selection. The features of a node described by several objects are merged as
//! nfd-master merges them (its namespace's objects first, then by name; later ones overwrite an
//! attribute, add flags and instances) when one of them changes, not at each read: at most
//! [`MAX_OBJECTS_PER_NODE`] objects per node, so an event costs a bounded merge. Features are
//! stored once per distinct content (`noe_core::selection::features`).
//!
//! Without the CRD (NFD not installed, or older than its `NodeFeature` API) the list fails with
//! `404`: a warning says so once, the reflector keeps retrying with backoff, and image selection
//! sees no features (what is no label stays unknown).

use std::collections::{BTreeMap, HashMap, HashSet};
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
/// A node described by more objects than this has unknown features (it is evaluated by its
/// labels), with a warning: merging is bounded per event.
pub const MAX_OBJECTS_PER_NODE: usize = 16;
/// Objects per list page: an nfd-worker object is 40–100 KB of JSON, and a page is read whole
/// before its objects are.
const LIST_PAGE: u32 = 50;
/// node-feature-discovery's namespace (its Helm chart's and kustomization's default): its
/// objects come first when a node's objects are merged, as nfd-master orders them.
pub const NFD_NAMESPACE: &str = "node-feature-discovery";

type Key = (String, String);

/// Where an object sorts among its node's, as nfd-master merges them (later ones take
/// precedence): those in NFD's namespace first, then by name, then by namespace.
type Order = (bool, String, String);

/// The objects, and each node's merged features.
#[derive(Debug, Default)]
struct State {
    /// Object → its node.
    objects: HashMap<Key, String>,
    /// Node → its objects in merge order, and their features.
    by_node: HashMap<String, BTreeMap<Order, Arc<NodeFeatures>>>,
    /// Node → the merged features of its objects (none when it has more than
    /// [`MAX_OBJECTS_PER_NODE`]).
    merged: HashMap<String, Arc<NodeFeatures>>,
    /// Nodes with more than [`MAX_OBJECTS_PER_NODE`] objects (warned once each).
    crowded: HashSet<String>,
    /// Objects ignored past [`MAX_OBJECTS`] since the last list.
    ignored: usize,
}

fn order((namespace, name): &Key) -> Order {
    (namespace != NFD_NAMESPACE, name.clone(), namespace.clone())
}

impl State {
    /// Merges `node`'s objects again: one event costs at most [`MAX_OBJECTS_PER_NODE`] objects'
    /// features, shared rather than copied where only one object has a feature.
    fn remerge(&mut self, node: &str) {
        let Some(objects) = self.by_node.get(node).filter(|o| !o.is_empty()) else {
            self.merged.remove(node);
            self.by_node.remove(node);
            self.crowded.remove(node);
            return;
        };
        if objects.len() > MAX_OBJECTS_PER_NODE {
            if self.crowded.insert(node.to_owned()) {
                tracing::warn!(
                    node,
                    objects = objects.len(),
                    limit = MAX_OBJECTS_PER_NODE,
                    "too many NodeFeature objects describe this node: its features are unknown (it is evaluated by its labels)"
                );
            }
            self.merged.remove(node);
            return;
        }
        self.crowded.remove(node);
        let merged = NodeFeatures::merge(objects.values());
        self.merged.insert(node.to_owned(), merged);
    }

    fn delete(&mut self, key: &Key) {
        if let Some(node) = self.objects.remove(key) {
            if let Some(objects) = self.by_node.get_mut(&node) {
                objects.remove(&order(key));
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
        self.by_node
            .entry(node.clone())
            .or_default()
            .insert(order(&key), record.features);
        self.objects.insert(key, node.clone());
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
        let mut events = watcher(api, watcher::Config::default().page_size(LIST_PAGE))
            .default_backoff()
            .boxed();
        let mut shutdown = shutdown;
        // The objects of a list in progress, swapped in when it completes.
        let mut listing: Option<State> = None;
        let mut warned_missing = false;
        loop {
            let Some(event) = shutdown.or(events.next()).await else {
                break;
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
                    // What only the replaced state held is freed now.
                    noe_core::selection::features::sweep();
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
        NodeFeatures::from_spec_features(&raw)
    }

    fn modules(view: &NodeFeatureView, node: &str) -> Vec<String> {
        match view
            .features(node)
            .as_deref()
            .and_then(|f| f.get("kernel.loadedmodule"))
        {
            Some(noe_core::selection::features::Feature::Flags(names)) => {
                names.iter().map(|n| n.to_string()).collect()
            }
            _ => Vec::new(),
        }
    }

    fn version(namespace: &str, name: &str, node: &str, minor: &str) -> NodeFeatureRecord {
        let raw = serde_json::json!({"attributes": {"kernel.version": {"elements": {"major": "6", "minor": minor}}}});
        NodeFeatureRecord::new(
            namespace,
            name,
            node,
            NodeFeatures::from_spec_features(&raw),
        )
    }

    fn minor(view: &NodeFeatureView, node: &str) -> Option<String> {
        let features = view.features(node)?;
        features
            .get("kernel.version")?
            .attribute("minor")
            .map(str::to_owned)
    }

    #[test]
    fn objects_of_one_node_merge_and_leave_it() {
        let view = NodeFeatureView::from_records(vec![
            NodeFeatureRecord::new(NFD_NAMESPACE, "n1", "n1", features("kvm")),
            NodeFeatureRecord::new("gpu", "n1-gpu", "n1", {
                let raw = serde_json::json!({"flags": {"kernel.enabledmodule": {"elements": {"nvidia": {}}}}});
                NodeFeatures::from_spec_features(&raw)
            }),
            NodeFeatureRecord::new(NFD_NAMESPACE, "n2", "n2", features("vfio")),
        ]);
        assert!(view.is_ready());
        assert_eq!(view.len(), 2);
        let n1 = view.features("n1").unwrap();
        assert!(n1.get("kernel.loadedmodule").is_some());
        assert!(n1.get("kernel.enabledmodule").is_some());
        assert_eq!(modules(&view, "n2"), ["vfio"]);
        // n2's object relabelled to n3: n2 has none left.
        view.write().apply(NodeFeatureRecord::new(
            NFD_NAMESPACE,
            "n2",
            "n3",
            features("vfio"),
        ));
        assert!(view.features("n2").is_none());
        assert_eq!(modules(&view, "n3"), ["vfio"]);
        view.write().delete(&("gpu".into(), "n1-gpu".into()));
        assert!(view
            .features("n1")
            .unwrap()
            .get("kernel.enabledmodule")
            .is_none());
        view.write().delete(&(NFD_NAMESPACE.into(), "n1".into()));
        assert!(view.features("n1").is_none());
        assert_eq!(view.len(), 1);
    }

    /// Two objects of one node with the same feature: nfd-master's order decides, not arrival:
    /// objects in NFD's namespace first (overwritten by the others), then by name.
    #[test]
    fn the_same_feature_in_two_objects_follows_nfds_order() {
        let view = NodeFeatureView::from_records(vec![
            version("gpu-operator", "a-gpu", "n1", "3"),
            version(NFD_NAMESPACE, "n1", "n1", "1"),
        ]);
        assert_eq!(
            minor(&view, "n1").as_deref(),
            Some("3"),
            "the other namespace wins"
        );
        let view = NodeFeatureView::from_records(vec![
            version(NFD_NAMESPACE, "n1", "n1", "1"),
            version("gpu-operator", "a-gpu", "n1", "3"),
        ]);
        assert_eq!(
            minor(&view, "n1").as_deref(),
            Some("3"),
            "whatever the arrival"
        );
        let view = NodeFeatureView::from_records(vec![
            version("team", "zz", "n1", "9"),
            version("team", "aa", "n1", "2"),
        ]);
        assert_eq!(
            minor(&view, "n1").as_deref(),
            Some("9"),
            "by name, later wins"
        );
        view.write().delete(&("team".into(), "zz".into()));
        assert_eq!(minor(&view, "n1").as_deref(), Some("2"));
    }

    /// A node with more objects than the bound: its features are unknown (evaluated by labels)
    /// until it is back under the bound; every event merges at most the bound.
    #[test]
    fn a_node_with_too_many_objects_has_unknown_features() {
        let view = NodeFeatureView::from_records(
            (0..=MAX_OBJECTS_PER_NODE)
                .map(|i| version("team", &format!("o{i:02}"), "n1", &i.to_string()))
                .collect(),
        );
        assert!(view.features("n1").is_none());
        view.write().delete(&("team".into(), "o00".into()));
        assert_eq!(
            minor(&view, "n1"),
            Some(MAX_OBJECTS_PER_NODE.to_string()),
            "back under the bound: merged again"
        );
    }
}
