//! The seams between the admission flow and the outside world: image platform lookups and
//! registry credentials. The server uses [`noe_registry::Resolver`] and the configured credential
//! sources; tests may script both.

use std::sync::Arc;

use futures::future::BoxFuture;
use noe_registry::{CredentialCandidate, Platform};

/// Finds the platforms of one image with the given credential candidates (tried in order).
pub trait PlatformLookup: Send + Sync + 'static {
    /// The platforms, or a one-line reason naming the image's registry or status.
    fn lookup<'a>(
        &'a self,
        image: &'a str,
        credentials: &'a [CredentialCandidate],
    ) -> BoxFuture<'a, Result<Vec<Platform>, String>>;
}

impl PlatformLookup for noe_registry::Resolver {
    fn lookup<'a>(
        &'a self,
        image: &'a str,
        credentials: &'a [CredentialCandidate],
    ) -> BoxFuture<'a, Result<Vec<Platform>, String>> {
        Box::pin(async move {
            self.resolve(image, credentials)
                .await
                .map(|resolution| resolution.platforms.clone())
                .map_err(|error| error.to_string())
        })
    }
}

/// The credentials of one pod: candidates per image, and what went wrong loading them.
pub trait PodCredentials: Send + Sync {
    /// Candidates for `image`, in the order they are tried.
    fn candidates(&self, image: &str) -> Vec<CredentialCandidate>;
    /// How many of the pod's pull secrets could not be read (`noe_hook_image_pull_secret_failed_total`).
    fn failed_pull_secrets(&self) -> usize {
        0
    }
}

/// Where credentials come from (pod pull secrets, credential providers, containerd and docker
/// configuration).
pub trait CredentialSource: Send + Sync + 'static {
    /// Loads what a pod in `namespace` with these `imagePullSecrets` names may use.
    fn for_pod<'a>(
        &'a self,
        namespace: &'a str,
        pull_secrets: &'a [String],
    ) -> BoxFuture<'a, Arc<dyn PodCredentials>>;
}

/// No credentials: every lookup is anonymous.
#[derive(Clone, Copy, Debug, Default)]
pub struct Anonymous;

impl PodCredentials for Anonymous {
    fn candidates(&self, _image: &str) -> Vec<CredentialCandidate> {
        Vec::new()
    }
}

impl CredentialSource for Anonymous {
    fn for_pod<'a>(
        &'a self,
        _namespace: &'a str,
        _pull_secrets: &'a [String],
    ) -> BoxFuture<'a, Arc<dyn PodCredentials>> {
        Box::pin(async { Arc::new(Anonymous) as Arc<dyn PodCredentials> })
    }
}
