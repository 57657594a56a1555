//! Artifact Registry and GCR: the access token of the pod's service account (GKE workload
//! identity) from the metadata server, used as the password of `oauth2accesstoken`.

use std::time::{Duration, SystemTime};

use crate::http;
use crate::metrics::Metrics;
use crate::{Env, Error, Provider, Step};

const PROVIDER: Provider = Provider::Gcp;
const STEP: Step = Step::MetadataToken;

/// The metadata server's name when `GCE_METADATA_HOST` is unset.
pub const DEFAULT_METADATA_HOST: &str = "metadata.google.internal";
/// The token path of the default service account.
pub const TOKEN_PATH: &str = "/computeMetadata/v1/instance/service-accounts/default/token";
/// The username that goes with an access token.
pub const USERNAME: &str = "oauth2accesstoken";

/// The metadata server's token URL, from `GCE_METADATA_HOST` (`host` or `host:port`).
pub fn token_url(env: &Env) -> Result<String, Error> {
    let host = env
        .get("GCE_METADATA_HOST")
        .unwrap_or(DEFAULT_METADATA_HOST);
    let valid = host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
    if !valid {
        return Err(Error::NotConfigured {
            provider: PROVIDER,
            reason: "GCE_METADATA_HOST is not a host or host:port".into(),
        });
    }
    Ok(format!("http://{host}{TOKEN_PATH}"))
}

/// The access token from `url` and when it expires.
pub(crate) async fn access_token(
    client: &reqwest::Client,
    timeout: Duration,
    metrics: &Metrics,
    url: &str,
    now: SystemTime,
) -> Result<(String, SystemTime), Error> {
    let result = async {
        let request = client.get(url).header("Metadata-Flavor", "Google");
        let answer = http::send(PROVIDER, STEP, request, timeout).await?;
        if !answer.status.is_success() {
            return Err(http::status_error(PROVIDER, STEP, &answer, None, &[]));
        }
        // The metadata server marks its answers; anything else (a proxy's page) is not one.
        let flavor = answer
            .headers
            .get("metadata-flavor")
            .and_then(|v| v.to_str().ok());
        if flavor != Some("Google") {
            return Err(Error::malformed(
                PROVIDER,
                STEP,
                "the answer lacks Metadata-Flavor: Google",
            ));
        }
        parse_token(&answer.body, now)
            .map_err(|reason| http::malformed(PROVIDER, STEP, &reason, &[]))
    }
    .await;
    metrics.request(PROVIDER, STEP, result.is_ok());
    result
}

pub(crate) fn parse_token(body: &[u8], now: SystemTime) -> Result<(String, SystemTime), String> {
    http::access_token(body, now, 16 * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_urls() {
        assert_eq!(
            token_url(&Env::default()).ok().as_deref(),
            Some("http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token")
        );
        let local = Env::from_pairs([("GCE_METADATA_HOST", "127.0.0.1:8080")]);
        assert_eq!(
            token_url(&local).ok().as_deref(),
            Some(
                "http://127.0.0.1:8080/computeMetadata/v1/instance/service-accounts/default/token"
            )
        );
        let injected = Env::from_pairs([("GCE_METADATA_HOST", "evil.example/x?")]);
        assert!(token_url(&injected).is_err());
    }

    #[test]
    fn token_answers() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let parsed = parse_token(
            br#"{"access_token":"ya29.c","expires_in":3599,"token_type":"Bearer"}"#,
            now,
        );
        assert_eq!(
            parsed,
            Ok(("ya29.c".to_owned(), now + Duration::from_secs(3599)))
        );
        let huge = parse_token(
            br#"{"access_token":"t","expires_in":18446744073709551615}"#,
            now,
        );
        assert_eq!(
            huge.map(|(_, at)| at),
            Ok(now + Duration::from_secs(http::MAX_EXPIRES_IN))
        );
        assert!(parse_token(br#"{"access_token":""}"#, now).is_err());
        assert!(parse_token(b"not json", now).is_err());
    }
}
