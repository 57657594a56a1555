//! Upgrade paths for the images that block (`--upgrades`, docs/configuration.md "Upgrade
//! paths"): one search per image, credential scope, OS and target architecture, however many
//! workloads it blocks, `--concurrency` at a time, with the server's resolver, cache and
//! credentials ([`noe_registry::upgrade::Upgrades`]: the repository's tags listed once per run).

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use noe_core::report::Item;
use noe_core::upgrade::{NoPath, Upgrade};
use noe_core::Platform;
use noe_registry::cache::Scope;
use noe_registry::upgrade::Upgrades;
use noe_webhook::resolve::one_line;

use super::super::progress::Progress;
use super::images::{secrets_of, Secrets};
use crate::app::App;

/// One search: the image, the scope of its pull secrets, the target platform.
type Key = (String, Option<Scope>, String, String);

/// Searches the upgrade paths of every image that blocks a target architecture of `items` and
/// sets each item's [`Item::upgrades`].
pub async fn find_all(app: &App, items: &mut [Item], secrets: &Secrets, concurrency: usize) {
    let mut index: HashMap<Key, usize> = HashMap::new();
    let mut searches: Vec<(
        Key,
        Option<Arc<noe_webhook::resolve::pull_secrets::PodPullSecrets>>,
    )> = Vec::new();
    // Per item, per architecture: the searches of its blocking images, in their order.
    let mut wanted: Vec<Vec<(String, Vec<usize>)>> = Vec::with_capacity(items.len());
    for item in items.iter() {
        let pod = secrets_of(secrets, &item.workload);
        let scope = pod.as_ref().and_then(|pod| pod.scope());
        let os = item.workload.os.clone();
        let per_arch = item
            .blocking
            .iter()
            .filter(|(_, images)| !images.is_empty())
            .map(|(arch, images)| {
                let at = images
                    .iter()
                    .map(|image| {
                        let key = (image.clone(), scope, os.clone(), arch.clone());
                        *index.entry(key.clone()).or_insert_with(|| {
                            searches.push((key, pod.clone()));
                            searches.len().saturating_sub(1)
                        })
                    })
                    .collect();
                (arch.clone(), at)
            })
            .collect();
        wanted.push(per_arch);
    }
    drop(index);
    let upgrades = Upgrades::new(app.resolver.clone());
    let progress = Progress::new(searches.len(), "upgrade paths");
    let mut found: Vec<Option<Arc<Upgrade>>> = vec![None; searches.len()];
    let mut running = futures::stream::iter(searches.iter().enumerate())
        .map(|(at, ((image, scope, os, arch), pod))| {
            let upgrades = &upgrades;
            async move {
                let target = Platform::new(os.as_str(), arch.as_str(), None);
                (
                    at,
                    search(app, upgrades, image, *scope, pod.as_deref(), &target).await,
                )
            }
        })
        .buffer_unordered(concurrency.max(1));
    while let Some((at, upgrade)) = running.next().await {
        progress.done(|| ());
        if let Some(slot) = found.get_mut(at) {
            *slot = Some(Arc::new(upgrade));
        }
    }
    drop(running);
    drop(progress);
    for (item, per_arch) in items.iter_mut().zip(wanted) {
        item.upgrades = per_arch
            .into_iter()
            .map(|(arch, at)| {
                let list = at
                    .into_iter()
                    .filter_map(|i| found.get(i).cloned().flatten())
                    .collect();
                (arch, list)
            })
            .collect();
    }
}

/// One image's upgrade path for `target`.
async fn search(
    app: &App,
    upgrades: &Upgrades,
    image: &str,
    scope: Option<Scope>,
    pod: Option<&noe_webhook::resolve::pull_secrets::PodPullSecrets>,
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
