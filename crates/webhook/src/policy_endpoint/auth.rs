//! Who may ask: a caller that presented a client certificate the TLS handshake verified against
//! `--lookup-client-ca` (Gatekeeper presents its webhook certificate), or one whose Bearer
//! token the Kubernetes API accepts for `--lookup-token-audience` (a TokenReview; Kyverno ≥1.18
//! sends its projected token). A caller with neither gets nothing: 401 without credentials,
//! 403 with a token the API rejects, 503 when the API cannot say.
//!
//! Verdicts are cached by the token's SHA-256 (never the token itself) for [`VERDICT_TTL`] after
//! their review, at most [`MAX_VERDICTS`] of them; a cached verdict is read without waiting (the
//! warm path of every request), concurrent checks of one token share one TokenReview, and at most
//! [`MAX_REVIEWS`] reviews are in flight.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use http::HeaderMap;
use sha2::{Digest as _, Sha256};
use tokio::time::Instant;

/// How long a TokenReview's verdict is reused: a revoked token keeps access at most this long.
pub const VERDICT_TTL: Duration = Duration::from_secs(60);
/// Verdicts cached at most.
pub const MAX_VERDICTS: u64 = 4096;
/// TokenReviews in flight at most.
pub const MAX_REVIEWS: usize = 16;
/// Longer Authorization headers are refused unread (a projected token is about 1 KiB).
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// Who the caller is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// A client certificate verified against `--lookup-client-ca`.
    Certificate,
    /// A token the API accepted; the username it names (shared with the cached verdict).
    Token(Arc<str>),
}

/// Why a caller is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// Neither a verified client certificate nor a Bearer token (401).
    #[error("no client certificate and no Bearer token")]
    Unauthenticated,
    /// The token is not valid for the audience (403).
    #[error("the Bearer token is not valid for this endpoint")]
    Forbidden,
    /// The Kubernetes API did not answer the TokenReview (503).
    #[error("cannot check the Bearer token: {0}")]
    Unavailable(String),
}

/// The TokenReview verdict on a token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Authenticated { username: Arc<str> },
    Rejected,
}

/// Checks a token for an audience: the Kubernetes API's TokenReview, or a script in tests.
pub trait TokenReviewer: Send + Sync + 'static {
    fn review<'a>(
        &'a self,
        token: &'a str,
        audience: &'a str,
    ) -> BoxFuture<'a, Result<Verdict, String>>;
}

/// `POST /apis/authentication.k8s.io/v1/tokenreviews` (needs `create tokenreviews`).
#[derive(Clone)]
pub struct KubeTokenReviews {
    client: kube::Client,
    timeout: Duration,
}

impl std::fmt::Debug for KubeTokenReviews {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeTokenReviews").finish_non_exhaustive()
    }
}

impl KubeTokenReviews {
    /// Each review ends after `timeout`.
    pub fn new(client: kube::Client, timeout: Duration) -> Self {
        Self { client, timeout }
    }
}

impl TokenReviewer for KubeTokenReviews {
    fn review<'a>(
        &'a self,
        token: &'a str,
        audience: &'a str,
    ) -> BoxFuture<'a, Result<Verdict, String>> {
        use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
        Box::pin(async move {
            let api: kube::Api<TokenReview> = kube::Api::all(self.client.clone());
            let review = TokenReview {
                spec: TokenReviewSpec {
                    token: Some(token.to_owned()),
                    audiences: Some(vec![audience.to_owned()]),
                },
                ..TokenReview::default()
            };
            let created = tokio::time::timeout(
                self.timeout,
                api.create(&kube::api::PostParams::default(), &review),
            )
            .await
            .map_err(|_| "the Kubernetes API did not answer in time".to_owned())?
            .map_err(|error| match error {
                kube::Error::Api(status) if matches!(status.code, 401 | 403) => {
                    "forbidden (is `create tokenreviews` granted to noe's ServiceAccount?)"
                        .to_owned()
                }
                _ => "the Kubernetes API failed".to_owned(),
            })?;
            let status = created.status.unwrap_or_default();
            let audiences = status.audiences.unwrap_or_default();
            // The API answers the audiences the token is valid for among those asked; an
            // apiserver that ignores audiences answers none, and is not trusted for ours.
            if status.authenticated == Some(true) && audiences.iter().any(|a| a == audience) {
                let username = status.user.and_then(|u| u.username).unwrap_or_default();
                Ok(Verdict::Authenticated {
                    username: username.into(),
                })
            } else {
                Ok(Verdict::Rejected)
            }
        })
    }
}

/// Bearer tokens checked for one audience, verdicts cached.
pub struct TokenAuth {
    reviewer: Arc<dyn TokenReviewer>,
    audience: String,
    /// Verdicts and when they stop being used, read with one table probe.
    known: quick_cache::sync::Cache<[u8; 32], (Verdict, Instant)>,
    /// Where checks of a token not known share its one TokenReview: the verdict and when it was
    /// given.
    reviewed: moka::future::Cache<[u8; 32], (Verdict, Instant)>,
    reviews: tokio::sync::Semaphore,
}

impl std::fmt::Debug for TokenAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenAuth")
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

impl TokenAuth {
    pub fn new(reviewer: Arc<dyn TokenReviewer>, audience: impl Into<String>) -> Self {
        Self {
            reviewer,
            audience: audience.into(),
            known: quick_cache::sync::Cache::new(
                usize::try_from(MAX_VERDICTS).unwrap_or(usize::MAX),
            ),
            reviewed: moka::future::Cache::builder()
                .max_capacity(MAX_VERDICTS)
                .time_to_live(VERDICT_TTL)
                .build(),
            reviews: tokio::sync::Semaphore::new(MAX_REVIEWS),
        }
    }

    /// The verdict on `token`: cached, else one TokenReview (shared by concurrent callers).
    /// Failures to ask are not cached.
    pub async fn check(&self, token: &str) -> Result<Verdict, String> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        if let Some((verdict, until)) = self.known.get(&key) {
            if until > now {
                return Ok(verdict);
            }
        }
        // Used for VERDICT_TTL from its review, whichever cache it is read from: one the shared
        // cache still holds past that is dropped and the token reviewed again.
        for _ in 0..2 {
            let (verdict, reviewed) = self
                .reviewed
                .try_get_with(key, async {
                    let _slot = self
                        .reviews
                        .acquire()
                        .await
                        .map_err(|_| "shutting down".to_owned())?;
                    let verdict = self.reviewer.review(token, &self.audience).await?;
                    Ok((verdict, Instant::now()))
                })
                .await
                .map_err(|error: Arc<String>| (*error).clone())?;
            match reviewed.checked_add(VERDICT_TTL) {
                Some(until) if until > now => {
                    self.known.insert(key, (verdict.clone(), until));
                    return Ok(verdict);
                }
                _ => self.reviewed.invalidate(&key).await,
            }
        }
        Err("the token's verdict expired while it was reviewed".to_owned())
    }
}

/// How callers are authenticated: client certificates (checked by the TLS handshake), Bearer
/// tokens, or both.
#[derive(Debug)]
pub struct Auth {
    /// Whether a verified client certificate admits the caller (`--lookup-client-ca`).
    pub certificates: bool,
    /// `--lookup-token-audience`.
    pub tokens: Option<TokenAuth>,
}

impl Auth {
    /// Who sent a request with these headers, over a connection whose client certificate was
    /// `verified` (or not presented).
    pub async fn caller(&self, verified: bool, headers: &HeaderMap) -> Result<Caller, Refused> {
        if verified && self.certificates {
            return Ok(Caller::Certificate);
        }
        let Some(tokens) = &self.tokens else {
            return Err(Refused::Unauthenticated);
        };
        let Some(token) = bearer(headers) else {
            return Err(Refused::Unauthenticated);
        };
        match tokens.check(token).await {
            Ok(Verdict::Authenticated { username }) => Ok(Caller::Token(username)),
            Ok(Verdict::Rejected) => Err(Refused::Forbidden),
            Err(error) => Err(Refused::Unavailable(error)),
        }
    }
}

/// The token of `Authorization: Bearer TOKEN` (scheme case-insensitive), when it is one and not
/// absurdly long.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.as_bytes();
    if value.len() > MAX_TOKEN_BYTES {
        return None;
    }
    let value = std::str::from_utf8(value).ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// `good` is valid for `aud`; `down` cannot be checked; anything else is rejected.
    #[derive(Default)]
    struct Script {
        reviews: AtomicUsize,
    }

    impl TokenReviewer for Script {
        fn review<'a>(
            &'a self,
            token: &'a str,
            audience: &'a str,
        ) -> BoxFuture<'a, Result<Verdict, String>> {
            self.reviews.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                match (token, audience) {
                    ("good", "aud") => Ok(Verdict::Authenticated {
                        username: "system:serviceaccount:kyverno:kyverno".into(),
                    }),
                    ("down", _) => Err("the Kubernetes API failed".to_owned()),
                    _ => Ok(Verdict::Rejected),
                }
            })
        }
    }

    fn headers(authorization: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(value) = authorization {
            headers.insert(http::header::AUTHORIZATION, value.parse().unwrap());
        }
        headers
    }

    #[test]
    fn bearer_tokens() {
        assert_eq!(bearer(&headers(Some("Bearer abc"))), Some("abc"));
        assert_eq!(bearer(&headers(Some("bearer  abc "))), Some("abc"));
        for bad in [None, Some("Basic abc"), Some("Bearer "), Some("Bearer")] {
            assert_eq!(bearer(&headers(bad)), None, "{bad:?}");
        }
        let long = format!("Bearer {}", "a".repeat(MAX_TOKEN_BYTES));
        assert_eq!(bearer(&headers(Some(&long))), None);
    }

    /// Time is paused: a verdict is used for VERDICT_TTL after its review, then the token is
    /// reviewed again.
    #[tokio::test(start_paused = true)]
    async fn verdicts_expire() {
        let script = Arc::new(Script::default());
        let tokens = TokenAuth::new(script.clone(), "aud");
        let good = Verdict::Authenticated {
            username: "system:serviceaccount:kyverno:kyverno".into(),
        };
        assert_eq!(tokens.check("good").await, Ok(good.clone()));
        tokio::time::advance(VERDICT_TTL - Duration::from_secs(1)).await;
        assert_eq!(tokens.check("good").await, Ok(good.clone()));
        assert_eq!(script.reviews.load(Ordering::SeqCst), 1);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(tokens.check("good").await, Ok(good.clone()));
        assert_eq!(script.reviews.load(Ordering::SeqCst), 2);
        assert_eq!(tokens.check("good").await, Ok(good));
        assert_eq!(script.reviews.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn callers() {
        let script = Arc::new(Script::default());
        let both = Auth {
            certificates: true,
            tokens: Some(TokenAuth::new(script.clone(), "aud")),
        };
        assert_eq!(
            both.caller(true, &headers(None)).await,
            Ok(Caller::Certificate)
        );
        assert_eq!(
            both.caller(false, &headers(None)).await,
            Err(Refused::Unauthenticated)
        );
        assert_eq!(
            both.caller(false, &headers(Some("Bearer good"))).await,
            Ok(Caller::Token(
                "system:serviceaccount:kyverno:kyverno".into()
            ))
        );
        assert_eq!(
            both.caller(false, &headers(Some("Bearer bad"))).await,
            Err(Refused::Forbidden)
        );
        assert!(matches!(
            both.caller(false, &headers(Some("Bearer down"))).await,
            Err(Refused::Unavailable(_))
        ));
        // Verdicts are cached, failures to ask are not.
        assert_eq!(script.reviews.load(Ordering::SeqCst), 3);
        let _ = both.caller(false, &headers(Some("Bearer good"))).await;
        let _ = both.caller(false, &headers(Some("Bearer bad"))).await;
        let _ = both.caller(false, &headers(Some("Bearer down"))).await;
        assert_eq!(script.reviews.load(Ordering::SeqCst), 4);

        let tokens_only = Auth {
            certificates: false,
            tokens: None,
        };
        assert_eq!(
            tokens_only
                .caller(true, &headers(Some("Bearer good")))
                .await,
            Err(Refused::Unauthenticated)
        );
    }
}
