//! Azure Container Registry on Azure workload identity: the projected service-account token is a
//! client assertion for an Entra ID token (client credentials grant), which the registry's
//! `/oauth2/exchange` turns into a refresh token, the password of the all-zero username.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use serde::Deserialize;

use crate::http;
use crate::metrics::Metrics;
use crate::{Env, Error, Provider, Step};

const PROVIDER: Provider = Provider::Acr;

/// The username that goes with an ACR refresh token.
pub const USERNAME: &str = "00000000-0000-0000-0000-000000000000";
/// Entra's public-cloud authority when `AZURE_AUTHORITY_HOST` is unset.
pub const DEFAULT_AUTHORITY: &str = "https://login.microsoftonline.com/";
/// The client assertion type of a federated (workload identity) token.
const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// The lifetime assumed when a refresh token's expiry cannot be read (ACR's last 3 hours).
const DEFAULT_REFRESH_LIFETIME: Duration = Duration::from_secs(3600);

/// The pod's Azure workload identity (the variables Azure's workload identity webhook injects).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AzureIdentity {
    pub client_id: String,
    pub tenant_id: String,
    pub token_file: PathBuf,
    /// Ends with `/`.
    pub authority: String,
}

impl AzureIdentity {
    pub fn from_env(env: &Env) -> Result<Self, Error> {
        let missing: Vec<&str> = [
            "AZURE_CLIENT_ID",
            "AZURE_TENANT_ID",
            "AZURE_FEDERATED_TOKEN_FILE",
        ]
        .into_iter()
        .filter(|name| env.get(name).is_none())
        .collect();
        let not_configured = |reason: String| Error::NotConfigured {
            provider: PROVIDER,
            reason,
        };
        if !missing.is_empty() {
            return Err(not_configured(format!(
                "no Azure workload identity: {} unset",
                missing.join(", ")
            )));
        }
        let get = |name: &str| env.get(name).unwrap_or_default().to_owned();
        let tenant_id = get("AZURE_TENANT_ID");
        let tenant_ok = tenant_id.len() <= 64
            && tenant_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
        if !tenant_ok {
            return Err(not_configured(
                "AZURE_TENANT_ID is not a tenant ID or domain".into(),
            ));
        }
        let mut authority = env
            .get("AZURE_AUTHORITY_HOST")
            .unwrap_or(DEFAULT_AUTHORITY)
            .to_owned();
        if url::Url::parse(&authority).is_err() {
            return Err(not_configured("AZURE_AUTHORITY_HOST is not a URL".into()));
        }
        if !authority.ends_with('/') {
            authority.push('/');
        }
        Ok(Self {
            client_id: get("AZURE_CLIENT_ID"),
            tenant_id,
            token_file: PathBuf::from(get("AZURE_FEDERATED_TOKEN_FILE")),
            authority,
        })
    }

    /// The tenant's token endpoint.
    pub fn token_url(&self) -> String {
        format!("{}{}/oauth2/v2.0/token", self.authority, self.tenant_id)
    }

    /// An Entra access token for `scope`, and when it expires.
    pub(crate) async fn entra_token(
        &self,
        client: &reqwest::Client,
        timeout: Duration,
        metrics: &Metrics,
        scope: &str,
        now: SystemTime,
    ) -> Result<(String, SystemTime), Error> {
        let step = Step::EntraToken;
        let assertion = http::read_token_file(PROVIDER, &self.token_file).await?;
        let result = async {
            let request = client.post(self.token_url()).form(&[
                ("grant_type", "client_credentials"),
                ("client_id", &self.client_id),
                ("scope", scope),
                ("client_assertion_type", ASSERTION_TYPE),
                ("client_assertion", &assertion),
            ]);
            let answer = http::send(PROVIDER, step, request, timeout).await?;
            let sent = [assertion.as_str()];
            http::read((PROVIDER, step), &answer, &sent, entra_error, |body| {
                parse_entra(body, now)
            })
        }
        .await;
        metrics.request(PROVIDER, step, result.is_ok());
        result
    }

    /// The registry's refresh token for `access_token`, and when it expires.
    pub(crate) async fn exchange(
        &self,
        client: &reqwest::Client,
        timeout: Duration,
        metrics: &Metrics,
        registry: &str,
        access_token: &str,
        now: SystemTime,
    ) -> Result<(String, SystemTime), Error> {
        let step = Step::AcrExchange;
        let result = async {
            let request = client
                .post(format!("https://{registry}/oauth2/exchange"))
                .form(&[
                    ("grant_type", "access_token"),
                    ("service", registry),
                    ("tenant", &self.tenant_id),
                    ("access_token", access_token),
                ]);
            let answer = http::send(PROVIDER, step, request, timeout).await?;
            let sent = [access_token];
            http::read(
                (PROVIDER, step),
                &answer,
                &sent,
                http::unknown_shape,
                |body| parse_exchange(body, now),
            )
        }
        .await;
        metrics.request(PROVIDER, step, result.is_ok());
        result
    }
}

pub(crate) fn parse_entra(body: &[u8], now: SystemTime) -> Result<(String, SystemTime), String> {
    http::access_token(body, now, 32 * 1024)
}

/// `error: error_description` of an OAuth2 error answer.
fn entra_error(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct OAuthError {
        error: String,
        error_description: Option<String>,
    }
    let error: OAuthError = serde_json::from_slice(body).ok()?;
    Some(match error.error_description {
        Some(description) => format!("{}: {description}", error.error),
        None => error.error,
    })
}

#[derive(Deserialize)]
struct ExchangeAnswer {
    refresh_token: String,
}

pub(crate) fn parse_exchange(body: &[u8], now: SystemTime) -> Result<(String, SystemTime), String> {
    let answer: ExchangeAnswer =
        serde_json::from_slice(body).map_err(|e| format!("not the exchange JSON: {e}"))?;
    if answer.refresh_token.is_empty() || answer.refresh_token.len() > 32 * 1024 {
        return Err("refresh_token empty or too long".into());
    }
    let expires_at = jwt_expiry(&answer.refresh_token).unwrap_or(now + DEFAULT_REFRESH_LIFETIME);
    Ok((answer.refresh_token, expires_at))
}

/// The `exp` claim of a JWT (read, not verified: it only decides when to refresh).
pub(crate) fn jwt_expiry(token: &str) -> Option<SystemTime> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    #[derive(Deserialize)]
    struct Claims {
        exp: Option<f64>,
    }
    let claims: Claims = serde_json::from_slice(&bytes).ok()?;
    crate::time::from_epoch_seconds(claims.exp?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(claims: &str) -> String {
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!("{}.{}.sig", b64(r#"{"alg":"RS256"}"#), b64(claims))
    }

    #[test]
    fn identity_from_env() {
        let env = Env::from_pairs([
            ("AZURE_CLIENT_ID", "11111111-2222-3333-4444-555555555555"),
            ("AZURE_TENANT_ID", "72f988bf-86f1-41af-91ab-2d7cd011db47"),
            (
                "AZURE_FEDERATED_TOKEN_FILE",
                "/var/run/secrets/azure/tokens/azure-identity-token",
            ),
            ("AZURE_AUTHORITY_HOST", "https://login.microsoftonline.com"),
        ]);
        let identity = AzureIdentity::from_env(&env);
        assert_eq!(
            identity.map(|i| i.token_url()).ok().as_deref(),
            Some("https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/oauth2/v2.0/token")
        );
        let partial = AzureIdentity::from_env(&Env::from_pairs([("AZURE_CLIENT_ID", "x")]));
        assert!(
            matches!(&partial, Err(Error::NotConfigured { reason, .. }) if reason.contains("AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE")),
            "{partial:?}"
        );
        let bad_tenant = Env::from_pairs([
            ("AZURE_CLIENT_ID", "x"),
            ("AZURE_TENANT_ID", "t/../../evil"),
            ("AZURE_FEDERATED_TOKEN_FILE", "/f"),
        ]);
        assert!(AzureIdentity::from_env(&bad_tenant).is_err());
    }

    #[test]
    fn refresh_token_expiry_from_its_claims() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let token = jwt(r#"{"exp":1800010800,"grant_type":"refresh_token"}"#);
        let body = format!(r#"{{"refresh_token":"{token}"}}"#);
        assert_eq!(
            parse_exchange(body.as_bytes(), now),
            Ok((
                token,
                SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_010_800)
            ))
        );
        let opaque = parse_exchange(br#"{"refresh_token":"opaque"}"#, now);
        assert_eq!(
            opaque,
            Ok(("opaque".to_owned(), now + DEFAULT_REFRESH_LIFETIME))
        );
        assert!(parse_exchange(br#"{"access_token":"x"}"#, now).is_err());
        assert_eq!(jwt_expiry(&jwt(r#"{"exp":-1}"#)), None);
        assert_eq!(jwt_expiry("a.!!!.c"), None);
    }

    #[test]
    fn entra_answers_and_errors() {
        let now = SystemTime::UNIX_EPOCH;
        assert_eq!(
            parse_entra(
                br#"{"token_type":"Bearer","expires_in":3599,"access_token":"eyJ0"}"#,
                now
            ),
            Ok(("eyJ0".to_owned(), now + Duration::from_secs(3599)))
        );
        assert_eq!(
            entra_error(br#"{"error":"invalid_client","error_description":"AADSTS700213: No matching federated identity record found"}"#).as_deref(),
            Some("invalid_client: AADSTS700213: No matching federated identity record found")
        );
    }
}
