//! Which credentials a pod's images may use: its pull secrets first (when the Kubernetes API is
//! reachable), then the node-level sources (credential provider plugins, containerd and docker
//! configuration), matched for the reference actually contacted (after `--registry-proxies`),
//! and for each containerd mirror, those of the mirror's own host.

use std::sync::Arc;

use futures::future::BoxFuture;
use noe_registry::cache::Scope;
use noe_registry::credentials::{Request, Source, Sources};
use noe_registry::{CredentialCandidate, Resolver};

use super::pull_secrets::{PodPullSecrets, PullSecrets};

/// A pod's pull secrets, read: their credential scope and how many could not be used.
#[derive(Clone, Debug, Default)]
pub struct PodSecrets {
    /// The identity of the credentials the usable secrets hold, with the namespace (`None`
    /// without usable secrets): answers found with them are cached under it, for pods of the
    /// same namespace holding the same secrets only.
    pub scope: Option<Scope>,
    /// `noe_hook_image_pull_secret_failed_total` increments.
    pub failed_pull_secrets: usize,
    /// The secrets read, for [`CredentialSource::candidates`].
    pub secrets: Option<PodPullSecrets>,
}

/// Where credentials come from (pod pull secrets, credential providers, containerd and docker
/// configuration).
pub trait CredentialSource: Send + Sync + 'static {
    /// The pull secrets of a pod in `namespace` with these `imagePullSecrets` names (not
    /// empty), read; called on every admission of such a pod, before the cache is asked.
    fn pod<'a>(
        &'a self,
        namespace: &'a str,
        pull_secrets: &'a [String],
    ) -> BoxFuture<'a, PodSecrets>;

    /// What the pod may use for `image`, in order (its pull secrets' first, marked
    /// [`CredentialCandidate::in_scope`]); asked only for images the cache could not answer.
    fn candidates<'a>(
        &'a self,
        namespace: &'a str,
        pull_secrets: &'a [String],
        pod: &'a PodSecrets,
        image: &'a str,
    ) -> BoxFuture<'a, Vec<CredentialCandidate>>;
}

/// No credentials: every lookup is anonymous.
#[derive(Clone, Copy, Debug, Default)]
pub struct Anonymous;

impl CredentialSource for Anonymous {
    fn pod<'a>(
        &'a self,
        _namespace: &'a str,
        _pull_secrets: &'a [String],
    ) -> BoxFuture<'a, PodSecrets> {
        Box::pin(async { PodSecrets::default() })
    }

    fn candidates<'a>(
        &'a self,
        _namespace: &'a str,
        _pull_secrets: &'a [String],
        _pod: &'a PodSecrets,
        _image: &'a str,
    ) -> BoxFuture<'a, Vec<CredentialCandidate>> {
        Box::pin(async { Vec::new() })
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

    /// Pod secrets (in scope), then the node-level sources, for `image` as named.
    async fn matched(&self, image: &str, pod: Option<&PodPullSecrets>) -> Vec<CredentialCandidate> {
        let first = pod.map(|p| p as &dyn Source);
        self.sources.credentials(first, Request::new(image)).await
    }
}

impl CredentialSource for Credentials {
    fn pod<'a>(
        &'a self,
        namespace: &'a str,
        pull_secrets: &'a [String],
    ) -> BoxFuture<'a, PodSecrets> {
        Box::pin(async move {
            let Some(api) = &self.pull_secrets else {
                return PodSecrets::default();
            };
            let pod = api.load(namespace, pull_secrets).await;
            for failure in pod.failures() {
                tracing::warn!(
                    secret = %failure.name,
                    reason = failure.reason.as_str(),
                    "Image pull secret not usable"
                );
            }
            PodSecrets {
                scope: pod.scope(),
                failed_pull_secrets: pod.failures().len(),
                secrets: Some(pod),
            }
        })
    }

    fn candidates<'a>(
        &'a self,
        _namespace: &'a str,
        _pull_secrets: &'a [String],
        pod: &'a PodSecrets,
        image: &'a str,
    ) -> BoxFuture<'a, Vec<CredentialCandidate>> {
        Box::pin(self.candidates(image, pod.secrets.as_ref()))
    }
}
