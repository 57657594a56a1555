//! The learned store's write side, on the Lease holder only: entries to learn are queued and
//! written in batches with server-side apply (field manager `noe`, forced), the whole data the
//! store should hold in one apply, conditional on the `resourceVersion` last read (so an entry
//! removed by `noe learned forget` meanwhile is not written back): a `409` is retried on the
//! fresh object. Keys omitted from an apply that only noe owned are removed by the apiserver:
//! that is how the oldest evidence is evicted.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::Api;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use super::entry::Entry;
use super::view::LearnedView;
use crate::leader::Leadership;
use crate::shutdown::Shutdown;
use crate::{Error, Metrics};

/// Entries waiting to be written; past this, `learn` waits.
const QUEUE: usize = 256;
/// Entries written in one apply at most.
const BATCH: usize = 64;
/// Read-modify-write rounds on conflicts before giving up (the entry is learned again at the
/// container's next restart).
const ATTEMPTS: u32 = 5;

/// What [`LearnedWriter::learn`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learned {
    /// The entry was written.
    Added,
    /// The store already held a correction for that digest and platform.
    Known,
}

struct Request {
    entry: Entry,
    reply: oneshot::Sender<Result<Learned, Error>>,
}

/// Learns entries into the store (the Lease holder's side). Clones share the queue.
#[derive(Clone, derive_more::Debug)]
#[debug("LearnedWriter {{ .. }}")]
pub struct LearnedWriter {
    queue: mpsc::Sender<Request>,
    view: LearnedView,
}

impl LearnedWriter {
    /// The view it writes through (and keeps current after each write).
    pub fn view(&self) -> &LearnedView {
        &self.view
    }

    /// Writes `entry` unless a correction for its digest and platform is known already.
    /// `Err(NotLeader)` when this replica does not hold the Lease.
    pub async fn learn(&self, entry: Entry) -> Result<Learned, Error> {
        if self.view.snapshot().contains_key(&entry.key()) {
            return Ok(Learned::Known);
        }
        let (reply, answer) = oneshot::channel();
        let stopped = || Error::Learned("the learned store writer stopped".into());
        self.queue
            .send(Request { entry, reply })
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// The writer and the task that runs it until shutdown.
pub(crate) fn writer(
    client: kube::Client,
    field_manager: String,
    view: LearnedView,
    leadership: Leadership,
    metrics: Metrics,
    shutdown: Shutdown,
) -> (
    LearnedWriter,
    impl std::future::Future<Output = ()> + Send + 'static,
) {
    let (queue, mut requests) = mpsc::channel::<Request>(QUEUE);
    let handle = LearnedWriter {
        queue,
        view: view.clone(),
    };
    let task = async move {
        let mut shutdown = shutdown;
        loop {
            let first = tokio::select! {
                () = shutdown.wait() => return,
                request = requests.recv() => request,
            };
            let Some(first) = first else { return };
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match requests.try_recv() {
                    Ok(request) => batch.push(request),
                    Err(_) => break,
                }
            }
            let entries: Vec<Entry> = batch.iter().map(|r| r.entry.clone()).collect();
            let result = apply(
                &client,
                &field_manager,
                &view,
                &leadership,
                &metrics,
                &entries,
            )
            .await;
            for request in batch {
                let answer = match &result {
                    Ok(added) if added.contains(&request.entry.key()) => Ok(Learned::Added),
                    Ok(_) => Ok(Learned::Known),
                    Err(error) => Err(copy(error)),
                };
                // The requester may have stopped waiting.
                let _ = request.reply.send(answer);
            }
        }
    };
    (handle, task)
}

/// The same error for each requester of a batch.
fn copy(error: &Error) -> Error {
    match error {
        Error::NotLeader { action } => Error::NotLeader {
            action: action.clone(),
        },
        Error::Conflict { action, attempts } => Error::Conflict {
            action: action.clone(),
            attempts: *attempts,
        },
        other => Error::Learned(Error::chain(other)),
    }
}

/// Applies the store's data with `entries` added; the keys actually added.
async fn apply(
    client: &kube::Client,
    field_manager: &str,
    view: &LearnedView,
    leadership: &Leadership,
    metrics: &Metrics,
    entries: &[Entry],
) -> Result<Vec<String>, Error> {
    let config = view.config().clone();
    let action = || {
        format!(
            "writing the learned store {}/{}",
            config.namespace, config.name
        )
    };
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &config.namespace);
    let writes = |result: &str| metrics.learned_writes.with_label_values(&[result]).inc();
    for _ in 0..ATTEMPTS {
        let snapshot = view.snapshot();
        let (data, added) = snapshot.with(entries, config.max_entries);
        if added.is_empty() && data == snapshot.data() {
            return Ok(added);
        }
        if !leadership.is_leader() {
            return Err(Error::NotLeader { action: action() });
        }
        let mut metadata = json!({"name": config.name, "namespace": config.namespace});
        if let Some(version) = &snapshot.resource_version {
            metadata["resourceVersion"] = json!(version);
        }
        let body = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": metadata,
            "data": data,
        });
        let params = PatchParams::apply(field_manager).force();
        match api.patch(&config.name, &params, &Patch::Apply(&body)).await {
            Ok(written) => {
                writes("applied");
                view.install(Some(written));
                return Ok(added);
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                writes("conflict");
                // Read the fresh object and compute the data again.
                match api.get_opt(&config.name).await {
                    Ok(fresh) => view.install(fresh),
                    Err(source) => {
                        writes("error");
                        return Err(Error::kube(action(), source));
                    }
                }
            }
            Err(source) => {
                writes("error");
                return Err(Error::kube(action(), source));
            }
        }
    }
    Err(Error::Conflict {
        action: action(),
        attempts: ATTEMPTS,
    })
}
