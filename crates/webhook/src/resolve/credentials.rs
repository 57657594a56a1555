//! Which credentials a pod's images may use: its pull secrets first (when the Kubernetes API is
//! reachable), then the node-level sources (credential provider plugins, containerd and docker
//! configuration), matched for the reference actually contacted (after `--registry-proxies`),
//! and for each containerd mirror, those of the mirror's own host: both read from the image as
//! the lookup routed it ([`Routed`]), never routed again here.

use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use noe_credentials::CredentialCandidate;
use noe_credentials::{PodIdentity, Request, ServiceAccounts, Source, Sources};
use noe_registry::cache::Scope;
use noe_registry::Routed;

use super::pull_secrets::{PodPullSecrets, PullSecrets};

/// What a pod's images may be resolved with besides the node's credentials.
#[derive(Clone, Copy, Debug, Default)]
pub struct PodAccess<'a> {
    /// `spec.imagePullSecrets[].name`.
    pub pull_secrets: &'a [String],
    /// `spec.serviceAccountName`, for credential providers that ask for its token
    /// (`--credential-provider-sa-tokens`).
    pub service_account: Option<&'a str>,
}

/// A pod's pull secrets, read: their credential scope and how many could not be used.
#[derive(Clone, Debug, Default)]
pub struct PodSecrets {
    /// The identity of the credentials the usable secrets hold, with the namespace, and the
    /// service account when its token may be used (`None` without either): answers found with
    /// them are cached under it, for pods of the same namespace holding the same secrets (and
    /// running as the same account) only.
    pub scope: Option<Scope>,
    /// `noe_hook_image_pull_secret_failed_total` increments.
    pub failed_pull_secrets: usize,
    /// The secrets read, for [`CredentialSource::candidates`].
    pub secrets: Option<PodPullSecrets>,
    /// The pod's service account, when credential providers may get its token.
    pub service_account: Option<String>,
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

    /// [`CredentialSource::pod`] for a pod with this `access` (its service account too);
    /// called when it names pull secrets, or a service account and
    /// [`CredentialSource::uses_service_accounts`].
    fn pod_as<'a>(
        &'a self,
        namespace: &'a str,
        access: PodAccess<'a>,
    ) -> BoxFuture<'a, PodSecrets> {
        self.pod(namespace, access.pull_secrets)
    }

    /// Whether a pod's service account changes its credentials (`--credential-provider-sa-tokens`
    /// with the Kubernetes API reachable).
    fn uses_service_accounts(&self) -> bool {
        false
    }

    /// What the pod may use for the image `routed`, in order (its pull secrets' first, marked
    /// [`CredentialCandidate::in_scope`]); asked only for images the cache could not answer.
    fn candidates<'a>(
        &'a self,
        namespace: &'a str,
        pull_secrets: &'a [String],
        pod: &'a PodSecrets,
        routed: &'a Routed,
    ) -> BoxFuture<'a, Vec<CredentialCandidate>>;
}

/// A pod's credentials as a lookup asks for them: once it has routed the image, for that route.
/// It keeps the route's bounded `registry` label, so a lookup the deadline cuts short is
/// labelled without parsing the image again.
pub struct PodCredentials<'a> {
    source: &'a dyn CredentialSource,
    namespace: &'a str,
    pull_secrets: &'a [String],
    pod: &'a PodSecrets,
    registry: OnceLock<String>,
}

impl<'a> PodCredentials<'a> {
    /// The credentials `source` gives a pod of `namespace` with these `imagePullSecrets` names,
    /// read as `pod`.
    pub fn new(
        source: &'a dyn CredentialSource,
        namespace: &'a str,
        pull_secrets: &'a [String],
        pod: &'a PodSecrets,
    ) -> Self {
        Self {
            source,
            namespace,
            pull_secrets,
            pod,
            registry: OnceLock::new(),
        }
    }

    /// The candidates for the image `routed`, in order; `registry` is the bounded `registry`
    /// label of the host it routes to.
    pub async fn candidates(&self, routed: &Routed, registry: String) -> Vec<CredentialCandidate> {
        let _ = self.registry.set(registry);
        self.source
            .candidates(self.namespace, self.pull_secrets, self.pod, routed)
            .await
    }

    /// The `registry` label given with the route, once a lookup got that far.
    pub fn registry(&self) -> Option<&str> {
        self.registry.get().map(String::as_str)
    }
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
        _routed: &'a Routed,
    ) -> BoxFuture<'a, Vec<CredentialCandidate>> {
        Box::pin(async { Vec::new() })
    }
}

/// The server's credentials: the pod's pull secrets first (when the API is reachable), then the
/// node-level sources (plugins, containerd, docker config), for the reference actually contacted
/// (after `--registry-proxies`), and for each containerd mirror, those of the mirror's host.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub sources: Arc<Sources>,
    pub pull_secrets: Option<PullSecrets>,
}

impl Credentials {
    /// The candidates for one routed image, pod secrets first, matched for the reference
    /// actually contacted (after proxies); then, for each containerd mirror of its registry,
    /// the candidates matched for the mirror's own host, marked for that mirror only.
    pub async fn candidates(
        &self,
        routed: &Routed,
        pod: Option<&PodPullSecrets>,
    ) -> Vec<CredentialCandidate> {
        self.candidates_for(routed, pod, None).await
    }

    /// [`Credentials::candidates`] for a pod of `namespace` running as `service_account`
    /// (credential providers with `tokenAttributes` get its token).
    pub async fn candidates_as(
        &self,
        routed: &Routed,
        pod: Option<&PodPullSecrets>,
        namespace: &str,
        service_account: Option<&str>,
    ) -> Vec<CredentialCandidate> {
        let accounts = self
            .pull_secrets
            .as_ref()
            .and_then(PullSecrets::service_accounts);
        let identity = accounts.map(|accounts| PodIdentity {
            namespace,
            service_account,
            accounts: accounts as &dyn ServiceAccounts,
        });
        self.candidates_for(routed, pod, identity).await
    }

    async fn candidates_for(
        &self,
        routed: &Routed,
        pod: Option<&PodPullSecrets>,
        identity: Option<PodIdentity<'_>>,
    ) -> Vec<CredentialCandidate> {
        let target = routed.target_name();
        let mut out = self.matched(target, pod, identity).await;
        let mut done: Vec<String> = Vec::new();
        for endpoint in routed.endpoints().into_iter().filter(|e| e.mirror) {
            let host = endpoint.host();
            if done.contains(&host) {
                continue;
            }
            let at_mirror = endpoint.credential_image(target);
            let matched = self.matched(&at_mirror, pod, identity).await;
            out.extend(matched.into_iter().map(|c| c.for_mirror(host.clone())));
            done.push(host);
        }
        out
    }

    /// Pod secrets (in scope), then the node-level sources, for `image` as named.
    async fn matched(
        &self,
        image: &str,
        pod: Option<&PodPullSecrets>,
        identity: Option<PodIdentity<'_>>,
    ) -> Vec<CredentialCandidate> {
        let first = pod.map(|p| p as &dyn Source);
        self.sources
            .credentials(first, Request::for_pod(image, identity))
            .await
    }
}

impl CredentialSource for Credentials {
    fn pod<'a>(
        &'a self,
        namespace: &'a str,
        pull_secrets: &'a [String],
    ) -> BoxFuture<'a, PodSecrets> {
        let access = PodAccess {
            pull_secrets,
            service_account: None,
        };
        self.pod_as(namespace, access)
    }

    fn uses_service_accounts(&self) -> bool {
        self.pull_secrets
            .as_ref()
            .and_then(PullSecrets::service_accounts)
            .is_some()
    }

    fn pod_as<'a>(
        &'a self,
        namespace: &'a str,
        access: PodAccess<'a>,
    ) -> BoxFuture<'a, PodSecrets> {
        Box::pin(async move {
            let Some(api) = &self.pull_secrets else {
                return PodSecrets::default();
            };
            let service_account = access
                .service_account
                .filter(|_| api.service_accounts().is_some())
                .map(str::to_owned);
            if access.pull_secrets.is_empty() {
                // Only the account: answers found with its token are for its pods only.
                return PodSecrets {
                    scope: service_account
                        .as_deref()
                        .map(|account| Scope::of(&(namespace, account))),
                    service_account,
                    ..PodSecrets::default()
                };
            }
            let pod = api.load(namespace, access.pull_secrets).await;
            for failure in pod.failures() {
                tracing::warn!(
                    secret = %failure.name,
                    reason = failure.reason.as_str(),
                    "Image pull secret not usable"
                );
            }
            let scope = match (&service_account, pod.scope()) {
                (Some(account), secrets) => Some(Scope::of(&(namespace, account, secrets))),
                (None, secrets) => secrets,
            };
            PodSecrets {
                scope,
                failed_pull_secrets: pod.failures().len(),
                secrets: Some(pod),
                service_account,
            }
        })
    }

    fn candidates<'a>(
        &'a self,
        namespace: &'a str,
        _pull_secrets: &'a [String],
        pod: &'a PodSecrets,
        routed: &'a Routed,
    ) -> BoxFuture<'a, Vec<CredentialCandidate>> {
        Box::pin(self.candidates_as(
            routed,
            pod.secrets.as_ref(),
            namespace,
            pod.service_account.as_deref(),
        ))
    }
}
