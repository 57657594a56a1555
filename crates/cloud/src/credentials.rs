//! The providers put together: one value the credential chain asks for a registry host.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::acr::{self, AzureIdentity};
use crate::aws::{AwsCredentials, AwsIdentity};
use noe_core::clock::Clock;

use crate::cache::Cache;
use crate::ecr::{self, EcrToken};
use crate::gcp;
use crate::hosts::{match_host, Target};
use crate::metrics::Metrics;
use crate::{Env, Error, Provider, Step};

/// How long one request to an identity service may take, connection to last byte.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// What the cloud credentials are built from.
#[derive(Clone, Debug)]
pub struct Config {
    /// The enabled providers (`--cloud-credentials`).
    pub providers: Vec<Provider>,
    /// The identity variables (normally [`Env::from_process`]).
    pub env: Env,
    /// The bound on each request.
    pub timeout: Duration,
    /// The clock token expiry is measured with (its wall reading: expiries are absolute).
    pub clock: Clock,
}

impl Config {
    /// `providers` on the process environment and the system clock.
    pub fn new(providers: Vec<Provider>) -> Self {
        Self {
            providers,
            env: Env::from_process(),
            timeout: DEFAULT_TIMEOUT,
            clock: Clock::system(),
        }
    }
}

/// The HTTP client for the identity services: `roots` for TLS (`None`: webpki's and the
/// system's), no redirects (a token request answered with a redirect is an error, never
/// followed with its secrets).
pub fn http_client(roots: Option<Arc<rustls::RootCertStore>>) -> Result<reqwest::Client, Error> {
    let roots = roots.unwrap_or_else(|| {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        for cert in rustls_native_certs::load_native_certs().certs {
            // A broken system certificate must not prevent start-up; the others still count.
            let _ = roots.add(cert);
        }
        Arc::new(roots)
    });
    let fail = |reason: String| Error::NotConfigured {
        provider: Provider::Ecr,
        reason: format!("HTTP client: {reason}"),
    };
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| fail(e.to_string()))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(DEFAULT_TIMEOUT)
        .build()
        .map_err(|e| fail(e.to_string()))
}

/// A username and password for one registry host, from its cloud provider. `Debug` never prints
/// the password.
#[derive(Clone, PartialEq, Eq)]
pub struct CloudCredential {
    pub provider: Provider,
    pub username: String,
    password: String,
    /// The identity and the steps that got the token, secret-free
    /// (`IRSA role arn:..., AssumeRoleWithWebIdentity, GetAuthorizationToken`).
    pub via: String,
    /// When the cached token is refreshed (shortly before it expires).
    pub refresh_at: SystemTime,
}

impl CloudCredential {
    /// The password (a short-lived token).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The credential's source as the credential chain names it and `noe inspect` prints it:
    /// the provider, the identity and the steps
    /// (`cloud:ecr via IRSA role arn:aws:iam::1:role/noe, AssumeRoleWithWebIdentity, GetAuthorizationToken`).
    pub fn source(&self) -> String {
        format!("cloud:{} via {}", self.provider, self.via)
    }
}

impl fmt::Debug for CloudCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CloudCredential")
            .field("provider", &self.provider)
            .field("username", &self.username)
            .field("via", &self.via)
            .field("password", &"<redacted>")
            .field("refresh_at", &self.refresh_at)
            .finish()
    }
}

struct Ecr {
    identity: AwsIdentity,
    endpoint: Option<String>,
    aws: Cache<AwsCredentials>,
    tokens: Cache<EcrToken>,
}

struct Gcp {
    url: String,
    tokens: Cache<String>,
}

struct Acr {
    identity: AzureIdentity,
    entra: Cache<String>,
    tokens: Cache<String>,
}

struct Inner {
    client: reqwest::Client,
    timeout: Duration,
    metrics: Metrics,
    ecr: Option<Ecr>,
    gcp: Option<Gcp>,
    acr: Option<Acr>,
}

impl Inner {
    /// What every request to an identity service is sent with: the client, the timeout, the
    /// metrics.
    fn http(&self) -> (&reqwest::Client, Duration, &Metrics) {
        (&self.client, self.timeout, &self.metrics)
    }
}

/// The enabled cloud providers, their identities and token caches. Cheap to clone.
#[derive(Clone, derive_more::Debug)]
#[debug("CloudCredentials {{ providers: {:?}, .. }}", self.providers())]
pub struct CloudCredentials {
    inner: Arc<Inner>,
}

impl CloudCredentials {
    /// The enabled providers with the identity the environment gives each. Fails when an
    /// enabled provider has no identity (ECR without IRSA or Pod Identity, ACR without workload
    /// identity): a flag that cannot work is a configuration error, not a silent no-op.
    pub fn new(config: Config, client: reqwest::Client, metrics: Metrics) -> Result<Self, Error> {
        let Config {
            providers,
            env,
            timeout,
            clock,
        } = config;
        let mut inner = Inner {
            client,
            timeout,
            metrics: metrics.clone(),
            ecr: None,
            gcp: None,
            acr: None,
        };
        for provider in providers {
            match provider {
                Provider::Ecr => {
                    inner.ecr = Some(Ecr {
                        identity: AwsIdentity::from_env(&env)?,
                        endpoint: env.get("AWS_ENDPOINT_URL_ECR").map(str::to_owned),
                        aws: Cache::new(provider, clock.clone(), metrics.clone()),
                        tokens: Cache::new(provider, clock.clone(), metrics.clone()),
                    });
                }
                Provider::Gcp => {
                    inner.gcp = Some(Gcp {
                        url: gcp::token_url(&env)?,
                        tokens: Cache::new(provider, clock.clone(), metrics.clone()),
                    });
                }
                Provider::Acr => {
                    inner.acr = Some(Acr {
                        identity: AzureIdentity::from_env(&env)?,
                        entra: Cache::new(provider, clock.clone(), metrics.clone()),
                        tokens: Cache::new(provider, clock.clone(), metrics.clone()),
                    });
                }
            }
        }
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// The enabled providers.
    pub fn providers(&self) -> Vec<Provider> {
        let Inner { ecr, gcp, acr, .. } = &*self.inner;
        [
            ecr.as_ref().map(|_| Provider::Ecr),
            gcp.as_ref().map(|_| Provider::Gcp),
            acr.as_ref().map(|_| Provider::Acr),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// A secret-free line per enabled provider saying which identity it uses (for `inspect`).
    pub fn describe(&self) -> Vec<String> {
        let Inner { ecr, gcp, acr, .. } = &*self.inner;
        let mut lines = Vec::new();
        if let Some(ecr) = ecr {
            lines.push(format!("ecr: {}", ecr.identity.describe()));
        }
        if let Some(gcp) = gcp {
            lines.push(format!("gcp: metadata server {}", gcp.url));
        }
        if let Some(acr) = acr {
            lines.push(format!(
                "acr: workload identity client {} in tenant {}",
                acr.identity.client_id, acr.identity.tenant_id
            ));
        }
        lines
    }

    /// The enabled provider owning registry `host`, if any (no request).
    pub fn provider_for(&self, host: &str) -> Option<Provider> {
        let provider = match_host(host)?.provider();
        self.providers().contains(&provider).then_some(provider)
    }

    /// The credential for registry `host` (`host` without scheme or path), from the enabled
    /// provider owning it; `None` when no enabled provider owns it, so nothing is asked and no
    /// credential of one cloud ever goes to another's host.
    pub async fn credential_for(&self, host: &str) -> Option<Result<CloudCredential, Error>> {
        self.credential_unless(host, None).await
    }

    /// A fresh credential for registry `host` after the registry refused the one whose password
    /// is `refused`: the cached token is dropped if it is still that one and fetched again (one
    /// refresh in flight; callers refused the same token meanwhile share it). `None` as for
    /// [`CloudCredentials::credential_for`].
    pub async fn renew(&self, host: &str, refused: &str) -> Option<Result<CloudCredential, Error>> {
        self.credential_unless(host, Some(refused)).await
    }

    async fn credential_unless(
        &self,
        host: &str,
        refused: Option<&str>,
    ) -> Option<Result<CloudCredential, Error>> {
        let target = match_host(host)?;
        let inner = &*self.inner;
        match target {
            Target::Ecr { region, endpoint } => {
                let ecr = inner.ecr.as_ref()?;
                Some(self.ecr(ecr, &region, endpoint, refused).await)
            }
            Target::Gcp => {
                let gcp = inner.gcp.as_ref()?;
                Some(self.gcp(gcp, refused).await)
            }
            Target::Acr { cloud } => {
                let acr = inner.acr.as_ref()?;
                Some(self.acr(acr, host, cloud.scope(), refused).await)
            }
        }
    }

    async fn ecr(
        &self,
        ecr: &Ecr,
        region: &str,
        endpoint: crate::hosts::EcrEndpoint,
        refused: Option<&str>,
    ) -> Result<CloudCredential, Error> {
        let (client, timeout, metrics) = self.inner.http();
        let url = ecr
            .endpoint
            .clone()
            .unwrap_or_else(|| endpoint.api_url(region));
        let (token, refresh_at) = ecr
            .tokens
            .get_or_renew(
                &url,
                |token| Some(token.password.as_str()) == refused,
                || async {
                    let aws_key = ecr.identity.cache_key(region);
                    let credentials = ecr
                        .aws
                        .get_or_fetch(&aws_key, || {
                            ecr.identity
                                .fetch(client, timeout, metrics, ecr.aws.now(), region)
                        })
                        .await?;
                    let token = ecr::authorization_token(
                        client,
                        timeout,
                        metrics,
                        &url,
                        region,
                        &credentials,
                        ecr.tokens.now(),
                    )
                    .await?;
                    let expires_at = token.expires_at;
                    Ok((token, expires_at))
                },
            )
            .await?;
        Ok(CloudCredential {
            provider: Provider::Ecr,
            username: token.username,
            password: token.password,
            via: format!("{}, {}", ecr.identity.steps(), Step::GetAuthorizationToken),
            refresh_at,
        })
    }

    async fn gcp(&self, gcp: &Gcp, refused: Option<&str>) -> Result<CloudCredential, Error> {
        let (client, timeout, metrics) = self.inner.http();
        let (token, refresh_at) = gcp
            .tokens
            .get_or_renew(
                "metadata",
                |token| Some(token.as_str()) == refused,
                || gcp::access_token(client, timeout, metrics, &gcp.url, gcp.tokens.now()),
            )
            .await?;
        Ok(CloudCredential {
            provider: Provider::Gcp,
            username: gcp::USERNAME.to_owned(),
            password: token,
            via: format!("the pod's service account, {}", Step::MetadataToken),
            refresh_at,
        })
    }

    async fn acr(
        &self,
        acr: &Acr,
        host: &str,
        scope: &str,
        refused: Option<&str>,
    ) -> Result<CloudCredential, Error> {
        let (client, timeout, metrics) = self.inner.http();
        let (refresh_token, refresh_at) = acr
            .tokens
            .get_or_renew(
                host,
                |token| Some(token.as_str()) == refused,
                || async {
                    let access_token = acr
                        .entra
                        .get_or_fetch(scope, || {
                            acr.identity.entra_token(
                                client,
                                timeout,
                                metrics,
                                scope,
                                acr.entra.now(),
                            )
                        })
                        .await?;
                    acr.identity
                        .exchange(
                            client,
                            timeout,
                            metrics,
                            host,
                            &access_token,
                            acr.tokens.now(),
                        )
                        .await
                },
            )
            .await?;
        Ok(CloudCredential {
            provider: Provider::Acr,
            username: acr::USERNAME.to_owned(),
            password: refresh_token,
            via: format!(
                "workload identity client {}, {}, {}",
                acr.identity.client_id,
                Step::EntraToken,
                Step::AcrExchange
            ),
            refresh_at,
        })
    }

    /// The metrics (tests and `inspect`).
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }
}
