//! The seam to the registry side: the composition root implements [`PodPlatforms`] with the
//! webhook's resolver and the pod's pull secrets; the controllers never import the webhook.

use std::collections::HashMap;

use futures::future::BoxFuture;
pub use noe_core::platform::{Platform, Support};

/// Why an image's platforms are not known (the registry's answer, one line).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{image}: {reason}")]
pub struct LookupError {
    /// The image as written in the pod.
    pub image: String,
    /// One line naming the registry or status (never a credential).
    pub reason: String,
}

/// The lookup of one image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageLookup {
    /// The image as written in the pod.
    pub image: String,
    /// Its platforms, or why they are unknown.
    pub support: Result<Support, LookupError>,
}

/// What a lookup needs to know of a pod: where it is (for its pull secrets), who it runs as
/// (for credential providers that ask for its token) and its images.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodImages {
    /// Namespace (pull secrets are read there).
    pub namespace: String,
    /// Name (for logs).
    pub name: String,
    /// Container, init container and image volume references, deduplicated.
    pub images: Vec<String>,
    /// `spec.imagePullSecrets` names.
    pub pull_secrets: Vec<String>,
    /// `spec.serviceAccountName`, when set.
    pub service_account: Option<String>,
}

/// Finds what each of a pod's images can run on. The composition root answers it with the
/// webhook's resolver (its cache included) and the pod's pull secrets.
pub trait PodPlatforms: Send + Sync + 'static {
    /// One [`ImageLookup`] per image of `pod`, in any order.
    fn platforms<'a>(&'a self, pod: &'a PodImages) -> BoxFuture<'a, Vec<ImageLookup>>;
}

/// A fixed answer per image (overrides, tests, benches); an image not in the map is a failed
/// lookup.
impl PodPlatforms for HashMap<String, Support> {
    fn platforms<'a>(&'a self, pod: &'a PodImages) -> BoxFuture<'a, Vec<ImageLookup>> {
        let lookups = pod
            .images
            .iter()
            .map(|image| ImageLookup {
                image: image.clone(),
                support: self.get(image).cloned().ok_or_else(|| LookupError {
                    image: image.clone(),
                    reason: "no platforms known for this image".to_owned(),
                }),
            })
            .collect();
        Box::pin(std::future::ready(lookups))
    }
}
