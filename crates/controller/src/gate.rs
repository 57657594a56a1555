//! The gate controller (`--lookup-mode=gate|hybrid`, docs/architecture.md, "Lookup modes"):
//! on the Lease holder it watches only the pods the admission gated (label
//! `arch.noe.adevinta.com/lookup=gated`, `status.phase=Pending`: memory grows with gated pods,
//! not with the cluster), asks the composition root's [`GatePlanner`] for each pod's decision
//! (the same resolver, credentials and decision as inline admission), and releases the pod with
//! one merge patch conditional on its `resourceVersion`, written by noe-core's one release
//! writer ([`noe_core::patch::release`], KEP-3838's form).
//!
//! The watch feeds a de-duplicating work queue keyed by pod ([`crate::queue`]) that
//! [`WORKERS`] workers drain: a pod is never released by two workers at once, an update while
//! it is in flight runs it once more with the version the watch brought, a relist after a watch
//! restart queues every gated pod again, and retries wait in the queue until they are due.
//!
//! Failed lookups are retried with exponential backoff and jitter (`backoff_min` doubled up to
//! `backoff_max`); after `max_attempts` the planner decides with `--on-lookup-error` (which may
//! keep the pod gated: then it is retried at the cap). Every failure is a Warning Event and the
//! `arch.noe.adevinta.com/lookup-error` annotation; a release refused by admission (`403`,
//! `422`) is an Event and a backoff, never a hot loop.

use std::collections::HashMap;
use std::hash::{Hash as _, Hasher as _};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{reflector, watcher, WatchStreamExt as _};
use kube::Api;
use serde_json::Value;
use tokio::time::Instant;

use noe_core::patch::release::{self, Extra, ReleaseError};
use noe_core::patch::Op;

use crate::leader::Leadership;
use crate::queue::{Added, WorkQueue};
use crate::{Error, GateConfig, Metrics};

pub use noe_core::patch::release::{
    GATED, GATE_LABEL, LOOKUP_ERROR_ANNOTATION, NO_COMMON_PLATFORM_KEY, RELEASED,
    SCHEDULING_GATE as GATE,
};
/// The longest [`LOOKUP_ERROR_ANNOTATION`].
pub const MAX_ERROR_CHARS: usize = 256;
/// Event reasons.
pub mod reason {
    /// An image lookup failed (the pod stays gated until the next attempt, or the policy).
    pub const LOOKUP_FAILED: &str = "LookupFailed";
    /// The pod's images share no platform: released with a requirement no node meets.
    pub const NO_COMMON_PLATFORM: &str = "NoCommonPlatform";
    /// The release write was refused (Pod Security, another webhook).
    pub const RELEASE_REFUSED: &str = "ReleaseRefused";
    /// An image of the pod is being verified (`--gate-verify`): it stays gated for now.
    pub const VERIFICATION_PENDING: &str = "VerificationPending";
}
/// The stages of `noe_gate_stage_seconds`.
pub mod stage {
    /// From the watch event's arrival (or a retry's time) to a worker taking the pod.
    pub const QUEUE: &str = "queue";
    /// The images' platforms (the admission's early lookup, when done, is a cache hit) and
    /// the decision.
    pub const LOOKUP: &str = "lookup";
    /// The release write's round trip.
    pub const WRITE: &str = "write";
}
/// Pods released at once (workers).
const WORKERS: usize = 16;
/// Pods whose attempts are remembered (then forgotten: the worst case is a retry too early).
const MEMO: usize = 100_000;
/// How long releases in flight may finish once the controller stops.
const GRACE: Duration = Duration::from_secs(10);

/// What the decision makes of a gated pod.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// Constrain: the inline decision's patch, written against the pod as read (the release
    /// writes it in KEP-3838's form).
    Constrain {
        /// The decision's RFC 6902 operations.
        ops: Vec<Op>,
    },
    /// Release without a constraint (nothing to write, or the policy says so after failures);
    /// `note` says why when it is worth an Event.
    Unconstrained {
        /// A Warning Event's note (e.g. the images left unconstrained).
        note: Option<String>,
    },
    /// An image lookup failed: keep gated and retry (or let the policy decide at the last
    /// attempt).
    LookupFailed {
        /// Which images and why, one line.
        message: String,
    },
    /// A verification of one of its images is queued or running (`--gate-verify`): keep
    /// gated and retry, as after a failed lookup (the last attempt does not wait).
    Verifying {
        /// Which images, one line.
        message: String,
    },
    /// The images share no platform.
    NoCommonPlatform {
        /// Each image and its platforms, one line.
        message: String,
    },
}

/// The decision for a gated pod; the composition root answers it with the webhook's
/// resolver and decision. `last_attempt`: failed lookups follow `--on-lookup-error` (else they
/// are reported as [`Plan::LookupFailed`]); `force`: no lookup at all (`noe ungate --force`).
pub trait GatePlanner: Send + Sync + 'static {
    /// The plan for `pod` (its JSON as the API returned it).
    fn plan<'a>(&'a self, pod: &'a Value, last_attempt: bool) -> BoxFuture<'a, Plan>;
}

/// The controller's state across releases.
pub(crate) struct State {
    pub(crate) client: kube::Client,
    pub(crate) recorder: Recorder,
    pub(crate) leadership: Leadership,
    pub(crate) metrics: Metrics,
    pub(crate) config: GateConfig,
    pub(crate) planner: Arc<dyn GatePlanner>,
    /// UID → failed attempts and when the next may run.
    pub(crate) attempts: Mutex<HashMap<String, (u32, Instant)>>,
}

/// The delay before attempt `failures + 1`: `min * 2^failures` capped at `max`, its last
/// quarter jitter derived from `seed` ([`crate::jitter::up`]), so pods failing together spread
/// out and the cap is never passed.
pub fn backoff(failures: u32, min: Duration, max: Duration, seed: u64) -> Duration {
    let factor = 1u32.checked_shl(failures.min(20)).unwrap_or(u32::MAX);
    let base = min.saturating_mul(factor).min(max);
    crate::jitter::up(base.saturating_sub(base / 4), 1.0 / 3.0, seed).min(base)
}

/// `text` cut to [`MAX_ERROR_CHARS`] characters.
pub fn bounded(text: &str) -> String {
    if text.chars().count() <= MAX_ERROR_CHARS {
        return text.to_owned();
    }
    let mut cut: String = text
        .chars()
        .take(MAX_ERROR_CHARS.saturating_sub(1))
        .collect();
    cut.push('…');
    cut
}

fn has_our_gate(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.scheduling_gates.as_ref())
        .is_some_and(|gates| gates.iter().any(|gate| gate.name == GATE))
}

fn reference(pod: &Pod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Pod".to_owned()),
        name: pod.metadata.name.clone(),
        namespace: pod.metadata.namespace.clone(),
        uid: pod.metadata.uid.clone(),
        ..ObjectReference::default()
    }
}

fn seed(uid: &str, failures: u32) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    uid.hash(&mut hasher);
    failures.hash(&mut hasher);
    hasher.finish()
}

/// Seconds since the pod's creation (0 when unknown or in the future).
fn age(pod: &Pod) -> f64 {
    let Some(created) = &pod.metadata.creation_timestamp else {
        return 0.0;
    };
    let elapsed = k8s_openapi::chrono::Utc::now().signed_duration_since(created.0);
    elapsed.to_std().map_or(0.0, |d| d.as_secs_f64())
}

/// Runs the gate controller whenever this replica leads, until `stop` fires.
pub(crate) async fn run_leading(state: State, mut shutdown: crate::shutdown::Shutdown) {
    let mut leading = state.leadership.clone();
    let state = Arc::new(state);
    loop {
        tokio::select! {
            () = leading.leading() => {}
            () = shutdown.wait() => return,
        }
        tracing::info!(controller = "gate", "leading: controller started");
        let mut lost = leading.clone();
        let mut quit = shutdown.clone();
        let stop: crate::context::Stop = Box::pin(async move {
            tokio::select! {
                () = lost.lost() => {}
                () = quit.wait() => {}
            }
        });
        run(state.clone(), stop).await;
        tracing::info!(controller = "gate", "controller stopped");
        if *shutdown.0.borrow() {
            return;
        }
    }
}

/// The watch selecting gated pods.
pub fn watch_config() -> watcher::Config {
    watcher::Config::default()
        .labels(&format!("{GATE_LABEL}={GATED}"))
        .fields("status.phase=Pending")
}

/// The gated pods known from the watch (what a worker reads when it takes a pod's key).
type Pods = reflector::Store<Pod>;

/// Watches gated pods into the work queue and runs [`WORKERS`] workers releasing them, until
/// `stop` fires (this replica stops leading, or shuts down).
async fn run(state: Arc<State>, stop: crate::context::Stop) {
    let api: Api<Pod> = Api::all(state.client.clone());
    let (store, writer) = reflector::store();
    let queue = Arc::new(WorkQueue::new(state.config.queue_capacity.max(1)));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..WORKERS {
        workers.spawn(work(state.clone(), queue.clone(), store.clone()));
    }
    let events = watcher(api, watch_config())
        .default_backoff()
        .reflect(writer);
    let feed = feed(events, &queue, &state);
    let gauges = gauges(&store, &queue, &state);
    tokio::select! {
        () = feed => {}
        () = gauges => {}
        () = stop => {}
    }
    queue.close();
    // Releases in flight finish (each checks the leadership right before its write), within
    // a bound; the rest are dropped and picked up by the next term's relist.
    let drained = tokio::time::timeout(GRACE, async {
        while workers.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            controller = "gate",
            "releases still in flight at stop: abandoned"
        );
    }
    state.metrics.gated_pods.set(0);
    state.metrics.gate_oldest.set(0.0);
    state.metrics.gate_queued.set(0);
}

/// Queues the key of every gated pod the watch brings: at once for an event, at the end of a
/// (re)list for the pods listed (the store holds them only then), and forgets deleted pods.
async fn feed(
    events: impl futures::Stream<Item = Result<watcher::Event<Pod>, watcher::Error>>,
    queue: &WorkQueue<ObjectRef<Pod>>,
    state: &State,
) {
    let mut events = std::pin::pin!(events);
    let mut listed: Vec<ObjectRef<Pod>> = Vec::new();
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Apply(pod)) => {
                if has_our_gate(&pod) {
                    queued(state, queue.add(ObjectRef::from_obj(&pod)));
                }
            }
            Ok(watcher::Event::Delete(pod)) => {
                queue.forget(&ObjectRef::from_obj(&pod));
                if let Some(uid) = pod.metadata.uid.as_deref() {
                    state.forget(uid);
                }
            }
            Ok(watcher::Event::Init) => listed.clear(),
            Ok(watcher::Event::InitApply(pod)) => {
                if has_our_gate(&pod) {
                    if listed.len() < state.config.queue_capacity {
                        listed.push(ObjectRef::from_obj(&pod));
                    } else {
                        queued(state, Added::Full);
                    }
                }
            }
            Ok(watcher::Event::InitDone) => {
                // A relist after a watch restart: every gated pod queued, retries kept at
                // their time.
                for key in listed.drain(..) {
                    queued(state, queue.add_if_absent(key));
                }
            }
            Err(error) => {
                state
                    .metrics
                    .watch_errors
                    .with_label_values(&["pods"])
                    .inc();
                tracing::warn!(%error, "gated pod watch failed; retrying with backoff");
            }
        }
    }
}

/// Counts a pod the full queue did not take (`noe_gate_queue_full_total`): the resync queues
/// it once the queue has room.
fn queued(state: &State, added: Added) {
    if added == Added::Full {
        state.metrics.gate_queue_full.inc();
        tracing::warn!(
            capacity = state.config.queue_capacity,
            "gate work queue full: a gated pod waits for the resync"
        );
    }
}

/// The gauges, every second from the store and the queue; every `resync` the gated pods the
/// queue does not hold are queued (none, unless the queue was full).
async fn gauges(store: &Pods, queue: &WorkQueue<ObjectRef<Pod>>, state: &State) {
    let metrics = &state.metrics;
    let mut tick = tokio::time::interval(Duration::from_secs(1).min(state.config.resync));
    let mut last_resync = Instant::now();
    loop {
        tick.tick().await;
        metrics
            .gate_queued
            .set(i64::try_from(queue.len()).unwrap_or(i64::MAX));
        let pods = store.state();
        let gated: Vec<&Arc<Pod>> = pods.iter().filter(|p| has_our_gate(p)).collect();
        metrics
            .gated_pods
            .set(i64::try_from(gated.len()).unwrap_or(i64::MAX));
        let oldest = gated.iter().map(|p| age(p)).fold(0.0, f64::max);
        metrics.gate_oldest.set(oldest);
        if last_resync.elapsed() >= state.config.resync {
            last_resync = Instant::now();
            for pod in gated {
                queued(
                    state,
                    queue.add_if_absent(ObjectRef::from_obj(pod.as_ref())),
                );
            }
        }
    }
}

/// One worker: takes a pod's key, releases the pod as the store holds it now, and schedules
/// the retry the attempt asks for (an update meanwhile runs it again at once instead).
async fn work(state: Arc<State>, queue: Arc<WorkQueue<ObjectRef<Pod>>>, store: Pods) {
    while let Some((key, waited)) = queue.next().await {
        state
            .metrics
            .gate_stages
            .with_label_values(&[stage::QUEUE])
            .observe(waited.as_secs_f64());
        // Not in the store: deleted, released or no longer pending since it was queued.
        let retry = match store.get(&key) {
            None => None,
            Some(pod) => match release_once(&state, &pod, false).await {
                Ok(Released::Done(_) | Released::Gone) => None,
                Ok(Released::Later(delay)) => Some(delay),
                Err(error) => {
                    let (namespace, name) = names(&pod);
                    tracing::warn!(%error, kind = error.kind(), namespace, pod = name, "gate release failed; retrying");
                    let uid = pod.metadata.uid.clone().unwrap_or_default();
                    Some(state.failed(&uid))
                }
            },
        };
        queue.done(&key);
        if let Some(delay) = retry {
            queued(&state, queue.add_after(key, delay));
        }
    }
}

impl State {
    fn failures(&self, uid: &str) -> Option<(u32, Instant)> {
        self.attempts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(uid)
            .copied()
    }

    /// Records one more failure; returns the delay before the next attempt.
    fn failed(&self, uid: &str) -> Duration {
        let mut attempts = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
        if attempts.len() >= MEMO && !attempts.contains_key(uid) {
            attempts.clear();
        }
        let failures = attempts.get(uid).map_or(0, |(n, _)| *n);
        let delay = backoff(
            failures,
            self.config.backoff_min,
            self.config.backoff_max,
            seed(uid, failures),
        );
        attempts.insert(
            uid.to_owned(),
            (failures.saturating_add(1), Instant::now() + delay),
        );
        delay
    }

    /// The retry of a pod that did not fail (a conflict): the first backoff, jittered.
    fn soon(&self, uid: &str) -> Duration {
        backoff(
            0,
            self.config.backoff_min,
            self.config.backoff_max,
            seed(uid, u32::MAX),
        )
    }

    fn observe(&self, stage: &str, since: Instant) {
        self.metrics
            .gate_stages
            .with_label_values(&[stage])
            .observe(since.elapsed().as_secs_f64());
    }

    fn forget(&self, uid: &str) {
        self.attempts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uid);
    }

    async fn event(&self, pod: &Pod, reason: &str, note: &str) {
        if !self.leadership.is_leader() {
            return;
        }
        let event = Event {
            type_: EventType::Warning,
            reason: reason.to_owned(),
            note: Some(bounded_note(note)),
            action: "Release".to_owned(),
            secondary: None,
        };
        let result = match self.recorder.publish(&event, &reference(pod)).await {
            Ok(()) => "ok",
            Err(error) => {
                tracing::warn!(%error, reason, "cannot write an Event on a gated pod");
                "error"
            }
        };
        self.metrics.events.with_label_values(&[result]).inc();
    }

    /// The annotation of the last failure (a metadata-only write, allowed on gated pods).
    async fn annotate(&self, pod: &Pod, text: &str) -> Result<(), Error> {
        let (namespace, name) = names(pod);
        let action = || format!("annotating gated pod {namespace}/{name}");
        if !self.leadership.is_leader() {
            return Err(Error::NotLeader { action: action() });
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let body = serde_json::json!({"metadata": {"annotations": {LOOKUP_ERROR_ANNOTATION: bounded(text)}}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .map(|_| ())
            .map_err(|source| Error::kube(action(), source))
    }
}

/// An Event note is at most 1 kB.
fn bounded_note(note: &str) -> String {
    note.chars().take(1000).collect()
}

fn names(pod: &Pod) -> (&str, &str) {
    (
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// What one release attempt did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Released {
    /// The pod was released (the outcome label).
    Done(&'static str),
    /// The pod stays gated; try again after this.
    Later(Duration),
    /// The pod is gone or no longer ours.
    Gone,
}

/// The outcomes of `noe_gate_releases_total`.
pub mod outcome {
    /// Released with the decision's constraints.
    pub const CONSTRAINED: &str = "constrained";
    /// Released without a constraint (nothing to write, or the policy after failed lookups).
    pub const UNCONSTRAINED: &str = "unconstrained";
    /// Released with the requirement no node meets.
    pub const NO_COMMON_PLATFORM: &str = "no_common_platform";
    /// Released by `noe ungate --force` without lookups.
    pub const FORCED: &str = "forced";
}

/// One attempt at releasing `pod`: look up, decide, write. `force`: release without lookups.
async fn release_once(state: &State, pod: &Pod, force: bool) -> Result<Released, Error> {
    if !has_our_gate(pod) {
        return Ok(Released::Gone);
    }
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let failures = state.failures(&uid);
    if let Some((_, next)) = failures {
        let now = Instant::now();
        if next > now && !force {
            // An update of ours (the annotation) woke us early: wait out the backoff.
            return Ok(Released::Later(next.saturating_duration_since(now)));
        }
    }
    let failures = failures.map_or(0, |(n, _)| n);
    let last_attempt = failures.saturating_add(1) >= state.config.max_attempts;
    // The pod as JSON once: the decision reads it, the release is written against it.
    let raw = serde_json::to_value(pod)
        .map_err(|_| Error::Incomplete(format!("pod {}", names(pod).1)))?;
    let plan = if force {
        Plan::Unconstrained { note: None }
    } else {
        let started = Instant::now();
        let plan = state.planner.plan(&raw, last_attempt).await;
        state.observe(stage::LOOKUP, started);
        plan
    };
    let (ops, extra, outcome): (&[Op], Extra, &'static str) = match &plan {
        Plan::LookupFailed { message } | Plan::Verifying { message } => {
            let delay = state.failed(&uid);
            let verifying = matches!(plan, Plan::Verifying { .. });
            let why = if verifying {
                reason::VERIFICATION_PENDING
            } else {
                reason::LOOKUP_FAILED
            };
            tracing::info!(namespace = names(pod).0, pod = names(pod).1, attempt = failures.saturating_add(1), ?delay, %message, reason = why, "Pod stays gated");
            state.event(pod, why, message).await;
            if let Err(error) = state.annotate(pod, message).await {
                tracing::debug!(%error, "cannot annotate the gated pod");
            }
            return Ok(Released::Later(delay));
        }
        Plan::NoCommonPlatform { message } => {
            state.event(pod, reason::NO_COMMON_PLATFORM, message).await;
            let extra = Extra {
                required: Some(release::no_common_platform()),
                lookup_error: Some(bounded(message)),
            };
            (&[], extra, outcome::NO_COMMON_PLATFORM)
        }
        Plan::Unconstrained { note } => {
            if let Some(note) = note {
                state.event(pod, reason::LOOKUP_FAILED, note).await;
            }
            let extra = Extra {
                required: None,
                lookup_error: note.as_deref().map(bounded),
            };
            let outcome = if force {
                outcome::FORCED
            } else {
                outcome::UNCONSTRAINED
            };
            (&[], extra, outcome)
        }
        Plan::Constrain { ops } => (ops.as_slice(), Extra::default(), outcome::CONSTRAINED),
    };
    let patch = match release::release(&raw, ops, &extra) {
        Ok(patch) => patch,
        // Changed since the decision: the watch brings the new version (which runs the pod
        // again at once); the retry is for a version that never comes.
        Err(ReleaseError::Stale(_)) => return Ok(Released::Later(state.soon(&uid))),
        Err(error) => {
            let delay = state.failed(&uid);
            let note = format!("the release of this pod cannot be written: {error}");
            tracing::warn!(namespace = names(pod).0, pod = names(pod).1, %error, ?delay, "Release not written; retrying later");
            state.event(pod, reason::RELEASE_REFUSED, &note).await;
            return Ok(Released::Later(delay));
        }
    };
    let (namespace, name) = names(pod);
    let action = || format!("releasing gated pod {namespace}/{name}");
    if !state.leadership.is_leader() && !force {
        return Err(Error::NotLeader { action: action() });
    }
    let api: Api<Pod> = Api::namespaced(state.client.clone(), namespace);
    let started = Instant::now();
    let written = api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await;
    state.observe(stage::WRITE, started);
    match written {
        Ok(_) => {
            state.forget(&uid);
            state
                .metrics
                .gate_releases
                .with_label_values(&[outcome])
                .inc();
            state.metrics.gate_duration.observe(age(pod));
            tracing::info!(namespace, pod = name, outcome, "Released gated pod");
            Ok(Released::Done(outcome))
        }
        Err(kube::Error::Api(status)) if status.code == 404 => {
            state.forget(&uid);
            Ok(Released::Gone)
        }
        // Changed since read: the watch brings the new version, which runs the pod again at
        // once (re-read from the store); the retry is for a version that never comes.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            Ok(Released::Later(state.soon(&uid)))
        }
        Err(kube::Error::Api(status)) if matches!(status.code, 400 | 403 | 422) => {
            let delay = state.failed(&uid);
            let note = format!(
                "the release of this pod was refused ({} {}): {}",
                status.code, status.reason, status.message
            );
            tracing::warn!(namespace, pod = name, code = status.code, ?delay, message = %status.message, "Release refused; retrying later");
            state.event(pod, reason::RELEASE_REFUSED, &note).await;
            Ok(Released::Later(delay))
        }
        Err(source) => Err(Error::kube(action(), source)),
    }
}

/// What `noe ungate` did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ungated {
    /// Pods released, by outcome.
    pub released: std::collections::BTreeMap<&'static str, usize>,
    /// Pods still gated (their lookups kept failing, or their release was refused) with why.
    pub remaining: Vec<String>,
}

/// Releases every pod carrying our gate in `namespace` (`None`: all namespaces) once, through
/// the same release path as the controller, until none is left or `deadline` passes.
/// `force`: without lookups. Runs without leader election (an operator's command).
pub async fn ungate(
    client: kube::Client,
    namespace: Option<&str>,
    planner: Arc<dyn GatePlanner>,
    config: GateConfig,
    force: bool,
    deadline: Duration,
) -> Result<Ungated, Error> {
    let registry = prometheus::Registry::new();
    let metrics = Metrics::new(&registry, 1).map_err(|e| Error::Config(e.to_string()))?;
    let reporter = kube::runtime::events::Reporter {
        controller: "noe".to_owned(),
        instance: None,
    };
    let state = State {
        recorder: Recorder::new(client.clone(), reporter),
        client: client.clone(),
        leadership: Leadership::always(),
        metrics,
        config,
        planner,
        attempts: Mutex::default(),
    };
    let api: Api<Pod> = match namespace {
        Some(namespace) => Api::namespaced(client, namespace),
        None => Api::all(client),
    };
    let ends = Instant::now() + deadline;
    let mut done = Ungated::default();
    loop {
        // Pending pods, whatever their label: a gate without our label is ours too.
        let params = kube::api::ListParams::default().fields("status.phase=Pending");
        let pods = api
            .list(&params)
            .await
            .map_err(|source| Error::kube("listing pending pods", source))?;
        let gated: Vec<Pod> = pods.items.into_iter().filter(has_our_gate).collect();
        let mut next: Option<Duration> = None;
        let mut remaining = Vec::new();
        for pod in &gated {
            match release_once(&state, pod, force).await {
                Ok(Released::Done(outcome)) => {
                    let count = done.released.entry(outcome).or_insert(0);
                    *count = count.saturating_add(1);
                }
                Ok(Released::Gone) => {}
                Ok(Released::Later(delay)) => {
                    next = Some(next.map_or(delay, |n| n.min(delay)));
                    let (namespace, name) = names(pod);
                    remaining.push(format!("{namespace}/{name}"));
                }
                Err(error) => {
                    let (namespace, name) = names(pod);
                    remaining.push(format!("{namespace}/{name}: {error}"));
                    next = Some(state.config.backoff_min);
                }
            }
        }
        done.remaining = remaining;
        let Some(delay) = next else {
            return Ok(done);
        };
        let now = Instant::now();
        if now + delay >= ends {
            return Ok(done);
        }
        tokio::time::sleep(delay).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_minimum_to_the_cap_with_bounded_jitter() {
        let (min, max) = (Duration::from_secs(1), Duration::from_secs(300));
        let table = [
            (0, 1),
            (1, 2),
            (2, 4),
            (5, 32),
            (8, 256),
            (9, 300),
            (40, 300),
        ];
        for (failures, seconds) in table {
            let base = Duration::from_secs(seconds);
            let least = base - base / 4;
            assert_eq!(backoff(failures, min, max, 0), least, "{failures}");
            let jittered = backoff(failures, min, max, u64::MAX);
            assert!(
                jittered <= base && jittered > base - base / 100,
                "{failures}: {jittered:?}"
            );
            for seed in [1 << 62, 1 << 63, 12_345_678_901_234_567] {
                let jittered = backoff(failures, min, max, seed);
                assert!(
                    jittered >= least && jittered <= base,
                    "{failures}: {jittered:?}"
                );
            }
        }
    }

    #[test]
    fn the_error_annotation_is_bounded() {
        assert_eq!(bounded("short"), "short");
        let long = "é".repeat(1000);
        let cut = bounded(&long);
        assert_eq!(cut.chars().count(), MAX_ERROR_CHARS);
        assert!(cut.ends_with('…'));
    }
}
