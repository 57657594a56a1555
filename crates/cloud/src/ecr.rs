//! ECR's `GetAuthorizationToken` (JSON 1.1 protocol, SigV4-signed for service `ecr`): a base64
//! `AWS:<password>` valid until `expiresAt`, for every registry of that region the identity may
//! read.

use std::time::{Duration, SystemTime};

use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use base64::Engine as _;
use serde::Deserialize;

use crate::aws::AwsCredentials;
use crate::http;
use crate::metrics::Metrics;
use crate::time::from_epoch_seconds;
use crate::{Error, Provider, Step};

const PROVIDER: Provider = Provider::Ecr;
const STEP: Step = Step::GetAuthorizationToken;

/// The JSON 1.1 operation header of `GetAuthorizationToken`.
pub const TARGET: &str = "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken";
/// The request body's media type.
pub const CONTENT_TYPE: &str = "application/x-amz-json-1.1";
/// The request body: no registry IDs, so the token is for the caller's default registry and
/// every registry it is allowed to read.
const BODY: &[u8] = b"{}";

/// The username and password for the registries of a region, and when they expire.
#[derive(Clone, PartialEq, Eq)]
pub struct EcrToken {
    pub username: String,
    pub password: String,
    pub expires_at: SystemTime,
}

impl std::fmt::Debug for EcrToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EcrToken")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// Ask `url` (the ECR API endpoint) for an authorization token, signing for `region` at `now`.
pub(crate) async fn authorization_token(
    client: &reqwest::Client,
    timeout: Duration,
    metrics: &Metrics,
    url: &str,
    region: &str,
    credentials: &AwsCredentials,
    now: SystemTime,
) -> Result<EcrToken, Error> {
    let result = async {
        let headers = signed_headers(url, region, credentials, now)
            .map_err(|reason| Error::malformed(PROVIDER, STEP, format!("cannot sign: {reason}")))?;
        let mut request = client.post(url).body(BODY);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let answer = http::send(PROVIDER, STEP, request, timeout).await?;
        // The session token goes in a header of the signed request; the secret key never does.
        let sent: Vec<&str> = credentials.session_token.as_deref().into_iter().collect();
        http::read(
            (PROVIDER, STEP),
            &answer,
            &sent,
            json_error,
            parse_authorization,
        )
    }
    .await;
    metrics.request(PROVIDER, STEP, result.is_ok());
    result
}

/// Every header of the signed request: `host`, `content-type`, `x-amz-target`, and what SigV4
/// adds (`x-amz-date`, `x-amz-security-token`, `authorization`).
pub fn signed_headers(
    url: &str,
    region: &str,
    credentials: &AwsCredentials,
    now: SystemTime,
) -> Result<Vec<(String, String)>, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("endpoint {url:?}: {e}"))?;
    let host = parsed.host_str().ok_or("endpoint has no host")?;
    let authority = match parsed.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    let mut headers = vec![
        ("host".to_owned(), authority),
        ("content-type".to_owned(), CONTENT_TYPE.to_owned()),
        ("x-amz-target".to_owned(), TARGET.to_owned()),
    ];
    let identity = aws_credential_types::Credentials::new(
        &credentials.access_key_id,
        &credentials.secret_access_key,
        credentials.session_token.clone(),
        None,
        "noe",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("ecr")
        .time(now)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let signable = SignableRequest::new(
        "POST",
        parsed.as_str(),
        headers.iter().map(|(n, v)| (n.as_str(), v.as_str())),
        SignableBody::Bytes(BODY),
    )
    .map_err(|e| e.to_string())?;
    let (instructions, _signature) = sign(signable, &params)
        .map_err(|e| e.to_string())?
        .into_parts();
    for (name, value) in instructions.headers() {
        headers.push((name.to_owned(), value.to_owned()));
    }
    // reqwest sets `host` itself, from the same URL.
    headers.retain(|(name, _)| name != "host");
    Ok(headers)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    #[serde(default)]
    authorization_data: Vec<AuthorizationData>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AuthorizationData {
    authorization_token: Option<String>,
    expires_at: Option<f64>,
}

/// The longest token accepted (ECR's are about 2 KiB of base64).
const MAX_TOKEN: usize = 16 * 1024;

/// The first `authorizationData` entry: its decoded `user:password` and its `expiresAt`.
pub(crate) fn parse_authorization(body: &[u8]) -> Result<EcrToken, String> {
    let answer: Answer = serde_json::from_slice(body)
        .map_err(|e| format!("not the GetAuthorizationToken JSON: {e}"))?;
    let data = answer
        .authorization_data
        .into_iter()
        .next()
        .ok_or("no authorizationData")?;
    let token = data.authorization_token.ok_or("no authorizationToken")?;
    if token.len() > MAX_TOKEN {
        return Err("authorizationToken too long".into());
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .map_err(|_| "authorizationToken is not base64")?;
    let decoded = String::from_utf8(decoded).map_err(|_| "authorizationToken is not UTF-8")?;
    let (username, password) = decoded
        .split_once(':')
        .ok_or("authorizationToken is not user:password")?;
    if username.is_empty() || password.is_empty() {
        return Err("authorizationToken has an empty user or password".into());
    }
    let expires_at = data
        .expires_at
        .and_then(from_epoch_seconds)
        .ok_or("no valid expiresAt")?;
    Ok(EcrToken {
        username: username.to_owned(),
        password: password.to_owned(),
        expires_at,
    })
}

/// `__type: message` of a JSON 1.1 error answer.
fn json_error(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct JsonError {
        #[serde(rename = "__type")]
        kind: Option<String>,
        #[serde(alias = "Message")]
        message: Option<String>,
    }
    let error: JsonError = serde_json::from_slice(body).ok()?;
    match (error.kind, error.message) {
        (Some(kind), Some(message)) => Some(format!("{kind}: {message}")),
        (Some(kind), None) => Some(kind),
        (None, Some(message)) => Some(message),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials() -> AwsCredentials {
        AwsCredentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: Some("session".into()),
        }
    }

    #[test]
    fn signature_scope_and_signed_headers() -> Result<(), String> {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_440_938_160); // 2015-08-30T12:36:00Z
        let headers = signed_headers(
            "https://api.ecr.eu-west-1.amazonaws.com/",
            "eu-west-1",
            &credentials(),
            now,
        )?;
        let get = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("x-amz-date"), Some("20150830T123600Z"));
        assert_eq!(get("x-amz-security-token"), Some("session"));
        assert_eq!(get("x-amz-target"), Some(TARGET));
        let authorization = get("authorization").ok_or("no authorization")?;
        assert!(
            authorization.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/eu-west-1/ecr/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-security-token;x-amz-target, Signature="),
            "{authorization}"
        );
        assert!(get("host").is_none());
        Ok(())
    }

    #[test]
    fn authorization_answers() {
        let token = base64::engine::general_purpose::STANDARD.encode("AWS:secret-password");
        let body = format!(
            r#"{{"authorizationData":[{{"authorizationToken":"{token}","expiresAt":1.8000432E9,"proxyEndpoint":"https://123456789012.dkr.ecr.us-east-1.amazonaws.com"}}]}}"#
        );
        let parsed = parse_authorization(body.as_bytes());
        let Ok(parsed) = parsed else {
            panic!("{parsed:?}")
        };
        assert_eq!(parsed.username, "AWS");
        assert_eq!(parsed.password, "secret-password");
        assert_eq!(
            parsed.expires_at,
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_043_200)
        );
        assert!(!format!("{parsed:?}").contains("secret-password"));
        let no_colon = base64::engine::general_purpose::STANDARD.encode("AWS");
        for bad in [
            r#"{}"#.to_owned(),
            r#"{"authorizationData":[]}"#.to_owned(),
            r#"{"authorizationData":[{"authorizationToken":"!!","expiresAt":1}]}"#.to_owned(),
            format!(
                r#"{{"authorizationData":[{{"authorizationToken":"{no_colon}","expiresAt":1}}]}}"#
            ),
            format!(
                r#"{{"authorizationData":[{{"authorizationToken":"{token}","expiresAt":-5}}]}}"#
            ),
            format!(r#"{{"authorizationData":[{{"authorizationToken":"{token}"}}]}}"#),
        ] {
            assert!(parse_authorization(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn json_errors_are_summarised() {
        assert_eq!(
            json_error(br#"{"__type":"AccessDeniedException","message":"not authorized"}"#)
                .as_deref(),
            Some("AccessDeniedException: not authorized")
        );
        assert_eq!(json_error(b"<html/>"), None);
    }
}
