//! AWS credentials of the pod's own identity, in the AWS SDKs' order: static keys from the
//! environment, IRSA (a projected web identity token exchanged at STS
//! `AssumeRoleWithWebIdentity`), or EKS Pod Identity (the agent at
//! `AWS_CONTAINER_CREDENTIALS_FULL_URI`).

use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use serde::Deserialize;

use crate::http::{self, Answer};
use crate::metrics::Metrics;
use crate::time::parse_rfc3339_utc;
use crate::{Env, Error, Provider, Step};

const PROVIDER: Provider = Provider::Ecr;

/// The lifetime assumed for credentials whose answer carries no expiry.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// Temporary (or static) AWS credentials. `Debug` never prints the secret or the session token.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Where the pod's AWS identity comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum AwsIdentity {
    /// `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN`).
    Static(AwsCredentials),
    /// IRSA: `AWS_ROLE_ARN` and `AWS_WEB_IDENTITY_TOKEN_FILE`.
    WebIdentity {
        role_arn: String,
        token_file: PathBuf,
        session_name: String,
        /// `AWS_ENDPOINT_URL_STS`, else the regional endpoint.
        sts_endpoint: Option<String>,
        /// `AWS_REGION` or `AWS_DEFAULT_REGION`, else the registry's.
        region: Option<String>,
    },
    /// EKS Pod Identity: `AWS_CONTAINER_CREDENTIALS_FULL_URI` with the token of
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` (or `AWS_CONTAINER_AUTHORIZATION_TOKEN`).
    PodIdentity {
        uri: String,
        token_file: Option<PathBuf>,
        token: Option<String>,
    },
}

impl fmt::Debug for AwsIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Static(credentials) => f.debug_tuple("Static").field(credentials).finish(),
            Self::WebIdentity {
                role_arn,
                token_file,
                sts_endpoint,
                ..
            } => f
                .debug_struct("WebIdentity")
                .field("role_arn", role_arn)
                .field("token_file", token_file)
                .field("sts_endpoint", sts_endpoint)
                .finish_non_exhaustive(),
            Self::PodIdentity {
                uri, token_file, ..
            } => f
                .debug_struct("PodIdentity")
                .field("uri", uri)
                .field("token_file", token_file)
                .finish_non_exhaustive(),
        }
    }
}

impl AwsIdentity {
    /// The identity the environment describes, in the SDKs' order.
    pub fn from_env(env: &Env) -> Result<Self, Error> {
        if let (Some(id), Some(secret)) = (
            env.get("AWS_ACCESS_KEY_ID"),
            env.get("AWS_SECRET_ACCESS_KEY"),
        ) {
            return Ok(Self::Static(AwsCredentials {
                access_key_id: id.to_owned(),
                secret_access_key: secret.to_owned(),
                session_token: env.get("AWS_SESSION_TOKEN").map(str::to_owned),
            }));
        }
        if let (Some(role_arn), Some(token_file)) = (
            env.get("AWS_ROLE_ARN"),
            env.get("AWS_WEB_IDENTITY_TOKEN_FILE"),
        ) {
            let session_name = env
                .get("AWS_ROLE_SESSION_NAME")
                .unwrap_or("noe")
                .chars()
                .take(64)
                .collect();
            return Ok(Self::WebIdentity {
                role_arn: role_arn.to_owned(),
                token_file: PathBuf::from(token_file),
                session_name,
                sts_endpoint: env.get("AWS_ENDPOINT_URL_STS").map(str::to_owned),
                region: env.aws_region().map(str::to_owned),
            });
        }
        if let Some(uri) = env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI") {
            return Ok(Self::PodIdentity {
                uri: uri.to_owned(),
                token_file: env
                    .get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
                    .map(PathBuf::from),
                token: env
                    .get("AWS_CONTAINER_AUTHORIZATION_TOKEN")
                    .map(str::to_owned),
            });
        }
        Err(Error::NotConfigured {
            provider: PROVIDER,
            reason: "no AWS identity: set AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE (IRSA) or \
                     AWS_CONTAINER_CREDENTIALS_FULL_URI (EKS Pod Identity)"
                .into(),
        })
    }

    /// A secret-free name of the identity, for `inspect`.
    pub fn describe(&self) -> String {
        match self {
            Self::Static(c) => format!("static keys {}", c.access_key_id),
            Self::WebIdentity { role_arn, .. } => format!("IRSA role {role_arn}"),
            Self::PodIdentity { .. } => "EKS Pod Identity".to_owned(),
        }
    }

    /// The identity and the steps that turn it into AWS credentials, secret-free (the access
    /// key id of static keys is not named): what `inspect` prints as the credential source.
    pub(crate) fn steps(&self) -> String {
        match self {
            Self::Static(_) => format!("static keys from the {}", Step::Environment),
            Self::WebIdentity { role_arn, .. } => {
                format!("IRSA role {role_arn}, {}", Step::AssumeRoleWithWebIdentity)
            }
            Self::PodIdentity { .. } => Step::PodIdentity.to_string(),
        }
    }

    /// The cache key of this identity's credentials for a registry in `region`.
    pub(crate) fn cache_key(&self, region: &str) -> String {
        match self {
            Self::WebIdentity {
                sts_endpoint: None,
                region: None,
                ..
            } => format!("sts:{region}"),
            _ => "aws".to_owned(),
        }
    }

    /// Fresh credentials and their expiry, for a registry in `region`.
    pub(crate) async fn fetch(
        &self,
        client: &reqwest::Client,
        timeout: Duration,
        metrics: &Metrics,
        now: SystemTime,
        registry_region: &str,
    ) -> Result<(AwsCredentials, SystemTime), Error> {
        match self {
            Self::Static(credentials) => {
                Ok((credentials.clone(), now + crate::cache::MAX_LIFETIME))
            }
            Self::WebIdentity {
                role_arn,
                token_file,
                session_name,
                sts_endpoint,
                region,
            } => {
                let token = http::read_token_file(PROVIDER, token_file).await?;
                let region = region.as_deref().unwrap_or(registry_region);
                let url = sts_endpoint.clone().unwrap_or_else(|| sts_url(region));
                let step = Step::AssumeRoleWithWebIdentity;
                let request = client
                    .post(&url)
                    .header(reqwest::header::ACCEPT, "text/xml")
                    .form(&[
                        ("Action", "AssumeRoleWithWebIdentity"),
                        ("Version", "2011-06-15"),
                        ("RoleArn", role_arn),
                        ("RoleSessionName", session_name),
                        ("WebIdentityToken", &token),
                    ]);
                let answer = http::send(PROVIDER, step, request, timeout).await;
                let sent = [token.as_str()];
                let result = answer.and_then(|answer| {
                    http::read((PROVIDER, step), &answer, &sent, sts_error, |body| {
                        parse_sts(body, now)
                    })
                });
                metrics.request(PROVIDER, step, result.is_ok());
                result
            }
            Self::PodIdentity {
                uri,
                token_file,
                token,
            } => {
                let step = Step::PodIdentity;
                let authorization = match (token_file, token) {
                    (Some(file), _) => Some(http::read_token_file(PROVIDER, file).await?),
                    (None, Some(token)) => Some(token.clone()),
                    (None, None) => None,
                };
                let mut request = client
                    .get(uri)
                    .header(reqwest::header::ACCEPT, "application/json");
                if let Some(authorization) = &authorization {
                    request = request.header(reqwest::header::AUTHORIZATION, authorization);
                }
                let answer = http::send(PROVIDER, step, request, timeout).await;
                let sent: Vec<&str> = authorization.as_deref().into_iter().collect();
                let result = answer.and_then(|answer: Answer| {
                    http::read(
                        (PROVIDER, step),
                        &answer,
                        &sent,
                        http::unknown_shape,
                        |body| parse_container_credentials(body, now),
                    )
                });
                metrics.request(PROVIDER, step, result.is_ok());
                result
            }
        }
    }
}

/// The regional STS endpoint (the SDKs' default since the global one was retired as default).
pub fn sts_url(region: &str) -> String {
    if region.starts_with("cn-") {
        format!("https://sts.{region}.amazonaws.com.cn/")
    } else {
        format!("https://sts.{region}.amazonaws.com/")
    }
}

/// The credentials of an `AssumeRoleWithWebIdentityResponse` (STS query protocol, XML).
pub(crate) fn parse_sts(
    body: &[u8],
    now: SystemTime,
) -> Result<(AwsCredentials, SystemTime), String> {
    let text = std::str::from_utf8(body).map_err(|_| "not UTF-8".to_owned())?;
    let doc = roxmltree::Document::parse(text).map_err(|e| format!("not XML: {e}"))?;
    let credentials = doc
        .descendants()
        .find(|n| n.has_tag_name("Credentials"))
        .ok_or("no Credentials element")?;
    let field = |name: &str| -> Option<String> {
        credentials
            .children()
            .find(|n| n.has_tag_name(name))
            .and_then(|n| n.text())
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
    };
    let access_key_id = field("AccessKeyId").ok_or("no AccessKeyId")?;
    let secret_access_key = field("SecretAccessKey").ok_or("no SecretAccessKey")?;
    let session_token = field("SessionToken").ok_or("no SessionToken")?;
    check_sizes(&access_key_id, &secret_access_key, Some(&session_token))?;
    let expires_at = match field("Expiration") {
        Some(text) => parse_rfc3339_utc(&text).ok_or("Expiration is not an RFC 3339 UTC time")?,
        None => now + DEFAULT_LIFETIME,
    };
    Ok((
        AwsCredentials {
            access_key_id,
            secret_access_key,
            session_token: Some(session_token),
        },
        expires_at,
    ))
}

/// `Code: Message` of an STS `ErrorResponse`, when the body is one.
pub(crate) fn sts_error(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let doc = roxmltree::Document::parse(text).ok()?;
    let error = doc.descendants().find(|n| n.has_tag_name("Error"))?;
    let text_of = |name: &str| {
        error
            .children()
            .find(|n| n.has_tag_name(name))
            .and_then(|n| n.text())
            .map(str::trim)
    };
    match (text_of("Code"), text_of("Message")) {
        (Some(code), Some(message)) => Some(format!("{code}: {message}")),
        (Some(code), None) => Some(code.to_owned()),
        _ => None,
    }
}

/// The EKS Pod Identity agent's (and ECS container credentials') JSON answer.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ContainerCredentials {
    access_key_id: String,
    secret_access_key: String,
    token: Option<String>,
    expiration: Option<String>,
}

/// Credentials of sizes AWS issues (an access key ID of at most 128 characters of `[A-Z0-9]`, a
/// secret key of at most 1 KiB, a session token of at most 16 KiB): they go into the headers of
/// every signed request.
fn check_sizes(
    access_key_id: &str,
    secret_access_key: &str,
    session_token: Option<&str>,
) -> Result<(), String> {
    if access_key_id.len() > 128 || !access_key_id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err("AccessKeyId is not an access key ID".into());
    }
    if secret_access_key.len() > 1024 || session_token.is_some_and(|t| t.len() > 16 * 1024) {
        return Err("SecretAccessKey or the session token is too long".into());
    }
    Ok(())
}

pub(crate) fn parse_container_credentials(
    body: &[u8],
    now: SystemTime,
) -> Result<(AwsCredentials, SystemTime), String> {
    let parsed: ContainerCredentials =
        serde_json::from_slice(body).map_err(|e| format!("not the credentials JSON: {e}"))?;
    if parsed.access_key_id.is_empty() || parsed.secret_access_key.is_empty() {
        return Err("empty AccessKeyId or SecretAccessKey".into());
    }
    check_sizes(
        &parsed.access_key_id,
        &parsed.secret_access_key,
        parsed.token.as_deref(),
    )?;
    let expires_at = match parsed.expiration.as_deref() {
        Some(text) => parse_rfc3339_utc(text).ok_or("Expiration is not an RFC 3339 UTC time")?,
        None => now + DEFAULT_LIFETIME,
    };
    Ok((
        AwsCredentials {
            access_key_id: parsed.access_key_id,
            secret_access_key: parsed.secret_access_key,
            session_token: parsed.token.filter(|t| !t.is_empty()),
        },
        expires_at,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Duration = Duration::from_secs(1_800_000_000);

    #[test]
    fn sts_answer_from_the_reference() {
        let body = br#"<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>system:serviceaccount:noe:noe</SubjectFromWebIdentityToken>
    <Audience>sts.amazonaws.com</Audience>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::123456789012:assumed-role/noe/noe</Arn>
      <AssumedRoleId>AROACLKWSDQRAOEXAMPLE:noe</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <SessionToken>AQoDYXdzEE0a8ANXXXXXXXXNO1ewxE5TijQyp+IEXAMPLE</SessionToken>
      <SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY</SecretAccessKey>
      <Expiration>2027-01-15T23:28:33.359Z</Expiration>
      <AccessKeyId>ASIAIOSFODNN7EXAMPLE</AccessKeyId>
    </Credentials>
    <Provider>www.amazon.com</Provider>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>ad4156e9-bce1-11e2-82e6-6b6efEXAMPLE</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>"#;
        let now = SystemTime::UNIX_EPOCH + NOW;
        let parsed = parse_sts(body, now);
        let Ok((credentials, expires)) = parsed else {
            panic!("{parsed:?}");
        };
        assert_eq!(credentials.access_key_id, "ASIAIOSFODNN7EXAMPLE");
        assert_eq!(
            credentials.session_token.as_deref(),
            Some("AQoDYXdzEE0a8ANXXXXXXXXNO1ewxE5TijQyp+IEXAMPLE")
        );
        assert_eq!(parse_rfc3339_utc("2027-01-15T23:28:33Z"), Some(expires));
        let printed = format!("{credentials:?}");
        assert!(
            !printed.contains("wJalr") && !printed.contains("AQoD"),
            "{printed}"
        );
    }

    #[test]
    fn malformed_sts_answers_are_errors() {
        let now = SystemTime::UNIX_EPOCH + NOW;
        for body in [
            &b""[..],
            b"<x",
            b"<A><Credentials><AccessKeyId>a</AccessKeyId></Credentials></A>",
            b"<A><Credentials><AccessKeyId>a</AccessKeyId><SecretAccessKey>s</SecretAccessKey><SessionToken>t</SessionToken><Expiration>soon</Expiration></Credentials></A>",
            b"<!DOCTYPE x [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">]><A>&b;</A>",
        ] {
            assert!(parse_sts(body, now).is_err(), "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn sts_error_summary() {
        let body = br#"<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <Error><Type>Sender</Type><Code>AccessDenied</Code><Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message></Error>
  <RequestId>1</RequestId></ErrorResponse>"#;
        assert_eq!(
            sts_error(body).as_deref(),
            Some("AccessDenied: Not authorized to perform sts:AssumeRoleWithWebIdentity")
        );
        assert_eq!(sts_error(b"<html>gateway</html>"), None);
    }

    #[test]
    fn pod_identity_answer() {
        let now = SystemTime::UNIX_EPOCH + NOW;
        let body = br#"{"AccessKeyId":"ASIA1","SecretAccessKey":"s","Token":"t","AccountId":"123456789012","Expiration":"2027-01-15T23:28:33Z"}"#;
        let parsed = parse_container_credentials(body, now);
        assert!(
            matches!(&parsed, Ok((c, _)) if c.access_key_id == "ASIA1" && c.session_token.as_deref() == Some("t")),
            "{parsed:?}"
        );
        assert!(
            parse_container_credentials(br#"{"AccessKeyId":"","SecretAccessKey":"s"}"#, now)
                .is_err()
        );
        assert!(parse_container_credentials(b"[]", now).is_err());
    }

    #[test]
    fn identity_from_env_in_sdk_order() {
        let irsa = Env::from_pairs([
            ("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/noe"),
            (
                "AWS_WEB_IDENTITY_TOKEN_FILE",
                "/var/run/secrets/eks.amazonaws.com/serviceaccount/token",
            ),
            (
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "http://169.254.170.23/v1/credentials",
            ),
        ]);
        assert!(matches!(
            AwsIdentity::from_env(&irsa),
            Ok(AwsIdentity::WebIdentity { .. })
        ));
        let pod = Env::from_pairs([(
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            "http://169.254.170.23/v1/credentials",
        )]);
        assert!(matches!(
            AwsIdentity::from_env(&pod),
            Ok(AwsIdentity::PodIdentity { .. })
        ));
        let none = AwsIdentity::from_env(&Env::default());
        assert!(
            matches!(
                none,
                Err(Error::NotConfigured {
                    provider: Provider::Ecr,
                    ..
                })
            ),
            "{none:?}"
        );
        assert_eq!(
            sts_url("cn-north-1"),
            "https://sts.cn-north-1.amazonaws.com.cn/"
        );
        assert_eq!(sts_url("eu-west-1"), "https://sts.eu-west-1.amazonaws.com/");
    }
}
