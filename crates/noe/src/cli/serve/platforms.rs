//! The controllers' image platforms ([`noe_controller::PodPlatforms`]) answered by the webhook's
//! lookups ([`noe_webhook::resolve::Resolve`]): the same resolver and platform cache, the same
//! credentials (the pod's pull secrets, then the node-level sources) as the admission.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use noe_controller::{ImageLookup, LookupError, Platform, PodImages, PodPlatforms, Support};
use noe_webhook::resolve::pull_secrets::PullSecrets;
use noe_webhook::resolve::{RegistryLookup, Resolve};

use crate::app::App;

/// How long the lookups of one pod may take: the controllers are not on the admission's clock,
/// and a pod whose lookups did not finish is judged again later.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A pod's image platforms from the registries, through the admission's resolver.
pub struct ResolverPlatforms {
    resolve: Resolve,
}

impl ResolverPlatforms {
    /// Lookups with `app`'s resolver and credentials, and the pull secrets when the API is
    /// reachable.
    pub fn new(app: &App, pull_secrets: Option<PullSecrets>, deadline: Duration) -> Self {
        let resolve = Resolve::new(
            Arc::new(RegistryLookup::new(app.resolver.clone())),
            Arc::new(app.credentials(pull_secrets)),
            deadline,
        );
        Self { resolve }
    }
}

impl PodPlatforms for ResolverPlatforms {
    fn platforms<'a>(&'a self, pod: &'a PodImages) -> BoxFuture<'a, Vec<ImageLookup>> {
        Box::pin(async move {
            let resolved = self
                .resolve
                .platforms(&pod.namespace, &pod.pull_secrets, &pod.images)
                .await;
            pod.images
                .iter()
                .map(|image| ImageLookup {
                    image: image.clone(),
                    support: support(image, resolved.lookups.get(image)),
                })
                .collect()
        })
    }
}

/// What an image runs on, from its lookup: no platform at all is an arch-neutral artifact (an
/// image volume); platforms are kept as OS and arch (variants do not matter for placement).
pub fn support(
    image: &str,
    lookup: Option<&Result<Arc<[noe_registry::Platform]>, String>>,
) -> Result<Support, LookupError> {
    let failed = |reason: &str| LookupError {
        image: image.to_owned(),
        reason: reason.to_owned(),
    };
    let platforms = match lookup {
        Some(Ok(platforms)) => platforms,
        Some(Err(reason)) => return Err(failed(reason)),
        None => return Err(failed("no lookup result")),
    };
    if platforms.is_empty() {
        return Ok(Support::Any);
    }
    let known: BTreeSet<Platform> = platforms
        .iter()
        .filter(|p| !p.architecture.is_empty())
        .map(|p| Platform::new(&p.os, &p.architecture))
        .collect();
    if known.is_empty() {
        return Err(failed("the registry lists no architecture for it"));
    }
    Ok(Support::Only(known))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn platform(os: &str, arch: &str, variant: Option<&str>) -> noe_registry::Platform {
        noe_registry::Platform {
            os: os.to_owned(),
            architecture: arch.to_owned(),
            variant: variant.map(str::to_owned),
            os_version: None,
        }
    }

    #[test]
    fn lookups_become_support() {
        let index: Arc<[noe_registry::Platform]> = Arc::from(vec![
            platform("linux", "amd64", None),
            platform("linux", "arm", Some("v7")),
            platform("linux", "arm", Some("v6")),
            platform("", "arm64", None),
        ]);
        assert_eq!(
            support("app:1", Some(&Ok(index))),
            Ok(Support::Only(
                [
                    Platform::new("linux", "amd64"),
                    Platform::new("linux", "arm"),
                    Platform::new("", "arm64"),
                ]
                .into()
            ))
        );
        assert_eq!(
            support("artifact:1", Some(&Ok(Arc::from(Vec::new())))),
            Ok(Support::Any)
        );
        let error = support("private:1", Some(&Err("unauthorized".to_owned()))).unwrap_err();
        assert_eq!(error.to_string(), "private:1: unauthorized");
        assert_eq!(
            support("lost:1", None).unwrap_err().reason,
            "no lookup result"
        );
        let archless: Arc<[noe_registry::Platform]> = Arc::from(vec![platform("linux", "", None)]);
        assert!(support("odd:1", Some(&Ok(archless))).is_err());
    }
}
