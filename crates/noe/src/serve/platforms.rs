//! The controllers' image platforms ([`noe_controller::PodPlatforms`]) answered by the decider
//! ([`noe_webhook::decider::Decider::platforms`]): the same resolver and platform cache, the
//! same platform corrections, the same credentials (the pod's pull secrets, its service account for credential providers that ask
//! for its token, then the node-level sources) as the admission.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use noe_controller::{ImageLookup, LookupError, PodImages, PodPlatforms, Support};
use noe_webhook::decider::Decider;
use noe_webhook::resolve::credentials::PodAccess;
use noe_webhook::resolve::pull_secrets::PullSecrets;

use crate::app::App;

/// How long the lookups of one pod may take: the controllers are not on the admission's clock,
/// and a pod whose lookups did not finish is judged again later.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A pod's image platforms from the registries, through the decider.
pub struct ResolverPlatforms {
    decider: Decider,
}

impl ResolverPlatforms {
    /// Lookups with `app`'s resolver, credentials and corrections, and the pull secrets when
    /// the API is reachable.
    pub fn new(
        app: &App,
        pull_secrets: Option<PullSecrets>,
        deadline: Duration,
    ) -> anyhow::Result<Self> {
        // Its lookups are not admissions: their metrics go to a registry of their own.
        let metrics = noe_webhook::metrics::Metrics::register(&prometheus::Registry::new())?;
        let policy = noe_core::decide::Policy::default();
        let decider = app.decider_counting_in(policy, deadline, pull_secrets, metrics);
        Ok(Self { decider })
    }
}

impl PodPlatforms for ResolverPlatforms {
    fn platforms<'a>(&'a self, pod: &'a PodImages) -> BoxFuture<'a, Vec<ImageLookup>> {
        Box::pin(async move {
            let access = PodAccess {
                pull_secrets: &pod.pull_secrets,
                service_account: pod.service_account.as_deref(),
            };
            let (lookups, corrected) = self
                .decider
                .platforms(&pod.namespace, access, &pod.images)
                .await;
            pod.images
                .iter()
                .map(|image| ImageLookup {
                    image: image.clone(),
                    support: corrected_support(
                        image,
                        lookups.get(image),
                        corrected.contains_key(image),
                    ),
                })
                .collect()
        })
    }
}

/// [`support`] of a lookup `corrected` platforms were left out of: an image left with none runs
/// nowhere (never arch-neutral).
pub fn corrected_support(
    image: &str,
    lookup: Option<&Result<Arc<[noe_core::Platform]>, noe_core::decide::LookupError>>,
    corrected: bool,
) -> Result<Support, LookupError> {
    match lookup {
        Some(Ok(platforms)) if corrected && platforms.is_empty() => {
            Ok(Support::Only(Default::default()))
        }
        lookup => support(image, lookup),
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

    /// An image whose every platform is proven false runs on no node: remediation finds it
    /// misplaced wherever it runs, never arch-neutral.
    #[test]
    fn an_image_corrected_to_no_platform_runs_nowhere() {
        use noe_controller::objects::PodRecord;
        use noe_controller::remediate::{judge, Verdict};
        use noe_controller::Remediate;
        let none: Arc<[noe_core::Platform]> = Arc::from(Vec::new());
        let support = corrected_support("app:1", Some(&Ok(none.clone())), true).unwrap();
        assert_eq!(support, Support::Only(Default::default()));
        assert_eq!(
            corrected_support("artifact:1", Some(&Ok(none)), false).unwrap(),
            Support::Any
        );
        let pod = PodRecord::new("team", "app-0", "node-1", &["app:1"]);
        let lookups = [ImageLookup {
            image: "app:1".to_owned(),
            support: Ok(support),
        }];
        let node = noe_core::Platform::new("linux", "arm64", None);
        assert!(matches!(
            judge(&pod, &node, &lookups, Remediate::Report),
            Verdict::Misplaced { .. }
        ));
    }
}
