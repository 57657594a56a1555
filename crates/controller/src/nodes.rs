//! Node awareness: one Node reflector (records trimmed while they are deserialized) and
//! [`NodeView`], the cheap synchronous read side the admission path and the controllers use.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};

use futures::StreamExt as _;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt as _};
use kube::Api;
use tokio::sync::watch;

use crate::objects::NodeRecord;
use crate::shutdown::Shutdown;
use crate::Metrics;

/// The node store's read side. Clones share everything; reads take the store's read lock
/// (`node`) or clone one `Arc` (`archs`), never waiting on the API.
#[derive(Clone, derive_more::Debug)]
#[debug("NodeView {{ nodes: {:?}, .. }}", store.len())]
pub struct NodeView {
    store: Store<NodeRecord>,
    /// The arches of all nodes, recomputed by the reflector task on every change; `None` until
    /// the first complete list.
    archs: Arc<RwLock<Option<Arc<BTreeSet<String>>>>>,
    changes: watch::Receiver<u64>,
}

impl NodeView {
    /// The arches (`kubernetes.io/arch`) of the cluster's nodes; `None` until the first list
    /// completed (callers then behave as without node awareness).
    pub fn archs(&self) -> Option<Arc<BTreeSet<String>>> {
        self.archs
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// One node by name.
    pub fn node(&self, name: &str) -> Option<Arc<NodeRecord>> {
        self.store.get(&ObjectRef::new(name))
    }

    /// Every node (a snapshot).
    pub fn nodes(&self) -> Vec<Arc<NodeRecord>> {
        self.store.state()
    }

    /// How many nodes are known.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether no node is known.
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }

    /// Whether the first complete list arrived.
    pub fn is_ready(&self) -> bool {
        self.archs().is_some()
    }

    /// Resolves when the first complete list arrived.
    pub async fn ready(&self) {
        let mut changes = self.changes.clone();
        while !self.is_ready() {
            if changes.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// A receiver that changes whenever a node event was applied (controllers wait on it).
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.changes.clone()
    }

    /// A view over records given in code, ready at once (tests, benches).
    pub fn from_records(records: Vec<NodeRecord>) -> Self {
        let (store, mut writer) = reflector::store();
        writer.apply_watcher_event(&watcher::Event::Init);
        for record in records {
            writer.apply_watcher_event(&watcher::Event::InitApply(record));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let archs = Arc::new(RwLock::new(Some(Arc::new(arches_of(&store)))));
        let (_, changes) = watch::channel(0);
        Self {
            store,
            archs,
            changes,
        }
    }
}

fn arches_of(store: &Store<NodeRecord>) -> BTreeSet<String> {
    store
        .state()
        .iter()
        .filter_map(|node| node.arch.clone())
        .collect()
}

/// Starts nothing: returns the view and the task that fills it (run by the runtime).
pub(crate) fn reflector(
    client: kube::Client,
    metrics: Metrics,
    shutdown: Shutdown,
) -> (
    NodeView,
    impl std::future::Future<Output = ()> + Send + 'static,
) {
    let (store, writer) = reflector::store();
    let (notify, changes) = watch::channel(0u64);
    let view = NodeView {
        store: store.clone(),
        archs: Arc::new(RwLock::new(None)),
        changes,
    };
    let archs = view.archs.clone();
    let task = async move {
        let api: Api<NodeRecord> = Api::all(client);
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .boxed();
        let mut shutdown = shutdown;
        let mut listed = false;
        loop {
            let Some(event) = shutdown.or(events.next()).await else {
                break;
            };
            match event {
                Some(Ok(event)) => {
                    let settles = match event {
                        watcher::Event::InitDone => {
                            listed = true;
                            true
                        }
                        watcher::Event::Apply(_) | watcher::Event::Delete(_) => listed,
                        watcher::Event::Init | watcher::Event::InitApply(_) => false,
                    };
                    if settles {
                        let now = Arc::new(arches_of(&store));
                        *archs
                            .write()
                            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(now);
                    }
                    metrics
                        .nodes
                        .set(i64::try_from(store.len()).unwrap_or(i64::MAX));
                    notify.send_modify(|generation| *generation = generation.wrapping_add(1));
                }
                Some(Err(error)) => {
                    metrics.watch_errors.with_label_values(&["nodes"]).inc();
                    tracing::warn!(%error, "node watch failed; retrying with backoff");
                }
                None => break,
            }
        }
    };
    (view, task)
}
