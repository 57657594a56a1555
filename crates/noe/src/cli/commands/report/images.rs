//! Each unique image of the report resolved once: an image is keyed by its reference and the
//! credential scope of the pull secrets its pods name (connected), so an image reached with
//! different credentials is asked with each; `--concurrency` lookups at a time, each bounded,
//! with the server's resolver, cache, rate limits and credential chain. After a registry host
//! times out, its images not yet started fail at once instead of each waiting the timeout.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use noe_core::report::{Answer, LookupFailure, Workload};
use noe_core::truth::Correction;
use noe_registry::cache::Scope;
use noe_registry::verify::Options;
use noe_webhook::resolve::one_line;
use noe_webhook::resolve::pull_secrets::{PodPullSecrets, PullSecrets};

use super::super::plain_http::{is_plain_http_text, plain_http_hint};
use super::super::progress::Progress;
use crate::app::App;

/// Longest one image's lookup may take (its registry requests have their own timeouts).
const LOOKUP_DEADLINE: Duration = Duration::from_secs(60);

/// One image as asked: its reference and the credential scope of its pods' pull secrets.
type Key = (String, Option<Scope>);

/// The pull secrets read for the workloads: per namespace and list of secret names.
pub type Secrets = HashMap<(String, Vec<String>), Arc<PodPullSecrets>>;

/// The pull secrets of `workload`, if it names any that were read.
pub fn secrets_of(secrets: &Secrets, workload: &Workload) -> Option<Arc<PodPullSecrets>> {
    secrets
        .get(&(workload.namespace.clone(), workload.pull_secrets.clone()))
        .cloned()
}

/// Hears an image's answer as soon as it is known: its reference, the scope and pull secrets
/// it was looked up with.
pub type Answered<'a> =
    dyn Fn(&str, Option<Scope>, Option<&Arc<PodPullSecrets>>, &Answer) + Sync + 'a;

/// An image's answer and the platforms proven false, left out of it.
pub type Looked = (Answer, Proven);

/// The platforms of an image proven false, left out of its answer.
#[derive(Clone, Debug, Default)]
pub struct Proven {
    /// Every correction applied (`--verify`'s and the learned store's).
    pub corrections: Vec<Correction>,
    /// Those the cluster's learned store holds.
    pub learned: Vec<Correction>,
}

/// The answers for every workload's images, in the workloads' and images' order; with
/// `verify`, each image's platforms proven by its own programs too.
///
/// `answered` hears each unique image's answer as soon as it is known (its reference, the
/// scope and pull secrets it was looked up with): the upgrade searches start from there while
/// other images are still looked up.
pub async fn resolve_all(
    app: &App,
    workloads: &[Workload],
    secrets: &Secrets,
    concurrency: usize,
    verify: bool,
    answered: &Answered<'_>,
) -> Vec<Vec<Looked>> {
    let secrets_of = |workload: &Workload| secrets_of(secrets, workload);
    // Each unique (image, scope) once, in order of first appearance.
    let mut index: HashMap<Key, usize> = HashMap::new();
    let mut unique: Vec<(Key, Option<Arc<PodPullSecrets>>)> = Vec::new();
    let mut keys_of: Vec<Vec<usize>> = Vec::with_capacity(workloads.len());
    for workload in workloads {
        let pod = secrets_of(workload);
        let scope = pod.as_ref().and_then(|pod| pod.scope());
        let keys = workload
            .images
            .iter()
            .map(|(image, _)| {
                let key = (image.clone(), scope);
                *index.entry(key.clone()).or_insert_with(|| {
                    unique.push((key, pod.clone()));
                    unique.len().saturating_sub(1)
                })
            })
            .collect();
        keys_of.push(keys);
    }
    drop(index);
    let progress = Progress::new(unique.len(), "images");
    let timed_out = TimedOut::default();
    let mut answers: Vec<Option<Looked>> = vec![None; unique.len()];
    let mut resolved = futures::stream::iter(unique.iter().enumerate())
        .map(|(at, ((image, scope), pod))| {
            let timed_out = &timed_out;
            async move {
                (
                    at,
                    resolve(app, timed_out, image, *scope, pod.as_deref(), verify).await,
                )
            }
        })
        .buffer_unordered(concurrency.max(1));
    while let Some((at, answer)) = resolved.next().await {
        progress.done(|| ());
        if let Some(((image, scope), pod)) = unique.get(at) {
            answered(image, *scope, pod.as_ref(), &answer.0);
        }
        if let Some(slot) = answers.get_mut(at) {
            *slot = Some(answer);
        }
    }
    drop(resolved);
    drop(progress);
    keys_of
        .into_iter()
        .map(|keys| {
            keys.into_iter()
                .map(|at| {
                    answers.get(at).cloned().flatten().unwrap_or_else(|| {
                        let missing = Err(Arc::new(LookupFailure {
                            kind: "internal".into(),
                            message: "no lookup result".into(),
                        }));
                        (missing, Proven::default())
                    })
                })
                .collect()
        })
        .collect()
}

/// The pull secrets of every distinct `(namespace, names)` the workloads name, read once each.
pub async fn load_secrets(
    workloads: &[Workload],
    pull_secrets: Option<&PullSecrets>,
    concurrency: usize,
) -> Secrets {
    let Some(api) = pull_secrets else {
        return HashMap::new();
    };
    let mut wanted: Vec<(String, Vec<String>)> = workloads
        .iter()
        .filter(|w| !w.pull_secrets.is_empty())
        .map(|w| (w.namespace.clone(), w.pull_secrets.clone()))
        .collect();
    wanted.sort();
    wanted.dedup();
    futures::stream::iter(wanted)
        .map(|(namespace, names)| async move {
            let pod = api.load(&namespace, &names).await;
            for failure in pod.failures() {
                tracing::warn!(
                    namespace = %failure.namespace,
                    secret = %failure.name,
                    reason = failure.reason.as_str(),
                    "Image pull secret not usable"
                );
            }
            ((namespace, names), Arc::new(pod))
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await
}

/// Registry hosts that timed out in this run, with the first timeout's message.
#[derive(Default)]
struct TimedOut(Mutex<HashMap<String, String>>);

impl TimedOut {
    fn get(&self, host: &str) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(host)
            .cloned()
    }

    fn mark(&self, host: &str, message: &str) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(host.to_owned())
            .or_insert_with(|| message.to_owned());
    }
}

/// One image's platforms, or why not; with `verify`, its platforms proven false left out.
async fn resolve(
    app: &App,
    timed_out: &TimedOut,
    image: &str,
    scope: Option<Scope>,
    pod: Option<&PodPullSecrets>,
    verify: bool,
) -> Looked {
    let failure = |kind: &str, message: String| {
        let failed = Err(Arc::new(LookupFailure {
            kind: kind.to_owned(),
            message,
        }));
        (failed, Proven::default())
    };
    let host = app
        .resolver
        .target(image)
        .ok()
        .map(|target| target.registry);
    if let Some(first) = host.as_deref().and_then(|host| timed_out.get(host)) {
        let host = host.unwrap_or_default();
        return failure(
            "timeout",
            format!("not tried: {host} timed out earlier in this run ({first})"),
        );
    }
    let answer = match app.resolver.routed(image).await {
        Ok(routed) => {
            let candidates = app.credentials(None).candidates(&routed, pod).await;
            let resolved = app.resolver.resolve_routed(&routed, scope, &candidates);
            match tokio::time::timeout(LOOKUP_DEADLINE, resolved).await {
                Ok(Ok(resolution)) if verify => {
                    let options = Options::default();
                    let verified = app.resolver.verify(&routed, &candidates, &options);
                    let corrections = match verified.await {
                        Ok(report) => report
                            .platforms
                            .iter()
                            .filter_map(|p| p.report.correction(&report.digest, &p.platform))
                            .collect(),
                        Err(error) => {
                            tracing::warn!(image, error = %one_line(&error), "not verified");
                            Vec::new()
                        }
                    };
                    Ok(Ok((resolution, corrections)))
                }
                other => other.map(|answer| answer.map(|resolution| (resolution, Vec::new()))),
            }
        }
        Err(error) => Ok(Err(error)),
    };
    match answer {
        Ok(Ok((resolution, mut corrections))) => {
            // What the learned store knows proven false for this digest counts as well.
            let learned = app
                .corrections()
                .map(|c| c.for_digest(resolution.digest.as_str()))
                .unwrap_or_default();
            for known in &learned {
                if !corrections.contains(known) {
                    corrections.push(known.clone());
                }
            }
            let corrected = noe_core::truth::correct(&resolution.platforms, &corrections);
            let applied: Vec<Correction> = corrected.applied.into_iter().cloned().collect();
            let proven = Proven {
                learned: applied
                    .iter()
                    .filter(|c| learned.contains(c))
                    .cloned()
                    .collect(),
                corrections: applied,
            };
            (Ok(corrected.kept.into()), proven)
        }
        Ok(Err(error)) => {
            let mut message = one_line(&error);
            if let (true, Some(registry)) = (is_plain_http_text(&message), error.registry()) {
                message = format!("{message} ({})", plain_http_hint(registry));
            }
            if let (Some(host), "timeout") = (&host, error.kind()) {
                timed_out.mark(host, &message);
            }
            failure(error.kind(), message)
        }
        Err(_) => {
            let message = format!("no answer within {LOOKUP_DEADLINE:?}");
            if let Some(host) = &host {
                timed_out.mark(host, &message);
            }
            failure("timeout", message)
        }
    }
}
