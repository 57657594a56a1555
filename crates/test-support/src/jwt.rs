//! Bearer tokens shaped like Kubernetes projected service account tokens, for tests of what
//! checks them: a JWS in compact form (header, claims, signature; base64url) whose claims name
//! its audiences, subject and expiry. Its signature is none: the scripted API's TokenReview
//! ([`crate::KubeApi::accept_token`]) accepts tokens by their text.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

/// A token of `subject` for `audiences`, expiring at `exp` (seconds since the epoch).
pub fn service_account_token(subject: &str, audiences: &[&str], exp: i64) -> String {
    let header = serde_json::json!({"alg": "RS256", "kid": "test"});
    let claims = serde_json::json!({
        "aud": audiences,
        "exp": exp,
        "iat": exp.saturating_sub(3600),
        "iss": "https://kubernetes.default.svc.cluster.local",
        "sub": subject,
    });
    format!(
        "{}.{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string()),
        URL_SAFE_NO_PAD.encode(format!("not a signature of {subject}")),
    )
}

/// [`service_account_token`] valid for an hour from now.
pub fn fresh_token(subject: &str, audiences: &[&str]) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let now = i64::try_from(now).unwrap_or(i64::MAX);
    service_account_token(subject, audiences, now.saturating_add(3600))
}
