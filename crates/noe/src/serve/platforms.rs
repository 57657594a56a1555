//! The controllers' image platforms ([`noe_controller::PodPlatforms`]) answered by the webhook's
//! lookups ([`noe_webhook::resolve::Resolve`]): the same resolver and platform cache, the same
//! credentials (the pod's pull secrets, its service account for credential providers that ask
//! for its token, then the node-level sources) as the admission.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use noe_controller::{ImageLookup, LookupError, PodImages, PodPlatforms, Support};
use noe_webhook::resolve::credentials::PodAccess;
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
            let access = PodAccess {
                pull_secrets: &pod.pull_secrets,
                service_account: pod.service_account.as_deref(),
            };
            let resolved = self
                .resolve
                .platforms_for(&pod.namespace, access, &pod.images, tracing::Span::none)
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

/// What an image runs on, from its lookup ([`Support::of`]: no platform at all is an
/// arch-neutral artifact, an override's `*` runs anywhere).
pub fn support(
    image: &str,
    lookup: Option<&Result<Arc<[noe_core::Platform]>, noe_core::decide::LookupError>>,
) -> Result<Support, LookupError> {
    let failed = |reason: &str| LookupError {
        image: image.to_owned(),
        reason: reason.to_owned(),
    };
    match lookup {
        Some(Ok(platforms)) => Support::of(platforms)
            .ok_or_else(|| failed("the registry lists no architecture for it")),
        Some(Err(error)) => Err(failed(&error.message)),
        None => Err(failed("no lookup result")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use noe_controller::Platform;

    fn platform(os: &str, arch: &str, variant: Option<&str>) -> noe_core::Platform {
        noe_core::Platform {
            os: os.to_owned(),
            architecture: arch.to_owned(),
            variant: variant.map(str::to_owned),
            os_version: None,
        }
    }

    #[test]
    fn lookups_become_support() {
        let index: Arc<[noe_core::Platform]> = Arc::from(vec![
            platform("linux", "amd64", None),
            platform("linux", "arm", Some("v7")),
            platform("linux", "arm", Some("v6")),
            platform("", "arm64", None),
        ]);
        assert_eq!(
            support("app:1", Some(&Ok(index))),
            Ok(Support::Only(
                [
                    Platform::new("linux", "amd64", None),
                    Platform::new("linux", "arm", None),
                    Platform::new("", "arm64", None),
                ]
                .into()
            ))
        );
        assert_eq!(
            support("artifact:1", Some(&Ok(Arc::from(Vec::new())))),
            Ok(Support::Any)
        );
        let error = support(
            "private:1",
            Some(&Err(noe_core::decide::LookupError::message("unauthorized"))),
        )
        .unwrap_err();
        assert_eq!(error.to_string(), "private:1: unauthorized");
        assert_eq!(
            support("lost:1", None).unwrap_err().reason,
            "no lookup result"
        );
        let archless: Arc<[noe_core::Platform]> = Arc::from(vec![platform("linux", "", None)]);
        assert!(support("odd:1", Some(&Ok(archless))).is_err());
    }

    #[test]
    fn an_image_overridden_to_any_platform_is_never_misplaced() {
        use noe_controller::objects::PodRecord;
        use noe_controller::remediate::{judge, Verdict};
        use noe_controller::Remediate;
        // `--platform-overrides` entry `platforms: ["*"]`: the resolver answers `Platform::any()`.
        let neutral: Arc<[noe_core::Platform]> = Arc::from(vec![noe_core::Platform::any()]);
        let support = support("tools:1", Some(&Ok(neutral))).unwrap();
        assert_eq!(support, Support::Any);
        let pod = PodRecord::new("team", "tools-0", "node-1", &["tools:1"]);
        let lookups = [ImageLookup {
            image: "tools:1".to_owned(),
            support: Ok(support),
        }];
        for arch in ["amd64", "arm64", "s390x"] {
            let node = noe_core::Platform::new("linux", arch, None);
            assert_eq!(
                judge(&pod, &node, &lookups, Remediate::Evict),
                Verdict::Fits,
                "{arch}"
            );
        }
    }
}
