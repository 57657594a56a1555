//! Node taints by arch (archaware-controller's): nodes whose `kubernetes.io/arch` is in
//! `taint_arches` keep `arch.noe.adevinta.com/arch=<arch>:NoSchedule`; ours is removed from
//! other nodes. The controller is level-triggered over the node reflector: on every node change
//! it compares each node's stored taints with what is wanted (pure, no API call) and converges
//! only the nodes that differ. [`untaint`] removes every taint we set (`noe untaint`).

mod plan;
mod write;

use std::collections::{BTreeMap, BTreeSet};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;
use kube::Api;
pub use plan::{apply, converged, is_ours, wanted, TAINT_EFFECT, TAINT_KEY};
use tokio::time::Instant;
pub use write::{converge, Converged, ATTEMPTS};

use crate::context::{Context, Controller, Stop};
use crate::objects::NodeRecord;
use crate::Error;

/// The taint controller.
pub(crate) struct Taints;

fn stored_converged(node: &NodeRecord, taint_arches: &BTreeSet<String>) -> bool {
    converged(
        node.taints
            .iter()
            .map(|t| (t.key.as_str(), t.value.as_str(), t.effect.as_str())),
        wanted(node.arch.as_deref(), taint_arches),
    )
}

impl Controller for Taints {
    fn name(&self) -> &'static str {
        "taints"
    }

    fn run(&self, ctx: Context, stop: Stop) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let mut stop = stop;
            let api: Api<Node> = Api::all(ctx.client.clone());
            let arches = ctx.config.taint_arches.clone();
            let timings = ctx.config.timings;
            let mut changes = ctx.nodes.changes();
            // Nodes whose last write failed, and when to try again.
            let mut backoff: BTreeMap<String, Instant> = BTreeMap::new();
            tokio::select! {
                () = ctx.nodes.ready() => {}
                () = &mut stop => return,
            }
            loop {
                changes.borrow_and_update();
                let now = Instant::now();
                backoff.retain(|_, until| *until > now);
                for node in ctx.nodes.nodes() {
                    if stored_converged(&node, &arches) || backoff.contains_key(node.name()) {
                        continue;
                    }
                    let leader = || ctx.check_leader(|| format!("tainting node {}", node.name()));
                    match converge(
                        &api,
                        node.name(),
                        &arches,
                        leader,
                        &ctx.config.controller_name,
                    )
                    .await
                    {
                        Ok(Converged::Written { conflicts }) => {
                            for _ in 0..conflicts {
                                ctx.metrics
                                    .taint_writes
                                    .with_label_values(&["conflict"])
                                    .inc();
                            }
                            ctx.metrics
                                .taint_writes
                                .with_label_values(&["applied"])
                                .inc();
                            tracing::info!(node = node.name(), conflicts, "node taint converged");
                        }
                        Ok(Converged::Already | Converged::Gone) => {}
                        Err(Error::NotLeader { .. }) => return,
                        Err(error) => {
                            ctx.metrics.taint_writes.with_label_values(&["error"]).inc();
                            tracing::warn!(%error, node = node.name(), "could not converge the node taint; retrying later");
                            backoff.insert(
                                node.name().to_owned(),
                                now.checked_add(timings.error_retry).unwrap_or(now),
                            );
                        }
                    }
                }
                let next_retry = backoff.values().min().copied();
                let resync = now.checked_add(timings.taint_resync).unwrap_or(now);
                let wake = next_retry.map_or(resync, |retry| retry.min(resync));
                tokio::select! {
                    () = &mut stop => return,
                    changed = changes.changed() => if changed.is_err() { return },
                    () = tokio::time::sleep_until(wake) => {}
                }
            }
        })
    }
}

/// Removes our taint from every node (`noe untaint`); returns the names of the nodes changed.
/// Not leader-gated: it is run by a person, once.
pub async fn untaint(client: kube::Client, field_manager: &str) -> Result<Vec<String>, Error> {
    let api: Api<Node> = Api::all(client);
    let none = BTreeSet::new();
    let mut changed = Vec::new();
    let mut continue_token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(500);
        if let Some(token) = continue_token.take() {
            params = params.continue_token(&token);
        }
        let page = api
            .list(&params)
            .await
            .map_err(|source| Error::kube("listing nodes", source))?;
        for node in &page.items {
            let ours = node
                .spec
                .as_ref()
                .and_then(|spec| spec.taints.as_ref())
                .is_some_and(|taints| taints.iter().any(|t| is_ours(&t.key, &t.effect)));
            let Some(name) = node.metadata.name.as_deref().filter(|_| ours) else {
                continue;
            };
            if let Converged::Written { .. } =
                converge(&api, name, &none, || Ok(()), field_manager).await?
            {
                changed.push(name.to_owned());
            }
        }
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => continue_token = Some(token),
            None => return Ok(changed),
        }
    }
}
