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

use crate::cached_gets::{CachedGets, Failure};
use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::PostParams;
use kube::Api;
use noe_credentials::{
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

/// Service accounts and their tokens through the Kubernetes API, on the one cached GET
/// ([`crate::cached_gets::CachedGets`]).
#[derive(Clone, derive_more::Debug)]
#[debug("ServiceAccountApi {{ accounts: {accounts:?}, tokens: {tokens:?}, .. }}")]
pub struct ServiceAccountApi {
    client: kube::Client,
    /// (namespace, name) → the account, or why it could not be read.
    accounts: CachedGets<(String, String), Arc<ServiceAccountInfo>, String>,
    /// (namespace, name, audience) → a token, or why none was had.
    tokens: CachedGets<(String, String, String), ServiceAccountToken, String>,
}

impl ServiceAccountApi {
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            accounts: CachedGets::new(ACCOUNT_TTL, FAILURE_TTL),
            tokens: CachedGets::new(TOKEN_TTL, FAILURE_TTL),
        }
    }

    /// Lifetimes measured on `clock` (tests move a manual one).
    #[must_use]
    pub fn with_clock(mut self, clock: noe_core::clock::Clock) -> Self {
        self.accounts = self.accounts.with_clock(clock.clone());
        self.tokens = self.tokens.with_clock(clock);
        self
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
            let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
            let fetch = async move {
                match Failure::get(&api, name, TIMEOUT).await {
                    Ok(Some(account)) => Ok(Arc::new(ServiceAccountInfo {
                        uid: account.metadata.uid.unwrap_or_default(),
                        annotations: account.metadata.annotations.unwrap_or_default(),
                    })),
                    Ok(None) => Err("not found".to_owned()),
                    Err(failure) => Err(failure.to_string()),
                }
            };
            let key = (namespace.to_owned(), name.to_owned());
            self.accounts
                .get(key, fetch)
                .await
                .map_err(|missed| error(namespace, name, missed.into_inner()))
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
            let key = (namespace.to_owned(), name.to_owned(), audience.to_owned());
            self.tokens
                .get(key, fetch)
                .await
                .map_err(|missed| error(namespace, name, missed.into_inner()))
        })
    }
}
