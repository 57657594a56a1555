//! A pod's `imagePullSecrets`, read with one namespaced GET per secret (RBAC `get` only, never a
//! cluster-wide informer), cached briefly, turned into credential candidates.
//!
//! A secret that is missing, forbidden, of another type or malformed is reported in
//! [`PodPullSecrets::failures`] (the caller counts it in
//! `noe_hook_image_pull_secret_failed_total{namespace}`), logged without its content, and
//! skipped: the next credential source is tried.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use noe_credentials::docker_config::{parse_docker_config, DockerConfig};
use noe_credentials::CredentialCandidate;
use noe_registry::cache::Scope;

use crate::cached_gets::{CachedGets, Failure, Missed};

/// How long a secret read from the API is reused.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// How long a failure to read a secret is reused (so a missing secret does not cost one API
/// call per admission).
pub const DEFAULT_FAILURE_TTL: Duration = Duration::from_secs(5);
/// Bound on one GET.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);

const DOCKER_CONFIG_JSON_TYPE: &str = "kubernetes.io/dockerconfigjson";
const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
const DOCKERCFG_TYPE: &str = "kubernetes.io/dockercfg";
const DOCKERCFG_KEY: &str = ".dockercfg";

/// Why a pull secret gave no credentials.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum FailureReason {
    #[error("not found")]
    NotFound,
    #[error("forbidden")]
    Forbidden,
    #[error("not of type kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg")]
    WrongType,
    #[error("not a valid secret name, or its docker config is missing or malformed")]
    Malformed,
    #[error("the Kubernetes API did not answer")]
    Unavailable,
}

impl FailureReason {
    /// A short, bounded label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotFound => "not_found",
            Self::Forbidden => "forbidden",
            Self::WrongType => "wrong_type",
            Self::Malformed => "malformed",
            Self::Unavailable => "unavailable",
        }
    }
}

/// One pull secret that could not be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullSecretFailure {
    pub namespace: String,
    pub name: String,
    pub reason: FailureReason,
}

/// A pull secret read, with an identity of its contents (a keyed hash: no secret in it).
#[derive(Debug)]
pub struct LoadedSecret {
    pub config: DockerConfig,
    pub contents: Scope,
}

impl LoadedSecret {
    pub fn new(config: DockerConfig, bytes: &[u8]) -> Self {
        Self {
            config,
            contents: Scope::of(bytes),
        }
    }
}

/// The pull secrets of one pod, loaded.
#[derive(Clone, Debug, Default)]
pub struct PodPullSecrets {
    /// The namespace they were read in.
    namespace: String,
    /// `(source name, secret)` in the pod's order.
    secrets: Vec<(String, Arc<LoadedSecret>)>,
    failures: Vec<PullSecretFailure>,
}

impl PodPullSecrets {
    /// The candidates for `image` from every usable secret, in the pod's order (within a secret,
    /// most specific key first). Each is named `pull-secret:NAMESPACE/NAME`.
    pub fn candidates(&self, image: &str) -> Vec<CredentialCandidate> {
        let mut out: Vec<CredentialCandidate> = Vec::new();
        for (source, secret) in &self.secrets {
            for candidate in secret.config.auth_candidates(image, source) {
                if !out.iter().any(|c| c.credential == candidate.credential) {
                    out.push(candidate);
                }
            }
        }
        out
    }

    /// The secrets that could not be used.
    pub fn failures(&self) -> &[PullSecretFailure] {
        &self.failures
    }

    /// Sources of the usable secrets (`pull-secret:ns/name`), in order.
    pub fn sources(&self) -> impl Iterator<Item = &str> {
        self.secrets.iter().map(|(s, _)| s.as_str())
    }

    /// The credential scope of these secrets: the namespace, and each usable secret's name and
    /// contents, in order (`None` when none is usable). Another namespace, another secret, or
    /// the same secret changed is another scope, so what one scope found with its credentials
    /// is never served to another without asking the registry.
    pub fn scope(&self) -> Option<Scope> {
        if self.secrets.is_empty() {
            return None;
        }
        let identity: Vec<(&str, Scope)> = self
            .secrets
            .iter()
            .map(|(source, secret)| (source.as_str(), secret.contents))
            .collect();
        Some(Scope::of(&(self.namespace.as_str(), identity)))
    }
}

/// A pod's pull secrets are the first credential source of its images; what they find is
/// cached under the pod's scope ([`CredentialCandidate::in_scope`]).
impl noe_credentials::Source for PodPullSecrets {
    fn kind(&self) -> &'static str {
        "pull-secret"
    }

    fn credentials<'a>(
        &'a self,
        request: noe_credentials::Request<'a>,
    ) -> futures::future::BoxFuture<'a, Vec<CredentialCandidate>> {
        let found = self.candidates(request.image);
        Box::pin(async move {
            found
                .into_iter()
                .map(CredentialCandidate::in_scope)
                .collect()
        })
    }
}

/// Reads pull secrets through the Kubernetes API.
///
/// With [`PullSecrets::with_service_account_tokens`] it also reads the pods' service accounts
/// and requests their tokens, for the credential providers that ask for them.
#[derive(Clone, derive_more::Debug)]
#[debug("PullSecrets {{ cache: {cache:?}, timeout: {timeout:?}, .. }}")]
pub struct PullSecrets {
    client: kube::Client,
    /// (namespace, name) → the secret's credentials, or why it gave none.
    cache: CachedGets<(String, String), Arc<LoadedSecret>, FailureReason>,
    timeout: Duration,
    service_accounts: Option<super::service_accounts::ServiceAccountApi>,
}

impl PullSecrets {
    /// With the default cache lifetimes and timeout.
    pub fn new(client: kube::Client) -> Self {
        Self::with_limits(client, DEFAULT_TTL, DEFAULT_FAILURE_TTL, DEFAULT_TIMEOUT)
    }

    pub fn with_limits(
        client: kube::Client,
        ttl: Duration,
        failure_ttl: Duration,
        timeout: Duration,
    ) -> Self {
        Self {
            client,
            cache: CachedGets::new(ttl, failure_ttl),
            timeout,
            service_accounts: None,
        }
    }

    /// The same, also reading pods' service accounts and requesting their tokens
    /// (`--credential-provider-sa-tokens`).
    #[must_use]
    pub fn with_service_account_tokens(mut self) -> Self {
        self.service_accounts = Some(super::service_accounts::ServiceAccountApi::new(
            self.client.clone(),
        ));
        self
    }

    /// The service account API, when service account tokens are enabled.
    pub fn service_accounts(&self) -> Option<&super::service_accounts::ServiceAccountApi> {
        self.service_accounts.as_ref()
    }

    /// Lifetimes measured on `clock` (tests move a manual one).
    pub fn with_clock(mut self, clock: noe_core::clock::Clock) -> Self {
        self.cache = self.cache.with_clock(clock);
        self
    }

    /// Load the pod's pull secrets (`spec.imagePullSecrets[].name`) from `namespace`. Empty and
    /// repeated names are ignored. Never fails: unusable secrets are in the result's failures.
    /// A name that is not a DNS-1123 subdomain (or a namespace that is not a DNS-1123 label) is
    /// malformed and never becomes an API path: the pod spec and the review's namespace come
    /// from whoever creates pods, and the webhook may `get` secrets in every namespace.
    pub async fn load(&self, namespace: &str, names: &[String]) -> PodPullSecrets {
        let mut unique: Vec<&str> = Vec::with_capacity(names.len());
        for name in names {
            if !name.is_empty() && !unique.contains(&name.as_str()) {
                unique.push(name);
            }
        }
        let namespace_valid = crate::facts::is_dns_label(namespace);
        let loads = unique.iter().map(|name| async move {
            if namespace_valid && crate::facts::is_dns_subdomain(name) {
                self.get(namespace, name).await
            } else {
                Err(FailureReason::Malformed)
            }
        });
        let results = futures::future::join_all(loads).await;
        let mut pod = PodPullSecrets {
            namespace: namespace.to_owned(),
            ..PodPullSecrets::default()
        };
        for (name, result) in unique.into_iter().zip(results) {
            match result {
                Ok(config) => pod
                    .secrets
                    .push((format!("pull-secret:{namespace}/{name}"), config)),
                Err(reason) => {
                    tracing::warn!(
                        namespace,
                        secret = name,
                        reason = reason.as_str(),
                        "image pull secret unusable, trying the next credential source"
                    );
                    pod.failures.push(PullSecretFailure {
                        namespace: namespace.to_owned(),
                        name: name.to_owned(),
                        reason,
                    });
                }
            }
        }
        pod
    }

    /// One secret, through the cache: a failure, new or remembered, is returned each time.
    async fn get(&self, namespace: &str, name: &str) -> Result<Arc<LoadedSecret>, FailureReason> {
        let key = (namespace.to_owned(), name.to_owned());
        self.cache
            .get(key, self.fetch(namespace, name))
            .await
            .map_err(Missed::into_inner)
    }

    async fn fetch(&self, namespace: &str, name: &str) -> Result<Arc<LoadedSecret>, FailureReason> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let secret = match Failure::get(&api, name, self.timeout).await {
            Ok(Some(secret)) => secret,
            Ok(None) => return Err(FailureReason::NotFound),
            Err(Failure::Forbidden) => return Err(FailureReason::Forbidden),
            Err(_) => return Err(FailureReason::Unavailable),
        };
        parse_secret(&secret).map(Arc::new)
    }
}

/// The names in a raw pod spec's `imagePullSecrets` (`[{"name": ...}]`), in order; entries
/// without a name are ignored.
pub fn image_pull_secret_names(pod_spec: &serde_json::Value) -> Vec<String> {
    pod_spec
        .get("imagePullSecrets")
        .and_then(serde_json::Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|entry| entry.get("name").and_then(serde_json::Value::as_str))
                .filter(|name| !name.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The docker config of a pull secret (`kubernetes.io/dockerconfigjson` or legacy
/// `kubernetes.io/dockercfg`), with the identity of its contents.
pub fn parse_secret(secret: &Secret) -> Result<LoadedSecret, FailureReason> {
    let key = match secret.type_.as_deref() {
        Some(DOCKER_CONFIG_JSON_TYPE) => DOCKER_CONFIG_JSON_KEY,
        Some(DOCKERCFG_TYPE) => DOCKERCFG_KEY,
        _ => return Err(FailureReason::WrongType),
    };
    let bytes = secret
        .data
        .as_ref()
        .and_then(|data| data.get(key))
        .map(|b| b.0.as_slice())
        .ok_or(FailureReason::Malformed)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(FailureReason::Malformed);
    }
    let config = parse_docker_config(bytes).map_err(|_| FailureReason::Malformed)?;
    Ok(LoadedSecret::new(config, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_raw_pod_specs() {
        let cases = [
            (
                serde_json::json!({"imagePullSecrets": [{"name": "a"}, {"name": ""}, {}, {"name": "b"}]}),
                vec!["a", "b"],
            ),
            (serde_json::json!({"imagePullSecrets": null}), vec![]),
            (serde_json::json!({"imagePullSecrets": "x"}), vec![]),
            (serde_json::json!({"containers": []}), vec![]),
        ];
        for (spec, expected) in cases {
            assert_eq!(image_pull_secret_names(&spec), expected, "{spec}");
        }
    }
}
