//! The gate mode's parts the composition root builds: the [`GatePlanner`] that answers the gate
//! controller (and `noe ungate`) with the webhook's decider (its resolver, credentials, facts
//! and corrections), and the
//! namespaces of the cluster's admission-webhook backends, never gated.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::ListParams;
use kube::Api;
use noe_controller::gate::{GatePlanner, Plan};
use noe_core::decide::{DenyReason, OnLookupError, Policy, SkipReason, Verdict};
use noe_webhook::admission::gate::ExemptNamespaces;
use noe_webhook::decider::Decider;
use noe_webhook::facts::FactSource;
use noe_webhook::metrics::Metrics;
use noe_webhook::resolve::pull_secrets::PullSecrets;
use serde_json::Value;

use crate::app::App;

/// How often the webhook configurations are listed again.
const WEBHOOK_REFRESH: Duration = Duration::from_secs(60);
/// Namespaces taken from the webhook configurations at most.
const MAX_EXEMPT: usize = 10_000;

/// The decision of a gated pod: the inline decision, with failed lookups reported as such
/// until the last attempt, when `--on-lookup-error` decides; with `--gate-verify`, a pod
/// waits (until its last attempt) while one of its images is being verified.
#[derive(derive_more::Debug)]
#[debug("DecisionPlanner {{ .. }}")]
pub struct DecisionPlanner {
    retrying: Decider,
    last: Decider,
    verifying: Option<Arc<noe_registry::verify::Queue>>,
}

impl DecisionPlanner {
    /// With the App's resolver (its caches shared with admission), the pods' pull secrets, and
    /// the facts inline admission reads (`None`: none).
    pub fn new(
        app: &App,
        policy: &Policy,
        deadline: Duration,
        pull_secrets: Option<PullSecrets>,
        facts: Option<Arc<dyn FactSource>>,
    ) -> anyhow::Result<Self> {
        // The admission's metrics are not the gate's: a private registry.
        let metrics = Metrics::register(&prometheus::Registry::new())?;
        let last = app.decider_counting_in(policy.clone(), deadline, pull_secrets, metrics);
        let last = match facts {
            Some(facts) => last.with_facts(facts),
            None => last,
        };
        let mut strict = policy.clone();
        strict.on_lookup_error = OnLookupError::Deny;
        Ok(Self {
            retrying: last.with_policy(strict),
            last,
            verifying: None,
        })
    }

    /// With `--gate-verify`: a pod is held while `queue` verifies one of its images.
    #[must_use]
    pub fn holding_for(mut self, queue: Option<Arc<noe_registry::verify::Queue>>) -> Self {
        self.verifying = queue;
        self
    }

    /// The images of `pod` whose verification is queued or running, one line.
    fn verifying(&self, pod: &Value) -> Option<String> {
        let queue = self.verifying.as_ref()?;
        let pending: Vec<&str> = noe_core::images::named(pod)
            .into_iter()
            .filter(|image| queue.pending(image))
            .collect();
        (!pending.is_empty()).then(|| {
            format!(
                "waiting for the verification of {} (--gate-verify)",
                pending.join(", ")
            )
        })
    }
}

/// What the decision says of a gated pod, as the gate controller's plan.
pub fn plan_of(decision: noe_core::decide::Decision) -> Plan {
    match decision.verdict {
        Verdict::Patch { ops, .. } => Plan::Constrain { ops },
        Verdict::Unchanged {
            reason: SkipReason::LookupFailed,
        } => Plan::Unconstrained {
            note: Some(decision.warnings.join("; ")),
        },
        Verdict::Unchanged { .. } => Plan::Unconstrained { note: None },
        Verdict::Deny {
            reason: DenyReason::LookupFailed,
            message,
            ..
        } => Plan::LookupFailed { message },
        Verdict::Deny {
            reason: DenyReason::NoCommonArch,
            message,
            ..
        } => Plan::NoCommonPlatform { message },
        // A gated pod cannot be denied any more: released as it is, with the reason.
        Verdict::Deny { message, .. } => Plan::Unconstrained {
            note: Some(message),
        },
    }
}

impl GatePlanner for DecisionPlanner {
    fn plan<'a>(&'a self, pod: &'a Value, last_attempt: bool) -> BoxFuture<'a, Plan> {
        Box::pin(async move {
            let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default();
            let decider = if last_attempt {
                &self.last
            } else {
                &self.retrying
            };
            let decision = decider.decision(pod, namespace).await;
            // The decision's lookups queued the cold images: held while they are verified.
            if !last_attempt {
                if let Some(message) = self.verifying(pod) {
                    return Plan::Verifying { message };
                }
            }
            plan_of(decision)
        })
    }
}

/// The namespaces of the Services behind the cluster's admission webhooks.
async fn webhook_namespaces(client: &kube::Client) -> Result<BTreeSet<String>, kube::Error> {
    let mut namespaces = BTreeSet::new();
    let params = ListParams::default();
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    for config in mutating.list(&params).await?.items {
        for hook in config.webhooks.unwrap_or_default() {
            if let Some(service) = hook.client_config.service {
                namespaces.insert(service.namespace);
            }
        }
    }
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    for config in validating.list(&params).await?.items {
        for hook in config.webhooks.unwrap_or_default() {
            if let Some(service) = hook.client_config.service {
                namespaces.insert(service.namespace);
            }
        }
    }
    Ok(namespaces.into_iter().take(MAX_EXEMPT).collect())
}

/// Keeps `exempt` current: the webhook configurations listed now and every minute (a failed
/// list keeps the last set and is logged).
pub fn watch_webhook_namespaces(client: kube::Client, exempt: ExemptNamespaces) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(WEBHOOK_REFRESH);
        loop {
            tick.tick().await;
            match webhook_namespaces(&client).await {
                Ok(namespaces) => {
                    tracing::debug!(
                        count = namespaces.len(),
                        "Admission webhook namespaces: never gated"
                    );
                    exempt.set(namespaces);
                }
                Err(error) => {
                    tracing::warn!(%error, "Cannot list the admission webhook configurations: their namespaces are not known to be exempt from gating")
                }
            }
        }
    });
}
