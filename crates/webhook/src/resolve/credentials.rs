//! Which credentials a pod's images may use: its pull secrets first (when the Kubernetes API is
//! reachable), then the node-level sources (credential provider plugins, containerd and docker
//! configuration), matched for the reference actually contacted (after `--registry-proxies`),
//! and for each containerd mirror, those of the mirror's own host.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use noe_registry::credentials::{push_unique, Sources};
use noe_registry::{CredentialCandidate, Resolver};

use super::pull_secrets::{PodPullSecrets, PullSecrets};

/// The credentials of one pod: candidates per image (as written in the pod), and how many of
/// its pull secrets could not be read.
#[derive(Clone, Debug, Default)]
pub struct PodCredentials {
    pub candidates: HashMap<String, Vec<CredentialCandidate>>,
    /// `noe_hook_image_pull_secret_failed_total` increments.
    pub failed_pull_secrets: usize,
}

impl PodCredentials {
    pub fn for_image(&self, image: &str) -> &[CredentialCandidate] {
        self.candidates
            .get(image)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }
}

/// Where credentials come from (pod pull secrets, credential providers, containerd and docker
/// configuration).
pub trait CredentialSource: Send + Sync + 'static {
    /// What a pod in `namespace` with these `imagePullSecrets` names may use for its `images`.
    fn for_pod<'a>(
        &'a self,
        namespace: &'a str,
        pull_secrets: &'a [String],
        images: &'a [String],
    ) -> BoxFuture<'a, PodCredentials>;
}

/// No credentials: every lookup is anonymous.
#[derive(Clone, Copy, Debug, Default)]
pub struct Anonymous;

impl CredentialSource for Anonymous {
    fn for_pod<'a>(
        &'a self,
        _namespace: &'a str,
        _pull_secrets: &'a [String],
        _images: &'a [String],
    ) -> BoxFuture<'a, PodCredentials> {
        Box::pin(async { PodCredentials::default() })
    }
}

/// The server's credentials: the pod's pull secrets first (when the API is reachable), then the
/// node-level sources (plugins, containerd, docker config), for the reference actually contacted
/// (after `--registry-proxies`), and for each containerd mirror, those of the mirror's host.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub resolver: Resolver,
    pub sources: Arc<Sources>,
    pub pull_secrets: Option<PullSecrets>,
}

impl Credentials {
    /// The candidates for one image, pod secrets first, matched for the reference actually
    /// contacted (after proxies); then, for each containerd mirror of its registry, the
    /// candidates matched for the mirror's own host, marked for that mirror only.
    pub async fn candidates(
        &self,
        image: &str,
        pod: Option<&PodPullSecrets>,
    ) -> Vec<CredentialCandidate> {
        // A reference that does not parse fails in the lookup, with the better message.
        let Ok(route) = self.resolver.route(image).await else {
            return Vec::new();
        };
        let target = route.target.to_string();
        let mut out = self.matched(&target, pod).await;
        let mut done: Vec<String> = Vec::new();
        for endpoint in route.endpoints.iter().filter(|e| e.mirror) {
            let host = endpoint.host();
            if done.contains(&host) {
                continue;
            }
            let at_mirror = endpoint.credential_image(&target);
            let matched = self.matched(&at_mirror, pod).await;
            out.extend(matched.into_iter().map(|c| c.for_mirror(host.clone())));
            done.push(host);
        }
        out
    }

    /// Pod secrets, then the node-level sources, for `image` as named.
    async fn matched(&self, image: &str, pod: Option<&PodPullSecrets>) -> Vec<CredentialCandidate> {
        let mut out = pod.map(|p| p.candidates(image)).unwrap_or_default();
        push_unique(&mut out, self.sources.candidates(image).await);
        out
    }
}

impl CredentialSource for Credentials {
    fn for_pod<'a>(
        &'a self,
        namespace: &'a str,
        pull_secrets: &'a [String],
        images: &'a [String],
    ) -> BoxFuture<'a, PodCredentials> {
        Box::pin(async move {
            let pod = match (&self.pull_secrets, pull_secrets.is_empty()) {
                (Some(api), false) => Some(api.load(namespace, pull_secrets).await),
                _ => None,
            };
            if let Some(pod) = &pod {
                for failure in pod.failures() {
                    tracing::warn!(
                        secret = %failure.name,
                        reason = failure.reason.as_str(),
                        "Image pull secret not usable"
                    );
                }
            }
            let mut candidates = HashMap::new();
            for image in images {
                candidates.insert(image.clone(), self.candidates(image, pod.as_ref()).await);
            }
            PodCredentials {
                candidates,
                failed_pull_secrets: pod.as_ref().map_or(0, |p| p.failures().len()),
            }
        })
    }
}
