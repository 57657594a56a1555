//! The one question every credential source answers: which registry hosts it serves, and what
//! credentials it holds for an image.
//!
//! Each source — docker config files, containerd configuration, kubelet credential provider
//! plugins, the cloud workload identity, a pod's pull secrets — implements [`Source`]. The chain
//! ([`crate::Sources`], then the webhook's pod secrets in front) asks each in order and hands the
//! registry resolver one ordered list of [`CredentialCandidate`]s, each saying where it came from,
//! until when it is good ([`CredentialCandidate::expires`]) and for whom ([`CredentialCandidate::scoped`],
//! [`CredentialCandidate::mirror`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::SystemTime;

use futures::future::BoxFuture;

use crate::CredentialCandidate;

/// What a source is asked for.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Request<'a> {
    /// The normalized reference as contacted (after proxies), e.g.
    /// `docker.io/library/nginx:latest`, or as named at a mirror's host.
    pub image: &'a str,
    /// The pod the image is resolved for, when its identity may be used
    /// (`--credential-provider-sa-tokens`); `None`: the webhook's own behalf.
    pub pod: Option<PodIdentity<'a>>,
}

impl<'a> Request<'a> {
    /// A request for `image` on the webhook's own behalf (no pod identity).
    pub fn new(image: &'a str) -> Self {
        Self { image, pod: None }
    }

    /// A request for `image` on behalf of `pod` (its service account, for plugins that ask
    /// for its token).
    pub fn for_pod(image: &'a str, pod: Option<PodIdentity<'a>>) -> Self {
        Self { image, pod }
    }

    /// The registry host of the image (`docker.io`, `127.0.0.1:5000`).
    pub fn host(&self) -> &'a str {
        crate::matching::image_host(self.image)
    }
}

/// A place credentials come from.
pub trait Source: Send + Sync + std::fmt::Debug {
    /// What kind of source this is, for logs: `cloud`, `credential-provider`, `containerd`,
    /// `docker-config`, `pull-secret`.
    fn kind(&self) -> &'static str;

    /// Whether this source may hold credentials for registry `host` (no I/O): a cloud provider
    /// serves its own registries only, a plugin the hosts of its `matchImages`. `true` when the
    /// answer needs the source's files (they are asked in [`Source::credentials`]).
    fn serves(&self, host: &str) -> bool {
        let _ = host;
        true
    }

    /// The registry hosts (globs kept as written) the user's configuration of this source names,
    /// from its last good load: bounded `registry` metric label values. A source whose hosts are
    /// a cloud provider's wildcard names none (those hosts are labelled by the provider's suffix).
    fn configured_hosts(&self) -> BoxFuture<'_, Vec<String>> {
        Box::pin(async { Vec::new() })
    }

    /// The credentials for `request.image`, in the order to try them; empty when this source
    /// has none. Failures are logged by the source and give no credential: the other sources
    /// still count.
    fn credentials<'a>(&'a self, request: Request<'a>) -> BoxFuture<'a, Vec<CredentialCandidate>>;
}

/// A source whose credentials are files on the node (docker config, containerd): its kind, the
/// hosts its files name, and the credentials they hold for an image; its [`Source`] follows.
pub trait FileSource: Send + Sync + std::fmt::Debug {
    /// [`Source::kind`].
    const KIND: &'static str;

    /// [`Source::configured_hosts`], from the last good load, in any order (its [`Source`]
    /// sorts them and drops repeats).
    fn configured_hosts(&self) -> impl Future<Output = Vec<String>> + Send;

    /// The credentials for `image`, in the order to try them (a pod's identity is not used).
    fn candidates(&self, image: &str) -> impl Future<Output = Vec<CredentialCandidate>> + Send;
}

impl<T: FileSource> Source for T {
    fn kind(&self) -> &'static str {
        T::KIND
    }

    fn configured_hosts(&self) -> BoxFuture<'_, Vec<String>> {
        Box::pin(async {
            let mut hosts = FileSource::configured_hosts(self).await;
            hosts.sort();
            hosts.dedup();
            hosts
        })
    }

    fn credentials<'a>(&'a self, request: Request<'a>) -> BoxFuture<'a, Vec<CredentialCandidate>> {
        Box::pin(self.candidates(request.image))
    }
}

/// The identity of the pod an image is resolved for (KEP-4412): its namespace and service
/// account, and the API that reads the account and requests its tokens.
#[derive(Clone, Copy, Debug)]
pub struct PodIdentity<'a> {
    pub namespace: &'a str,
    /// `spec.serviceAccountName`; `None`: the pod runs without one.
    pub service_account: Option<&'a str>,
    pub accounts: &'a dyn ServiceAccounts,
}

/// What a plugin with `tokenAttributes` is told of a service account.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceAccountInfo {
    /// `metadata.uid` (part of a `cacheType: ServiceAccount` cache key).
    pub uid: String,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
}

/// A service account token for one audience. `Debug` never prints it.
#[derive(Clone, PartialEq, Eq, derive_more::Debug)]
pub struct ServiceAccountToken {
    #[debug("{:?}", "<redacted>")]
    pub token: String,
    /// `status.expirationTimestamp`.
    pub expires: SystemTime,
}

/// Why a service account or its token could not be had. Never carries a token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("service account {namespace}/{name}: {reason}")]
pub struct ServiceAccountError {
    pub namespace: String,
    pub name: String,
    /// One line: `not found`, `forbidden`, `TokenRequest: HTTP 403`, `timed out`, ...
    pub reason: String,
}

/// Reads a pod's service account and requests its tokens (the webhook's Kubernetes client:
/// `get serviceaccounts`, `create serviceaccounts/token`), each answer cached briefly.
pub trait ServiceAccounts: Send + Sync + std::fmt::Debug {
    /// The service account `namespace/name`.
    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Arc<ServiceAccountInfo>, ServiceAccountError>>;

    /// A token of `namespace/name` for `audience`, short-lived.
    fn token<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        audience: &'a str,
    ) -> BoxFuture<'a, Result<ServiceAccountToken, ServiceAccountError>>;
}
