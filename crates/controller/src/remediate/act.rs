//! The writes of pod remediation: the Event, and the eviction (conditional on the pod's UID,
//! so a new pod that took the name is never evicted in its place).

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::api::PostParams;
use kube::runtime::events::{Event, EventType};
use kube::Api;
use serde_json::json;

use super::Remedy;
use crate::context::Context;
use crate::objects::PodRecord;
use crate::Error;

/// The Event reason on misplaced pods.
pub const REASON: &str = "UnsupportedPlatform";

/// Writes the Event on the pod.
pub(crate) async fn report(
    ctx: &Context,
    pod: &PodRecord,
    note: String,
    remedy: Remedy,
) -> Result<(), Error> {
    let action = match remedy {
        Remedy::Evict => "Evict",
        Remedy::Report | Remedy::ReportNoController | Remedy::ReportExempt => "Report",
    };
    warn(ctx, pod, REASON, action, note).await
}

/// Writes a Warning Event with `reason`, `action` and `note` on the pod.
pub(crate) async fn warn(
    ctx: &Context,
    pod: &PodRecord,
    reason: &str,
    action: &str,
    note: String,
) -> Result<(), Error> {
    let what = || format!("writing an Event on pod {}/{}", pod.namespace(), pod.name());
    ctx.check_leader(what)?;
    let event = Event {
        type_: EventType::Warning,
        reason: reason.to_owned(),
        note: Some(note),
        action: action.to_owned(),
        secondary: None,
    };
    let reference = ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Pod".to_owned()),
        name: Some(pod.name().to_owned()),
        namespace: Some(pod.namespace().to_owned()),
        uid: Some(pod.uid().to_owned()),
        ..ObjectReference::default()
    };
    match ctx.recorder.publish(&event, &reference).await {
        Ok(()) => {
            ctx.metrics.events.with_label_values(&["ok"]).inc();
            Ok(())
        }
        Err(source) => {
            ctx.metrics.events.with_label_values(&["error"]).inc();
            Err(Error::kube(what(), source))
        }
    }
}

/// The eviction's outcome.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Evicted {
    /// Evicted, or already gone (404), or replaced by another pod of that name (409).
    Done,
    /// A PodDisruptionBudget refused it (429): try again later.
    Blocked,
}

/// Evicts the pod through `POST pods/NAME/eviction` (policy/v1), conditional on its UID. kube's
/// `Api::evict` sends `delete_options` (snake case), which the apiserver ignores; this body is
/// the API reference's `deleteOptions`.
pub(crate) async fn evict(ctx: &Context, pod: &PodRecord) -> Result<Evicted, Error> {
    let action = || format!("evicting pod {}/{}", pod.namespace(), pod.name());
    ctx.check_leader(action)?;
    let body = json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod.name(), "namespace": pod.namespace()},
        "deleteOptions": {"preconditions": {"uid": pod.uid()}},
    });
    let body = serde_json::to_vec(&body).map_err(|_| Error::Incomplete(action()))?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), pod.namespace());
    let answer = pods
        .create_subresource::<serde::de::IgnoredAny>(
            "eviction",
            pod.name(),
            &PostParams::default(),
            body,
        )
        .await;
    match answer {
        Ok(_) => Ok(Evicted::Done),
        Err(kube::Error::Api(status)) if status.code == 429 => Ok(Evicted::Blocked),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
            Ok(Evicted::Done)
        }
        Err(source) => Err(Error::kube(action(), source)),
    }
}
