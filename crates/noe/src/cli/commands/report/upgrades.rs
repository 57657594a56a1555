//! Upgrade paths for the images that block (`--upgrades`, docs/configuration.md "Upgrade
//! paths"): one search per image, credential scope, OS and target architecture, however many
//! workloads it blocks, with the server's resolver, cache and credentials
//! ([`noe_registry::upgrade::Upgrades`]: the repository's tags listed once per run).
//!
//! The searches run beside the image lookups, not after them: each image's answer, as soon as
//! it is known ([`Searches::answered`]), starts the searches of the targets it blocks,
//! `--concurrency` at a time ([`Searches::run`]); the paths are then set on the items
//! ([`Searches::attach`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use noe_core::images::ImageKind;
use noe_core::report::{blocks, Answer, Item, Workload};
use noe_core::upgrade::{NoPath, Upgrade};
use noe_core::Platform;
use noe_registry::cache::Scope;
use noe_registry::upgrade::Upgrades;
use noe_webhook::resolve::one_line;
use noe_webhook::resolve::pull_secrets::PodPullSecrets;
use tokio::sync::mpsc;

use super::images::{secrets_of, Secrets};
use crate::app::App;

/// One search: the image, the scope of its pull secrets, the OS and the architecture.
type Key = (String, Option<Scope>, String, String);

/// Per image and scope: the OS and kind of the workloads that name it.
type Uses = HashMap<(String, Option<Scope>), Vec<(String, ImageKind)>>;

/// One search to run, with the pull secrets it is asked with.
type Job = (Key, Option<Arc<PodPullSecrets>>);

/// The searches of one report. Dropped, it closes the queue: [`Searches::run`] ends once the
/// searches started are done.
pub struct Searches {
    targets: Vec<String>,
    uses: Uses,
    /// Searches started (each key once).
    started: Mutex<HashSet<Key>>,
    jobs: mpsc::UnboundedSender<Job>,
}

impl Searches {
    /// The searches `workloads` may need for `targets`, and the receiver [`Searches::run`]
    /// takes the jobs from.
    pub fn new(
        workloads: &[Workload],
        secrets: &Secrets,
        targets: &[String],
    ) -> (Self, mpsc::UnboundedReceiver<Job>) {
        let mut uses = Uses::new();
        for workload in workloads {
            let scope = secrets_of(secrets, workload).and_then(|pod| pod.scope());
            for (image, kind) in &workload.images {
                let seen = uses.entry((image.clone(), scope)).or_default();
                let used = (workload.os.clone(), *kind);
                if !seen.contains(&used) {
                    seen.push(used);
                }
            }
        }
        let (jobs, receiver) = mpsc::unbounded_channel();
        let searches = Self {
            targets: targets.to_vec(),
            uses,
            started: Mutex::new(HashSet::new()),
            jobs,
        };
        (searches, receiver)
    }

    /// An image's answer is known: the searches of the targets it blocks start.
    pub fn answered(
        &self,
        image: &str,
        scope: Option<Scope>,
        pod: Option<&Arc<PodPullSecrets>>,
        answer: &Answer,
    ) {
        let Some(uses) = self.uses.get(&(image.to_owned(), scope)) else {
            return;
        };
        let mut started = self.started.lock().unwrap_or_else(PoisonError::into_inner);
        for (os, kind) in uses {
            for arch in &self.targets {
                if !blocks(answer, *kind, os, arch) {
                    continue;
                }
                let key = (image.to_owned(), scope, os.clone(), arch.clone());
                if started.insert(key.clone()) {
                    let _ = self.jobs.send((key, pod.cloned()));
                }
            }
        }
    }

    /// Runs the searches as they come, `concurrency` at a time, until the sender is closed.
    pub async fn run(
        app: &App,
        jobs: mpsc::UnboundedReceiver<Job>,
        concurrency: usize,
    ) -> HashMap<Key, Arc<Upgrade>> {
        let upgrades = Upgrades::new(app.resolver.clone());
        let upgrades = &upgrades;
        let mut found = HashMap::new();
        let mut running = tokio_stream_of(jobs)
            .map(|(key, pod)| async move {
                let (image, scope, os, arch) = &key;
                let target = Platform::new(os.as_str(), arch.as_str(), None);
                let upgrade = search(app, upgrades, image, *scope, pod.as_deref(), &target).await;
                (key, upgrade)
            })
            .buffer_unordered(concurrency.max(1));
        while let Some((key, upgrade)) = running.next().await {
            found.insert(key, Arc::new(upgrade));
        }
        found
    }

    /// Sets each item's [`Item::upgrades`] from the searches' results.
    pub fn attach(items: &mut [Item], secrets: &Secrets, found: &HashMap<Key, Arc<Upgrade>>) {
        for item in items {
            let scope = secrets_of(secrets, &item.workload).and_then(|pod| pod.scope());
            let os = item.workload.os.clone();
            item.upgrades = item
                .blocking
                .iter()
                .filter(|(_, images)| !images.is_empty())
                .map(|(arch, images)| {
                    let paths = images
                        .iter()
                        .filter_map(|image| {
                            found
                                .get(&(image.clone(), scope, os.clone(), arch.clone()))
                                .cloned()
                        })
                        .collect();
                    (arch.clone(), paths)
                })
                .collect();
        }
    }
}

/// The jobs as a stream, ending when every sender is gone.
fn tokio_stream_of(mut jobs: mpsc::UnboundedReceiver<Job>) -> impl futures::Stream<Item = Job> {
    futures::stream::poll_fn(move |cx| jobs.poll_recv(cx))
}

/// One image's upgrade path for `target`.
async fn search(
    app: &App,
    upgrades: &Upgrades,
    image: &str,
    scope: Option<Scope>,
    pod: Option<&PodPullSecrets>,
    target: &Platform,
) -> Upgrade {
    match app.resolver.routed(image).await {
        Ok(routed) => {
            let candidates = app.credentials(None).candidates(&routed, pod).await;
            upgrades.find(&routed, scope, &candidates, target).await
        }
        Err(error) => Upgrade {
            image: image.to_owned(),
            outcome: Err(NoPath::Tags {
                kind: error.kind().to_owned(),
                message: one_line(&error),
            }),
        },
    }
}
