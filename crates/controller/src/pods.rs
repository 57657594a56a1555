//! The one pod watch of the writing controllers (bound pods only, `spec.nodeName!=`, records
//! trimmed while they are deserialized), on the Lease holder: remediation keeps its pods in a
//! store and judges them; exec-format-error detection looks at each pod the watch delivers,
//! keeping nothing of a healthy one. Either may run without the other.

use futures::future::BoxFuture;
use futures::{FutureExt as _, StreamExt as _, TryStreamExt as _};
use kube::runtime::{watcher, WatchStreamExt as _};
use kube::Api;

use crate::context::{Context, Controller, Stop};
use crate::detect::Detection;
use crate::objects::{Accounts, PodRecord};
use crate::remediate::{PodEvents, Remediation};

/// The pod watch and what reads it.
pub(crate) struct Pods {
    pub(crate) remediation: Option<Remediation>,
    pub(crate) detection: Option<Detection>,
}

impl Controller for Pods {
    fn name(&self) -> &'static str {
        match (&self.remediation, &self.detection) {
            (Some(_), Some(_)) => "remediation and exec-format-error detection",
            (None, Some(_)) => "exec-format-error detection",
            _ => "remediation",
        }
    }

    fn run(&self, ctx: Context, stop: Stop) -> BoxFuture<'static, ()> {
        let api: Api<PodRecord> = Api::all(ctx.client.clone());
        let remediation = self.remediation.clone();
        let started = self.detection.as_ref().map(|d| d.start(ctx.clone()));
        Box::pin(async move {
            let stop = stop.shared();
            // A pod judged before its node is listed would wait `node_wait` for nothing.
            tokio::select! {
                () = ctx.nodes.ready() => {}
                () = stop.clone() => return,
            }
            let (observer, detecting) = match started {
                Some((observer, detecting)) => (Some(observer), Some(detecting)),
                None => (None, None),
            };
            // The store keeps no resourceVersion (the watcher read it already): one string less
            // per pod in the record and in its store key; the pods of one account share its name.
            let mut accounts = Accounts::default();
            let events: PodEvents =
                watcher(api, watcher::Config::default().fields("spec.nodeName!="))
                    .default_backoff()
                    .map_ok(move |event| {
                        event.modify(|pod| {
                            pod.forget_version();
                            accounts.share(pod);
                        })
                    })
                    .inspect_ok(move |event| {
                        if let (
                            Some(observer),
                            watcher::Event::Apply(pod) | watcher::Event::InitApply(pod),
                        ) = (&observer, event)
                        {
                            observer.observe(pod);
                        }
                    })
                    .boxed();
            let watching = async {
                match remediation {
                    Some(remediation) => {
                        remediation
                            .drive(ctx.clone(), events, Box::pin(stop.clone()))
                            .await;
                    }
                    None => {
                        let metrics = ctx.metrics.clone();
                        events
                            .take_until(stop.clone())
                            .for_each(|event| {
                                if let Err(error) = event {
                                    metrics.watch_errors.with_label_values(&["pods"]).inc();
                                    tracing::warn!(%error, "pod watch failed; retrying with backoff");
                                }
                                std::future::ready(())
                            })
                            .await;
                    }
                }
            };
            // The watch ends on `stop` and drops the observer: detection's loops then end.
            futures::future::join(watching, async {
                if let Some(detecting) = detecting {
                    detecting.await;
                }
            })
            .await;
        })
    }
}
