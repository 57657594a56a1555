//! A pod's ServiceAccount, for kubelet credential providers that ask for its token (KEP-4412,
//! `--credential-provider-sa-tokens`): the account read with one namespaced GET (RBAC `get
//! serviceaccounts`), its tokens requested from the TokenRequest API (`create
//! serviceaccounts/token`) for the provider's audience, valid 10 minutes (the shortest the API
//! grants). At admission the pod does not exist yet, so the token cannot be bound to it as the
//! kubelet binds it: it is bound to nothing but its audience and expiry.
//!
//! Accounts are cached briefly, a failure to read one more briefly; a token is reused while at
//! least half its life is left. Names that are not valid Kubernetes names never become API
//! paths: the pod spec comes from whoever creates pods.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::PostParams;
use kube::Api;
use noe_registry::credentials::{
    ServiceAccountError, ServiceAccountInfo, ServiceAccountToken, ServiceAccounts,
};

/// How long a token is asked to live: the TokenRequest API's minimum.
pub const TOKEN_SECONDS: i64 = 600;
/// How long a token is reused: half its life.
pub const TOKEN_TTL: Duration = Duration::from_secs(300);
/// How long an account read from the API is reused.
pub const ACCOUNT_TTL: Duration = Duration::from_secs(30);
/// How long a failure (to read an account, or to get a token) is reused.
pub const FAILURE_TTL: Duration = Duration::from_secs(5);
/// Bound on one API call.
pub const TIMEOUT: Duration = Duration::from_secs(3);
/// Accounts, tokens and failures remembered, each.
const MAX_ENTRIES: u64 = 10_000;

/// `(namespace, name, audience)`; the audience is empty for the account itself.
type Key = (String, String, String);

/// Service accounts and their tokens through the Kubernetes API.
#[derive(Clone)]
pub struct ServiceAccountApi {
    client: kube::Client,
    accounts: moka::future::Cache<Key, Arc<ServiceAccountInfo>>,
    tokens: moka::future::Cache<Key, ServiceAccountToken>,
    failed: moka::future::Cache<Key, String>,
}

impl std::fmt::Debug for ServiceAccountApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountApi")
            .field("accounts", &self.accounts.entry_count())
            .field("tokens", &self.tokens.entry_count())
            .finish_non_exhaustive()
    }
}

fn cache<V: Clone + Send + Sync + 'static>(ttl: Duration) -> moka::future::Cache<Key, V> {
    moka::future::Cache::builder()
        .max_capacity(MAX_ENTRIES)
        .time_to_live(ttl)
        .build()
}

impl ServiceAccountApi {
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            accounts: cache(ACCOUNT_TTL),
            tokens: cache(TOKEN_TTL),
            failed: cache(FAILURE_TTL),
        }
    }

    /// `Err` (not asked) for names that are not a DNS-1123 label (namespace) and subdomain
    /// (account).
    fn check(namespace: &str, name: &str) -> Result<(), ServiceAccountError> {
        if crate::facts::is_dns_label(namespace) && crate::facts::is_dns_subdomain(name) {
            Ok(())
        } else {
            Err(error(namespace, name, "not a valid name".into()))
        }
    }

    /// The cached answer for `key`, else `fetch`'s (a failure remembered briefly).
    async fn cached<V, F>(
        &self,
        values: &moka::future::Cache<Key, V>,
        key: Key,
        fetch: F,
    ) -> Result<V, ServiceAccountError>
    where
        V: Clone + Send + Sync + 'static,
        F: std::future::Future<Output = Result<V, String>>,
    {
        let failure = |key: &Key, reason: String| error(&key.0, &key.1, reason);
        if let Some(reason) = self.failed.get(&key).await {
            return Err(failure(&key, reason));
        }
        match values.try_get_with(key.clone(), fetch).await {
            Ok(value) => Ok(value),
            Err(reason) => {
                self.failed.insert(key.clone(), (*reason).clone()).await;
                Err(failure(&key, (*reason).clone()))
            }
        }
    }
}

fn error(namespace: &str, name: &str, reason: String) -> ServiceAccountError {
    ServiceAccountError {
        namespace: namespace.chars().take(63).collect(),
        name: name.chars().take(253).collect(),
        reason,
    }
}

/// One line for a failed API call, never the body of a token.
fn reason(step: &str, result: Result<kube::Error, tokio::time::error::Elapsed>) -> String {
    match result {
        Err(_) => format!("{step}: timed out"),
        Ok(kube::Error::Api(status)) => format!("{step}: HTTP {}", status.code),
        Ok(_) => format!("{step}: API unavailable"),
    }
}

impl ServiceAccounts for ServiceAccountApi {
    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Arc<ServiceAccountInfo>, ServiceAccountError>> {
        Box::pin(async move {
            Self::check(namespace, name)?;
            let key = (namespace.to_owned(), name.to_owned(), String::new());
            let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
            let fetch = async move {
                match tokio::time::timeout(TIMEOUT, api.get(name)).await {
                    Ok(Ok(account)) => Ok(Arc::new(ServiceAccountInfo {
                        uid: account.metadata.uid.unwrap_or_default(),
                        annotations: account.metadata.annotations.unwrap_or_default(),
                    })),
                    Ok(Err(error)) => Err(reason("get", Ok(error))),
                    Err(elapsed) => Err(reason("get", Err(elapsed))),
                }
            };
            self.cached(&self.accounts, key, fetch).await
        })
    }

    fn token<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        audience: &'a str,
    ) -> BoxFuture<'a, Result<ServiceAccountToken, ServiceAccountError>> {
        Box::pin(async move {
            Self::check(namespace, name)?;
            let key = (namespace.to_owned(), name.to_owned(), audience.to_owned());
            let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
            let request = TokenRequest {
                spec: TokenRequestSpec {
                    audiences: vec![audience.to_owned()],
                    expiration_seconds: Some(TOKEN_SECONDS),
                    bound_object_ref: None,
                },
                ..TokenRequest::default()
            };
            let fetch = async move {
                let params = PostParams::default();
                let call = api.create_token_request(name, &params, &request);
                match tokio::time::timeout(TIMEOUT, call).await {
                    Ok(Ok(answer)) => {
                        let Some(status) = answer.status.filter(|s| !s.token.is_empty()) else {
                            return Err("TokenRequest: no token in the answer".to_owned());
                        };
                        let asked =
                            SystemTime::now() + Duration::from_secs(TOKEN_SECONDS.unsigned_abs());
                        let expires = u64::try_from(status.expiration_timestamp.0.timestamp())
                            .ok()
                            .map(|secs| SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
                            .map_or(asked, |granted| granted.min(asked));
                        Ok(ServiceAccountToken {
                            token: status.token,
                            expires,
                        })
                    }
                    Ok(Err(error)) => Err(reason("TokenRequest", Ok(error))),
                    Err(elapsed) => Err(reason("TokenRequest", Err(elapsed))),
                }
            };
            self.cached(&self.tokens, key, fetch).await
        })
    }
}
