//! Exec-format-error detection (docs/architecture.md, "Learned corrections"), on the Lease
//! holder, from the pod watch the controllers already run: a container whose status says `exec
//! format error` is a detection; one that crashed within seconds of starting is a suspect whose
//! previous log is read once per restart (at most `log_reads_per_second` across the cluster,
//! bounded, with a deadline). A detection becomes a correction in the learned store, an Event on
//! the pod, a metric, and with `--remediate=evict` an eviction, so the replacement is admitted
//! with the correction.
//!
//! Three loops per leadership term, joined by bounded queues (a full queue drops, and counts,
//! what the next status update or restart brings again): intake (the memo, the log reads),
//! acts (learn, Event), evictions (the remediation's token bucket).

pub mod judge;
mod logs;
mod memo;
pub mod signal;

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use noe_core::bucket::TokenBucket;
use noe_core::truth::Source;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

pub use judge::{digest_of, note, placeable, plan, Case, Kept, NotLearned, Plan, Told, REASON};
pub use signal::{
    evidence_line, says_exec_format_error, signal, status_evidence, Origin, Signal,
    SUSPECT_WITHIN_SECONDS,
};

use crate::context::Context;
use crate::learned::{Entry, Evidence, Learned, LearnedWriter};
use crate::objects::{ContainerRun, PodRecord};
use crate::{Error, PodImages, PodPlatforms};
use memo::Memo;

/// Pods with a signal waiting for intake.
const JOBS: usize = 4096;
/// Logs waiting to be read.
const PENDING_READS: usize = 4096;
/// Logs read at once (each within its deadline).
const READS_IN_FLIGHT: usize = 8;
/// Detections waiting for their Event.
const ACTS: usize = 1024;
/// Pods waiting for their eviction.
const EVICTIONS: usize = 1024;
/// Evictions a PodDisruptionBudget refused, tried again at most this often.
const EVICTION_ATTEMPTS: u32 = 10;

/// How detection runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DetectConfig {
    /// Previous logs read per second at most, across the cluster (`--log-reads-per-second`).
    pub log_reads_per_second: u32,
    /// How long one log read may take.
    pub log_deadline: Duration,
}

impl Default for DetectConfig {
    fn default() -> Self {
        Self {
            log_reads_per_second: 5,
            log_deadline: Duration::from_secs(5),
        }
    }
}

/// Where an exec format error was seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// The container's status says it.
    Status,
    /// Its previous log says it.
    Log,
    /// It crashed at once on a platform the store already excludes for its digest.
    Learned,
}

impl Seen {
    /// Metric label (`noe_exec_format_errors_total{source}`).
    pub fn label(self) -> &'static str {
        match self {
            Self::Status => "status",
            Self::Log => "log",
            Self::Learned => "learned",
        }
    }
}

/// The detection controller: what outlives a leadership term.
pub(crate) struct Detection {
    config: DetectConfig,
    writer: LearnedWriter,
    platforms: Option<Arc<dyn PodPlatforms>>,
    memo: Arc<Mutex<Memo>>,
}

/// Hands the pods the watch sees to detection; dropping it ends the term's loops.
pub(crate) struct Observer {
    jobs: mpsc::Sender<Arc<PodRecord>>,
    metrics: crate::Metrics,
}

impl Observer {
    /// Looks at a pod from the watch (cheap when it has no signal).
    pub(crate) fn observe(&self, pod: &PodRecord) {
        if pod.runs.is_empty() {
            return;
        }
        if self.jobs.try_send(Arc::new(pod.clone())).is_err() {
            self.metrics.detect_drops.with_label_values(&["pods"]).inc();
        }
    }
}

/// A detection on its way to an Event.
struct Act {
    pod: Arc<PodRecord>,
    run: ContainerRun,
    origin: Origin,
    seen: Seen,
    evidence: String,
}

fn lock(memo: &Mutex<Memo>) -> std::sync::MutexGuard<'_, Memo> {
    memo.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Detection {
    pub(crate) fn new(
        config: DetectConfig,
        writer: LearnedWriter,
        platforms: Option<Arc<dyn PodPlatforms>>,
    ) -> Self {
        Self {
            config,
            writer,
            platforms,
            memo: Arc::default(),
        }
    }

    /// Starts a leadership term: the observer for the pod watch, and the loops that end once it
    /// is dropped.
    pub(crate) fn start(&self, ctx: Context) -> (Observer, BoxFuture<'static, ()>) {
        let (jobs, incoming) = mpsc::channel(JOBS);
        let (acts, to_act) = mpsc::channel(ACTS);
        let (evictions, to_evict) = mpsc::channel(EVICTIONS);
        let observer = Observer {
            jobs,
            metrics: ctx.metrics.clone(),
        };
        let intake = Intake {
            ctx: ctx.clone(),
            config: self.config,
            writer: self.writer.clone(),
            memo: self.memo.clone(),
            acts,
        };
        let actor = Actor {
            ctx: ctx.clone(),
            writer: self.writer.clone(),
            platforms: self.platforms.clone(),
            memo: self.memo.clone(),
            evictions,
        };
        let loops = async move {
            futures::join!(
                intake.run(incoming),
                actor.run(to_act),
                evict_loop(ctx, to_evict)
            );
        };
        (observer, Box::pin(loops))
    }
}

/// The intake loop's state.
struct Intake {
    ctx: Context,
    config: DetectConfig,
    writer: LearnedWriter,
    memo: Arc<Mutex<Memo>>,
    acts: mpsc::Sender<Act>,
}

/// A log to read.
struct Pending {
    pod: Arc<PodRecord>,
    run: ContainerRun,
    key: u64,
}

impl Intake {
    async fn run(self, mut incoming: mpsc::Receiver<Arc<PodRecord>>) {
        let rate = f64::from(self.config.log_reads_per_second.max(1));
        let mut bucket = TokenBucket::new(
            rate,
            self.config.log_reads_per_second.max(1),
            Instant::now().into_std(),
        );
        let mut pending: VecDeque<Pending> = VecDeque::new();
        let mut reading: JoinSet<(Pending, logs::Read)> = JoinSet::new();
        let mut next_read = Instant::now();
        loop {
            let may_read = !pending.is_empty() && reading.len() < READS_IN_FLIGHT;
            tokio::select! {
                pod = incoming.recv() => match pod {
                    Some(pod) => self.intake(pod, &mut pending),
                    None => return,
                },
                Some(done) = reading.join_next(), if !reading.is_empty() => {
                    if let Ok((read, answer)) = done {
                        self.read_done(read, &answer);
                    }
                }
                () = tokio::time::sleep_until(next_read), if may_read => {
                    // What became known while it waited needs no read.
                    while pending.front().is_some_and(|read| self.known(&read.pod, &read.run)) {
                        if let Some(read) = pending.pop_front() {
                            self.act_known(&read.pod, &read.run, read.key);
                        }
                    }
                    if pending.is_empty() {
                        continue;
                    }
                    match bucket.take(Instant::now().into_std()) {
                        Ok(()) => {
                            if let Some(read) = pending.pop_front() {
                                let client = self.ctx.client.clone();
                                let deadline = self.config.log_deadline;
                                reading.spawn(async move {
                                    let answer = logs::previous(
                                        client,
                                        read.pod.namespace(),
                                        read.pod.name(),
                                        &read.run.name,
                                        deadline,
                                    )
                                    .await;
                                    (read, answer)
                                });
                            }
                        }
                        Err(wait) => next_read = Instant::now() + wait,
                    }
                }
            }
        }
    }

    /// What a pod's signals call for.
    fn intake(&self, pod: Arc<PodRecord>, pending: &mut VecDeque<Pending>) {
        for run in pod.runs.iter() {
            let key = memo::key(pod.uid(), &run.name);
            if lock(&self.memo).reported(key) {
                continue;
            }
            match signal(run) {
                Signal::Detection(origin) => {
                    let evidence = status_evidence(run)
                        .and_then(|(_, text)| evidence_line(text.as_bytes()))
                        .unwrap_or_default();
                    self.act(&pod, run, origin, Seen::Status, evidence, key);
                }
                Signal::Suspect => {
                    if self.known(&pod, run) {
                        self.act_known(&pod, run, key);
                    } else if lock(&self.memo).claim_read(key, run.restart_count) {
                        if pending.len() >= PENDING_READS {
                            self.ctx
                                .metrics
                                .detect_drops
                                .with_label_values(&["reads"])
                                .inc();
                            continue;
                        }
                        pending.push_back(Pending {
                            pod: pod.clone(),
                            run: run.clone(),
                            key,
                        });
                    }
                }
                Signal::Nothing => {}
            }
        }
    }

    /// Whether the store already says `run`'s digest does not run on its node's platform.
    fn known(&self, pod: &PodRecord, run: &ContainerRun) -> bool {
        let node = self
            .ctx
            .nodes
            .node(&pod.node_name)
            .and_then(|node| node.platform());
        match (digest_of(&run.image_id), node) {
            (Some(digest), Some(node)) => self.writer.view().knows(digest, &node),
            _ => false,
        }
    }

    /// Queues the act for a suspect whose crash the store explains.
    fn act_known(&self, pod: &Arc<PodRecord>, run: &ContainerRun, key: u64) {
        let last = run.last.clone().unwrap_or_default();
        let lasted = last
            .finished_at
            .zip(last.started_at)
            .map(|(end, start)| end.saturating_sub(start))
            .unwrap_or_default();
        let evidence = format!("exited with code {} after {lasted}s", last.exit_code);
        self.act(pod, run, Origin::Runtime, Seen::Learned, evidence, key);
    }

    /// Queues the act for a detection (marking the container reported, unmarked if it fails).
    fn act(
        &self,
        pod: &Arc<PodRecord>,
        run: &ContainerRun,
        origin: Origin,
        seen: Seen,
        evidence: String,
        key: u64,
    ) {
        let act = Act {
            pod: pod.clone(),
            run: run.clone(),
            origin,
            seen,
            evidence,
        };
        if self.acts.try_send(act).is_ok() {
            lock(&self.memo).report(key);
        } else {
            self.ctx
                .metrics
                .detect_drops
                .with_label_values(&["acts"])
                .inc();
        }
    }

    fn read_done(&self, read: Pending, answer: &logs::Read) {
        let reads = |result: &str| {
            self.ctx
                .metrics
                .log_reads
                .with_label_values(&[result])
                .inc();
        };
        match evidence_line(answer.bytes()) {
            Some(line) => {
                reads("matched");
                self.act(
                    &read.pod,
                    &read.run,
                    Origin::Output,
                    Seen::Log,
                    line,
                    read.key,
                );
            }
            None => {
                reads(answer.label());
                if let logs::Read::Failed(error) = answer {
                    tracing::debug!(%error, namespace = read.pod.namespace(), pod = read.pod.name(),
                        container = %read.run.name, "previous log not read");
                }
                lock(&self.memo).miss(read.key);
            }
        }
    }
}

/// The acts loop's state.
struct Actor {
    ctx: Context,
    writer: LearnedWriter,
    platforms: Option<Arc<dyn PodPlatforms>>,
    memo: Arc<Mutex<Memo>>,
    evictions: mpsc::Sender<Arc<PodRecord>>,
}

impl Actor {
    async fn run(self, mut acts: mpsc::Receiver<Act>) {
        while let Some(act) = acts.recv().await {
            let key = memo::key(act.pod.uid(), &act.run.name);
            if let Err(error) = self.act(&act).await {
                // Not reported: the next status update or restart tries again.
                lock(&self.memo).unreport(key);
                tracing::warn!(%error, kind = error.kind(), namespace = act.pod.namespace(),
                    pod = act.pod.name(), container = %act.run.name,
                    "exec format error not acted on; retried at its next signal");
            }
        }
    }

    async fn act(&self, act: &Act) -> Result<(), Error> {
        let Act {
            pod,
            run,
            origin,
            seen,
            evidence,
        } = act;
        let ctx = &self.ctx;
        let node = ctx
            .nodes
            .node(&pod.node_name)
            .and_then(|node| node.platform());
        let plan = plan(&Case {
            origin: *origin,
            program_overridden: run.program_overridden,
            node: node.as_ref(),
            image_id: &run.image_id,
            mode: ctx.config.remediate,
            owner_kind: pod.owner.as_ref().map(|owner| owner.kind.as_str()),
            mirror: pod.mirror,
            deleting: pod.deleting,
            exempt: ctx.config.evict_exempt_namespaces.contains(pod.namespace()),
        });
        let learned = match &plan.learn {
            Ok((digest, platform)) => {
                let time = run
                    .last
                    .as_ref()
                    .or(run.ended.as_ref())
                    .and_then(|end| end.finished_at)
                    .map(crate::learned::entry::rfc3339)
                    .unwrap_or_else(crate::learned::now);
                let entry = Entry::new(
                    &run.image,
                    digest,
                    platform,
                    Source::ExecFormatError,
                    Evidence {
                        namespace: pod.namespace().to_owned(),
                        pod: pod.name().to_owned(),
                        container: run.name.clone(),
                        node: pod.node_name.clone(),
                        message: evidence.clone(),
                        time,
                    },
                );
                Ok(self.writer.learn(entry).await? == Learned::Added)
            }
            Err(why) => Err(*why),
        };
        let mut evict = plan.evict.clone();
        if let (Ok(()), Ok((_, platform))) = (&evict, &plan.learn) {
            evict = self.placeable(pod, &run.image, platform).await;
        }
        let correction = plan
            .learn
            .as_ref()
            .ok()
            .map(|(digest, platform)| (digest.as_str(), platform));
        let text = note(&Told {
            container: &run.name,
            image: &run.image,
            node_name: &pod.node_name,
            node: node.as_ref(),
            evidence,
            seen: *seen,
            learned,
            correction,
            evict: &evict,
        });
        let action = if evict.is_ok() { "Evict" } else { "Report" };
        crate::remediate::act::warn(ctx, pod, REASON, action, text).await?;
        ctx.metrics
            .exec_format_errors
            .with_label_values(&[seen.label()])
            .inc();
        if evict.is_ok() && self.evictions.try_send(pod.clone()).is_err() {
            tracing::warn!(
                namespace = pod.namespace(),
                pod = pod.name(),
                "eviction queue full; the pod is evicted at its next signal"
            );
        }
        Ok(())
    }

    /// Whether the pod's images could run elsewhere once `platform` is removed from `image`.
    async fn placeable(
        &self,
        pod: &PodRecord,
        image: &str,
        platform: &crate::Platform,
    ) -> Result<(), Kept> {
        let Some(platforms) = &self.platforms else {
            return Err(Kept::Nowhere(
                "the images' platforms cannot be looked up".into(),
            ));
        };
        let lookups = platforms
            .platforms(&PodImages {
                namespace: pod.namespace().to_owned(),
                name: pod.name().to_owned(),
                images: pod.images.clone(),
                pull_secrets: pod.pull_secrets.clone(),
                service_account: pod.service_account.as_deref().map(str::to_owned),
            })
            .await;
        let cluster: BTreeSet<crate::Platform> = self
            .ctx
            .nodes
            .nodes()
            .iter()
            .filter_map(|node| node.platform())
            .collect();
        placeable(&lookups, &pod.images, image, platform, &cluster).map_err(Kept::Nowhere)
    }
}

/// Evicts the pods sent, through the remediation's token bucket; a PodDisruptionBudget's refusal
/// is tried again later.
async fn evict_loop(ctx: Context, mut pods: mpsc::Receiver<Arc<PodRecord>>) {
    let mut retries: VecDeque<(Instant, Arc<PodRecord>, u32)> = VecDeque::new();
    loop {
        let due = retries.front().map(|(at, _, _)| *at);
        let (pod, attempt) = tokio::select! {
            pod = pods.recv() => match pod {
                Some(pod) => (pod, 1),
                None => return,
            },
            () = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                match retries.pop_front() {
                    Some((_, pod, attempt)) => (pod, attempt),
                    None => continue,
                }
            }
        };
        loop {
            let token = ctx
                .evictions
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(Instant::now().into_std());
            match token {
                Ok(()) => break,
                Err(wait) => tokio::time::sleep(wait).await,
            }
        }
        let namespace = ctx.metrics.namespace(pod.namespace());
        let deletions = |status: &str| {
            ctx.metrics
                .deletions
                .with_label_values(&[namespace, status])
                .inc();
        };
        match crate::remediate::act::evict(&ctx, &pod).await {
            Ok(crate::remediate::act::Evicted::Done) => deletions("success"),
            Ok(crate::remediate::act::Evicted::Blocked) => {
                deletions("blocked");
                if attempt < EVICTION_ATTEMPTS && retries.len() < EVICTIONS {
                    let at = Instant::now() + ctx.config.timings.blocked_retry;
                    retries.push_back((at, pod, attempt.saturating_add(1)));
                }
            }
            Err(error) => {
                if !matches!(error, Error::NotLeader { .. }) {
                    deletions("failed");
                }
                tracing::warn!(%error, namespace = pod.namespace(), pod = pod.name(), "eviction failed");
            }
        }
    }
}
