//! The learned store (docs/architecture.md, "Learned corrections"): platforms of image digests
//! proven false on the cluster's own nodes (exec format errors) or by verification, kept in one
//! ConfigMap in noe's namespace. Every replica reads it through a watch ([`LearnedView`], which
//! answers [`noe_core::truth::Corrections`]); only the Lease holder writes it, with server-side
//! apply ([`LearnedWriter`]); people list and forget entries with `noe learned` ([`read`],
//! [`forget`]).

pub mod entry;
mod snapshot;
pub mod verified;
mod view;
mod write;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::Api;
use serde_json::json;

pub use entry::{Entry, Evidence, Garbage, MAX_ENTRY_BYTES, MAX_MESSAGE_BYTES};
pub use snapshot::{Snapshot, MAX_DATA_BYTES, MAX_KEYS_READ};
pub(crate) use view::watch;
pub use view::{LearnedConfig, LearnedView};
pub(crate) use write::writer;
pub use write::{Learned, LearnedWriter};

use crate::Error;

/// The default name of the store's ConfigMap (`--learned-store`).
pub const DEFAULT_NAME: &str = "noe-learned-platforms";
/// The default bound on entries (`--learned-max-entries`).
pub const DEFAULT_MAX_ENTRIES: usize = 1000;
/// The largest `--learned-max-entries` accepted (1 KiB each would pass the data bound).
pub const MAX_ENTRIES: usize = 5000;
/// Read-modify-write rounds of `forget` on conflicts.
const FORGET_ATTEMPTS: u32 = 5;

/// Now, as RFC 3339 (UTC, seconds).
pub(crate) fn now() -> String {
    k8s_openapi::chrono::Utc::now().to_rfc3339_opts(k8s_openapi::chrono::SecondsFormat::Secs, true)
}

/// Reads the store once: `None` when its ConfigMap does not exist.
pub async fn read(client: kube::Client, config: &LearnedConfig) -> Result<Option<Snapshot>, Error> {
    let api: Api<ConfigMap> = Api::namespaced(client, &config.namespace);
    let action = || {
        format!(
            "reading the learned store {}/{}",
            config.namespace, config.name
        )
    };
    let object = api
        .get_opt(&config.name)
        .await
        .map_err(|source| Error::kube(action(), source))?;
    Ok(object.map(|object| {
        Snapshot::read(
            Some(object.data.unwrap_or_default()),
            object.metadata.resource_version,
            config.max_entries,
        )
    }))
}

/// The store read once into a view for one run (`noe explain`, `noe report`: no watch), its
/// garbage entries logged and skipped: `None` when its ConfigMap does not exist.
pub async fn read_view(
    client: kube::Client,
    config: &LearnedConfig,
) -> Result<Option<LearnedView>, Error> {
    let api: Api<ConfigMap> = Api::namespaced(client, &config.namespace);
    let object = api.get_opt(&config.name).await.map_err(|source| {
        Error::kube(
            format!(
                "reading the learned store {}/{}",
                config.namespace, config.name
            ),
            source,
        )
    })?;
    Ok(object.map(|object| {
        let view = LearnedView::new(config.clone(), None);
        view.install(Some(object));
        view
    }))
}

/// Removes from the store every key `chosen` picks (it sees each key, and its entry when the
/// value is valid); returns the keys removed, with their entries. A JSON merge patch conditional on the
/// `resourceVersion` read, retried on the fresh object after a `409`: whoever owns a key (noe,
/// or a person's edit), it goes. `Ok(None)`: the ConfigMap does not exist.
pub async fn forget(
    client: kube::Client,
    config: &LearnedConfig,
    chosen: impl Fn(&str, Option<&Entry>) -> bool,
) -> Result<Option<Vec<(String, Option<Entry>)>>, Error> {
    let api: Api<ConfigMap> = Api::namespaced(client, &config.namespace);
    let action = || {
        format!(
            "removing entries of the learned store {}/{}",
            config.namespace, config.name
        )
    };
    for _ in 0..FORGET_ATTEMPTS {
        let Some(object) = api
            .get_opt(&config.name)
            .await
            .map_err(|source| Error::kube(action(), source))?
        else {
            return Ok(None);
        };
        let data = object.data.unwrap_or_default();
        let removed: Vec<(String, Option<Entry>)> = data
            .iter()
            .map(|(key, value)| (key.clone(), Entry::parse(key, value).ok()))
            .filter(|(key, entry)| chosen(key, entry.as_ref()))
            .collect();
        if removed.is_empty() {
            return Ok(Some(removed));
        }
        let nulls: serde_json::Map<String, serde_json::Value> = removed
            .iter()
            .map(|(key, _)| (key.clone(), serde_json::Value::Null))
            .collect();
        let patch = json!({
            "metadata": {"resourceVersion": object.metadata.resource_version},
            "data": nulls,
        });
        match api
            .patch(&config.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(Some(removed)),
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(source) => return Err(Error::kube(action(), source)),
        }
    }
    Err(Error::Conflict {
        action: action(),
        attempts: FORGET_ATTEMPTS,
    })
}
