//! Pod remediation (noe's pod reconciler, safer): pods bound to a node whose platform none of an
//! image supports get an Event and a metric; with `Evict`, pods with a controller owner are
//! evicted through the Eviction API (PodDisruptionBudgets respected, `429` retried later), at
//! most N per minute, except in exempt namespaces (`kube-system` and noe's own by default). It
//! reads the pod watch of [`crate::pods`] (bound pods only, trimmed) into a store.

pub(crate) mod act;
mod judge;
mod memo;
mod recheck;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use futures::StreamExt as _;
pub use judge::{exempt, judge, note, screen, shorten, Misfit, Remedy, Skip, Verdict, MAX_NOTE};
use kube::runtime::controller::{self, applier, trigger_self, Action, ReconcileRequest};
use kube::runtime::reflector;
use kube::runtime::{watcher, WatchStreamExt as _};

use crate::context::{Context, Stop};
use crate::objects::PodRecord;
use crate::shutdown::dropped_on_stop;
use crate::{Config, Error, PodImages, PodPlatforms, Remediate};
use memo::Memo;

/// Pods judged at once.
const CONCURRENCY: u16 = 8;

/// The remediation controller.
#[derive(Clone)]
pub(crate) struct Remediation {
    state: Arc<Shared>,
}

/// What outlives one leadership term: what was already done.
struct Shared {
    platforms: Arc<dyn PodPlatforms>,
    mode: Remediate,
    /// Pods that need nothing more until they change or the next recheck (fit, reported, or
    /// evicted).
    settled: Mutex<Memo>,
    /// Pods whose Event was written.
    reported: Mutex<Memo>,
}

struct State {
    ctx: Context,
    shared: Arc<Shared>,
}

/// The pod watch's events, as [`crate::pods`] hands them over.
pub(crate) type PodEvents =
    futures::stream::BoxStream<'static, Result<watcher::Event<PodRecord>, watcher::Error>>;

impl Remediation {
    pub(crate) fn new(platforms: Arc<dyn PodPlatforms>, config: &Config) -> Self {
        Self {
            state: Arc::new(Shared {
                platforms,
                mode: config.remediate,
                settled: Mutex::default(),
                reported: Mutex::default(),
            }),
        }
    }

    /// Judges the pods of `events` (kept in a store) and every pod again each `recheck`, until
    /// `stop`; in-flight reconciles finish.
    pub(crate) async fn drive(&self, ctx: Context, events: PodEvents, stop: Stop) {
        let state = Arc::new(State {
            ctx,
            shared: self.state.clone(),
        });
        let metrics = state.ctx.metrics.clone();
        let (reader, writer) = reflector::store();
        let pods = events.reflect(writer).applied_objects();
        let rechecks = recheck::stream(reader.clone(), state.ctx.config.timings.recheck)
            .map(|pod| Ok(ReconcileRequest::from(pod)));
        // kube-runtime's `applier` (what its `Controller` runs) fed by the pod watch and the
        // spread recheck; the queue, and the store's writer with it, is dropped on `stop`.
        let queue = dropped_on_stop(
            futures::stream::select(trigger_self(pods, ()), rechecks),
            stop,
        );
        let config = controller::Config::default().concurrency(CONCURRENCY);
        applier(
            |pod, state| Box::pin(reconcile(pod, state)),
            error_policy,
            state,
            reader,
            queue,
            config,
        )
        .for_each(|result| {
            if let Err(controller::Error::QueueError(error)) = result {
                metrics.watch_errors.with_label_values(&["pods"]).inc();
                tracing::warn!(%error, "pod watch failed; retrying with backoff");
            }
            std::future::ready(())
        })
        .await;
    }
}

fn remember(memo: &Mutex<Memo>, pod: &PodRecord) {
    memo.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remember(pod, Instant::now());
}

/// Whether `pod`, as it is now, was remembered less than `max_age` ago.
fn known(memo: &Mutex<Memo>, pod: &PodRecord, max_age: Duration) -> bool {
    memo.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .knows(pod, max_age, Instant::now())
}

async fn reconcile(pod: Arc<PodRecord>, state: Arc<State>) -> Result<Action, Error> {
    let State { ctx, shared } = &*state;
    let checked = |result: &str| ctx.metrics.checked.with_label_values(&[result]).inc();
    // Judged since the last periodic recheck (which comes every `recheck`): nothing to do.
    let fresh = ctx.config.timings.recheck / 2;
    if known(&shared.settled, &pod, fresh) {
        return Ok(Action::await_change());
    }
    let node = ctx.nodes.node(&pod.node_name);
    let platform = match screen(&pod, node.as_deref()) {
        Ok(platform) => platform,
        Err(Skip::NodeUnknown) => {
            checked(Skip::NodeUnknown.label());
            return Ok(Action::requeue(ctx.config.timings.node_wait));
        }
        Err(skip) => {
            checked(skip.label());
            return Ok(Action::await_change());
        }
    };
    let images = PodImages {
        namespace: pod.namespace().to_owned(),
        name: pod.name().to_owned(),
        images: pod.images.clone(),
        pull_secrets: pod.pull_secrets.clone(),
        service_account: pod.service_account.as_deref().map(str::to_owned),
    };
    let lookups = shared.platforms.platforms(&images).await;
    let (misfits, remedy) = match judge(&pod, &platform, &lookups, shared.mode) {
        Verdict::Fits => {
            checked("fits");
            remember(&shared.settled, &pod);
            // Tags move: the periodic recheck looks again even if the pod does not change.
            return Ok(Action::await_change());
        }
        Verdict::LookupFailed => {
            checked("lookup_failed");
            return Ok(Action::requeue(ctx.config.timings.lookup_retry));
        }
        Verdict::Misplaced { misfits, remedy } => (
            misfits,
            exempt(remedy, pod.namespace(), &ctx.config.evict_exempt_namespaces),
        ),
    };
    checked("misplaced");
    if !known(&shared.reported, &pod, Duration::MAX) {
        let text = note(&pod.node_name, &platform, &misfits, remedy);
        act::report(ctx, &pod, text, remedy).await?;
        ctx.metrics
            .misplaced
            .with_label_values(&[ctx.metrics.namespace(pod.namespace())])
            .inc();
        remember(&shared.reported, &pod);
    }
    if remedy != Remedy::Evict {
        remember(&shared.settled, &pod);
        return Ok(Action::await_change());
    }
    let token = ctx
        .evictions
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take(Instant::now().into_std());
    if let Err(wait) = token {
        return Ok(Action::requeue(wait));
    }
    let namespace = ctx.metrics.namespace(pod.namespace());
    let deletions = |status: &str| {
        ctx.metrics
            .deletions
            .with_label_values(&[namespace, status])
            .inc()
    };
    match act::evict(ctx, &pod).await {
        Ok(act::Evicted::Done) => {
            deletions("success");
            remember(&shared.settled, &pod);
            Ok(Action::await_change())
        }
        Ok(act::Evicted::Blocked) => {
            deletions("blocked");
            Ok(Action::requeue(ctx.config.timings.blocked_retry))
        }
        Err(error) => {
            if !matches!(error, Error::NotLeader { .. }) {
                deletions("failed");
            }
            Err(error)
        }
    }
}

fn error_policy(pod: Arc<PodRecord>, error: &Error, state: Arc<State>) -> Action {
    tracing::warn!(%error, kind = error.kind(), namespace = pod.namespace(), pod = pod.name(), "remediation failed; retrying");
    Action::requeue(state.ctx.config.timings.error_retry)
}
