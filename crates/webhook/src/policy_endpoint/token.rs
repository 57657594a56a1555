//! What a Bearer token says of itself, read before anyone is asked about it: a token that is not
//! a JWT, is not meant for `--lookup-token-audience` or has expired cannot pass a TokenReview,
//! so it is refused without one. Nothing here is verified (the signature is the API server's to
//! check); a token that passes is only worth asking about.
//!
//! A Kubernetes service account token (the projected token Kyverno sends) is a JWS in compact
//! form: three base64url segments, a header naming its `alg`, and claims with `aud` (a string
//! or a list) and `exp` (seconds since the epoch).

use base64::Engine as _;
use serde::Deserialize;

/// How long past its `exp` a token is still worth asking about: the API server's own leeway
/// when it validates a service account token.
pub const EXPIRY_LEEWAY_SECS: i64 = 60;

/// Why a token is refused without a TokenReview (the `reason` label of
/// `noe_lookup_token_refusals_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unfit {
    /// Not a JWT: not three base64url segments, or a header or claims that are not JSON objects.
    Malformed,
    /// Its `aud` does not name the audience (or it has none).
    Audience,
    /// Its `exp` has passed (by more than [`EXPIRY_LEEWAY_SECS`]).
    Expired,
}

impl Unfit {
    pub fn label(self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::Audience => "audience",
            Self::Expired => "expired",
        }
    }
}

#[derive(Deserialize)]
struct Header {
    alg: String,
}

#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    aud: Option<Audience>,
    #[serde(default)]
    exp: Option<serde_json::Number>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

/// The token's `exp` (seconds since the epoch, when it has one) if it is worth a TokenReview
/// for `audience` at `now` (seconds since the epoch); why not otherwise.
pub fn precheck(token: &str, audience: &str, now: i64) -> Result<Option<i64>, Unfit> {
    let mut segments = token.split('.');
    let (Some(header), Some(claims), Some(signature), None) = (
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
    ) else {
        return Err(Unfit::Malformed);
    };
    if signature.is_empty() || !signature.bytes().all(is_base64url) {
        return Err(Unfit::Malformed);
    }
    let header: Header = decode(header).ok_or(Unfit::Malformed)?;
    if header.alg.is_empty() {
        return Err(Unfit::Malformed);
    }
    let claims: Claims = decode(claims).ok_or(Unfit::Malformed)?;
    let meant = match &claims.aud {
        Some(Audience::One(one)) => one == audience,
        Some(Audience::Many(many)) => many.iter().any(|a| a == audience),
        None => false,
    };
    if !meant {
        return Err(Unfit::Audience);
    }
    // A fractional or huge `exp` counts by its whole seconds, saturated.
    let exp = claims.exp.map(|number| match number.as_i64() {
        Some(exp) => exp,
        None => number.as_f64().map_or(i64::MAX, |exp| {
            exp.clamp(i64::MIN as f64, i64::MAX as f64) as i64
        }),
    });
    if exp.is_some_and(|exp| exp.saturating_add(EXPIRY_LEEWAY_SECS) < now) {
        return Err(Unfit::Expired);
    }
    Ok(exp)
}

fn is_base64url(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_'
}

/// A base64url segment (padding tolerated) holding a JSON object of type `T`.
fn decode<T: serde::de::DeserializeOwned>(segment: &str) -> Option<T> {
    let segment = segment.trim_end_matches('=');
    if segment.is_empty() || !segment.bytes().all(is_base64url) {
        return None;
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(segment)
        .ok()?;
    if bytes.first() != Some(&b'{') {
        return None;
    }
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    const NOW: i64 = 1_800_000_000;

    fn jwt(header: &str, claims: &str) -> String {
        format!(
            "{}.{}.c2lnbmF0dXJl",
            URL_SAFE_NO_PAD.encode(header),
            URL_SAFE_NO_PAD.encode(claims)
        )
    }

    #[test]
    fn tokens_worth_a_review() {
        let rs256 = r#"{"alg":"RS256","kid":"k1"}"#;
        let cases: &[(String, Result<Option<i64>, Unfit>)] = &[
            // A projected service account token, as Kyverno sends it.
            (
                jwt(
                    rs256,
                    &format!(
                        r#"{{"aud":["kyverno-svc.kyverno.io"],"exp":{},"iat":{NOW},"iss":"https://kubernetes.default.svc","sub":"system:serviceaccount:kyverno:kyverno-admission-controller"}}"#,
                        NOW + 3600
                    ),
                ),
                Ok(Some(NOW + 3600)),
            ),
            (jwt(rs256, r#"{"aud":"kyverno-svc.kyverno.io"}"#), Ok(None)),
            (
                jwt(
                    rs256,
                    &format!(r#"{{"aud":["x","kyverno-svc.kyverno.io"],"exp":{NOW}.5}}"#),
                ),
                Ok(Some(NOW)),
            ),
            // Within the API server's leeway.
            (
                jwt(
                    rs256,
                    &format!(r#"{{"aud":"kyverno-svc.kyverno.io","exp":{}}}"#, NOW - 60),
                ),
                Ok(Some(NOW - 60)),
            ),
            (
                jwt(
                    rs256,
                    &format!(r#"{{"aud":"kyverno-svc.kyverno.io","exp":{}}}"#, NOW - 61),
                ),
                Err(Unfit::Expired),
            ),
            (
                jwt(rs256, r#"{"aud":"kyverno-svc.kyverno.io","exp":-1e300}"#),
                Err(Unfit::Expired),
            ),
            (
                jwt(rs256, r#"{"aud":"kyverno-svc.kyverno.io","exp":1e300}"#),
                Ok(Some(i64::MAX)),
            ),
            (
                jwt(rs256, r#"{"aud":["someone-else"]}"#),
                Err(Unfit::Audience),
            ),
            (jwt(rs256, r#"{"sub":"legacy"}"#), Err(Unfit::Audience)),
            (
                jwt(rs256, r#"{"aud":"Kyverno-svc.kyverno.io"}"#),
                Err(Unfit::Audience),
            ),
            (jwt(rs256, r#"{"aud":42}"#), Err(Unfit::Malformed)),
            (
                jwt(rs256, r#"{"aud":"kyverno-svc.kyverno.io","exp":"soon"}"#),
                Err(Unfit::Malformed),
            ),
            (
                jwt(r#"{"typ":"JWT"}"#, r#"{"aud":"kyverno-svc.kyverno.io"}"#),
                Err(Unfit::Malformed),
            ),
            (
                jwt(r#"{"alg":""}"#, r#"{"aud":"kyverno-svc.kyverno.io"}"#),
                Err(Unfit::Malformed),
            ),
            (
                jwt(rs256, r#"["kyverno-svc.kyverno.io"]"#),
                Err(Unfit::Malformed),
            ),
            (jwt(rs256, "not json"), Err(Unfit::Malformed)),
            ("kyverno-token".to_owned(), Err(Unfit::Malformed)),
            ("a.b".to_owned(), Err(Unfit::Malformed)),
            ("a.b.c.d".to_owned(), Err(Unfit::Malformed)),
            ("..".to_owned(), Err(Unfit::Malformed)),
            (
                "eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJ4In0.".to_owned(),
                Err(Unfit::Malformed),
            ),
            (
                "eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJ4In0.s!g".to_owned(),
                Err(Unfit::Malformed),
            ),
            ("e+J.eyJhdWQiOiJ4In0.sig".to_owned(), Err(Unfit::Malformed)),
        ];
        for (token, want) in cases {
            assert_eq!(
                precheck(token, "kyverno-svc.kyverno.io", NOW),
                *want,
                "{token}"
            );
        }
        // Padded segments are read too.
        let padded = format!(
            "{}=.{}==.sig",
            URL_SAFE_NO_PAD.encode(rs256),
            URL_SAFE_NO_PAD.encode(r#"{"aud":"a"}"#)
        );
        assert_eq!(precheck(&padded, "a", NOW), Ok(None));
    }
}
