//! The learned store's read side, on every replica: a watch of the one ConfigMap (field
//! selector `metadata.name=NAME`, which the chart's RBAC allows on that name only), parsed into
//! a [`Snapshot`] on each change; [`LearnedView`] answers [`Corrections`] from it without an
//! API call. Garbage entries are reported when they appear and skipped.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::{watcher, WatchStreamExt as _};
use kube::Api;
use noe_core::truth::{Correction, Corrections};
use noe_core::Platform;
use tokio::sync::watch;

use super::snapshot::Snapshot;
use crate::shutdown::Shutdown;
use crate::Metrics;

/// Where the learned store is and how large it may grow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LearnedConfig {
    /// noe's own namespace.
    pub namespace: String,
    /// The ConfigMap's name (`--learned-store`).
    pub name: String,
    /// The most entries kept (`--learned-max-entries`); the oldest evidence goes first.
    pub max_entries: usize,
}

/// The read side of the learned store. Clones share everything.
#[derive(Clone)]
pub struct LearnedView {
    inner: Arc<Inner>,
}

struct Inner {
    config: LearnedConfig,
    snapshot: RwLock<Arc<Snapshot>>,
    generation: AtomicU64,
    /// Bumped on every snapshot installed (tests and the writer wait on it).
    changes: watch::Sender<u64>,
    metrics: Option<Metrics>,
}

impl std::fmt::Debug for LearnedView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let snapshot = self.snapshot();
        f.debug_struct("LearnedView")
            .field(
                "store",
                &format!("{}/{}", self.inner.config.namespace, self.inner.config.name),
            )
            .field("entries", &snapshot.len())
            .field("generation", &self.generation())
            .finish()
    }
}

impl LearnedView {
    /// An empty view of the store `config` names (nothing read yet).
    pub fn new(config: LearnedConfig, metrics: Option<Metrics>) -> Self {
        let (changes, _) = watch::channel(0);
        Self {
            inner: Arc::new(Inner {
                config,
                snapshot: RwLock::new(Arc::new(Snapshot::default())),
                generation: AtomicU64::new(0),
                changes,
                metrics,
            }),
        }
    }

    /// Where the store is.
    pub fn config(&self) -> &LearnedConfig {
        &self.inner.config
    }

    /// What the store holds now.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.inner
            .snapshot
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether `digest` is known not to run on `platform`.
    pub fn knows(&self, digest: &str, platform: &Platform) -> bool {
        self.snapshot()
            .corrections(digest)
            .iter()
            .any(|c| c.covers(platform))
    }

    /// A receiver that changes whenever a snapshot was installed.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    /// Installs what the ConfigMap holds now (`None`: it does not exist): the generation moves
    /// when the corrections changed, garbage keys not reported before are logged. The object is
    /// consumed: its entries are kept compactly, nothing else of it.
    pub fn install(&self, object: Option<ConfigMap>) {
        let config = &self.inner.config;
        let next = match object {
            Some(object) => Snapshot::read(
                Some(object.data.unwrap_or_default()),
                object.metadata.resource_version,
                config.max_entries,
            ),
            None => Snapshot::read(None, None, config.max_entries),
        };
        let mut current = self
            .inner
            .snapshot
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let known: BTreeSet<&str> = current
            .garbage
            .iter()
            .map(|(key, _)| key.as_str())
            .collect();
        for (key, why) in &next.garbage {
            if !known.contains(key.as_str()) {
                tracing::warn!(
                    store = %format!("{}/{}", config.namespace, config.name),
                    key = %key, reason = %why,
                    "Learned store entry ignored (edited by hand?); the others are used"
                );
            }
        }
        if next.corrects_differently(&current) {
            self.inner.generation.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(metrics) = &self.inner.metrics {
            metrics
                .learned_entries
                .set(i64::try_from(next.len()).unwrap_or(i64::MAX));
            metrics
                .learned_invalid
                .set(i64::try_from(next.garbage_count).unwrap_or(i64::MAX));
        }
        *current = Arc::new(next);
        drop(current);
        self.inner.changes.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl Corrections for LearnedView {
    fn for_digest(&self, digest: &str) -> Vec<Correction> {
        self.snapshot().corrections(digest)
    }

    fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::Relaxed)
    }
}

/// The watch that keeps `view` current, until shutdown.
pub(crate) async fn watch(
    client: kube::Client,
    view: LearnedView,
    metrics: Metrics,
    shutdown: Shutdown,
) {
    let config = view.config().clone();
    let api: Api<ConfigMap> = Api::namespaced(client, &config.namespace);
    let selector = format!("metadata.name={}", config.name);
    let mut events = watcher(api, watcher::Config::default().fields(&selector))
        .default_backoff()
        .boxed();
    let mut shutdown = shutdown;
    // During a (re)list: the object listed, if any.
    let mut listed: Option<ConfigMap> = None;
    loop {
        let event = tokio::select! {
            () = shutdown.wait() => return,
            event = events.next() => event,
        };
        match event {
            Some(Ok(watcher::Event::Init)) => listed = None,
            Some(Ok(watcher::Event::InitApply(object))) => listed = Some(object),
            Some(Ok(watcher::Event::InitDone)) => view.install(listed.take()),
            Some(Ok(watcher::Event::Apply(object))) => view.install(Some(object)),
            Some(Ok(watcher::Event::Delete(_))) => view.install(None),
            Some(Err(error)) => {
                metrics
                    .watch_errors
                    .with_label_values(&["configmaps"])
                    .inc();
                tracing::warn!(%error, "learned store watch failed; retrying with backoff");
            }
            None => return,
        }
    }
}
