//! Converging one node's taints: read the full Node, compute the list, write it with a merge
//! patch carrying the `resourceVersion` just read; a `409` means someone else wrote in between,
//! so read again and recompute (bounded).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Patch, PatchParams};
use kube::Api;
use serde_json::json;

use super::plan::{apply, converged, wanted, TAINT_EFFECT, TAINT_KEY};
use crate::objects::ARCH_LABEL;
use crate::Error;

/// Read-modify-write rounds before giving up on a node (the controller retries it later).
pub const ATTEMPTS: u32 = 5;

/// What converging did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Converged {
    /// Nothing to change.
    Already,
    /// Written, after this many conflicts.
    Written { conflicts: u32 },
    /// The node is gone.
    Gone,
}

fn parts(taint: &Taint) -> (&str, &str, &str) {
    (
        taint.key.as_str(),
        taint.value.as_deref().unwrap_or_default(),
        taint.effect.as_str(),
    )
}

/// Brings `name`'s taint of ours to what `taint_arches` says; `may_write` is asked right
/// before each write (leadership).
pub async fn converge(
    api: &Api<Node>,
    name: &str,
    taint_arches: &BTreeSet<String>,
    may_write: impl Fn() -> Result<(), Error>,
    field_manager: &str,
) -> Result<Converged, Error> {
    let action = || format!("tainting node {name}");
    let mut conflicts = 0;
    while conflicts < ATTEMPTS {
        let Some(node) = api
            .get_opt(name)
            .await
            .map_err(|source| Error::kube(format!("reading node {name}"), source))?
        else {
            return Ok(Converged::Gone);
        };
        let arch = node
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(ARCH_LABEL))
            .map(String::as_str);
        let want = wanted(arch, taint_arches);
        let taints = node
            .spec
            .as_ref()
            .and_then(|spec| spec.taints.clone())
            .unwrap_or_default();
        if converged(taints.iter().map(parts), want) {
            return Ok(Converged::Already);
        }
        let Some(version) = node.metadata.resource_version.clone() else {
            return Err(Error::Incomplete(format!(
                "node {name} (no resourceVersion)"
            )));
        };
        let new = apply(taints, parts, want, |value| Taint {
            key: TAINT_KEY.to_owned(),
            value: Some(value.to_owned()),
            effect: TAINT_EFFECT.to_owned(),
            time_added: None,
        });
        let patch = json!({
            "metadata": {"resourceVersion": version},
            "spec": {"taints": new},
        });
        may_write()?;
        let params = PatchParams {
            field_manager: Some(field_manager.to_owned()),
            ..PatchParams::default()
        };
        match api.patch(name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => return Ok(Converged::Written { conflicts }),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                conflicts = conflicts.saturating_add(1);
            }
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(Converged::Gone),
            Err(source) => return Err(Error::kube(action(), source)),
        }
    }
    Err(Error::Conflict {
        action: action(),
        attempts: ATTEMPTS,
    })
}
