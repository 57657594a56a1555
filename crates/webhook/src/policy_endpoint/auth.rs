//! Who may ask: a caller that presented a client certificate the TLS handshake verified against
//! `--lookup-client-ca` (Gatekeeper presents its webhook certificate), or one whose Bearer
//! token the Kubernetes API accepts for `--lookup-token-audience` (a TokenReview; Kyverno ≥1.18
//! sends its projected token). A caller with neither gets nothing: 401 without credentials,
//! 403 with a token the API rejects (or would: [`token::precheck`]), 503 when the API cannot say
//! or too many new tokens are being checked.
//!
//! A token is first read for what it says of itself: one that is not a JWT, is not meant for the
//! audience or has expired is refused without a TokenReview. Accepted verdicts are cached by the
//! token's SHA-256 (never the token itself) for [`VERDICT_TTL`] after their review (and never
//! past the token's `exp`), at most [`MAX_VERDICTS`] of them; rejected ones apart, at most
//! [`MAX_REJECTED`], so rejected tokens never push accepted ones out. A cached verdict is read
//! without waiting (the warm path of every request). Reviews of tokens not known are limited to
//! `--lookup-token-review-qps` (a token bucket; beyond: 503 at once), at most [`MAX_REVIEWS`] in
//! flight, and concurrent checks of one token share one review; a token accepted before is
//! reviewed again when its verdict ends without waiting for either bound, so a flood of new
//! tokens never delays a caller already known. Refusals are counted by class
//! ([`super::metrics::TokenMetrics`]).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use http::HeaderMap;
use noe_core::bucket::TokenBucket;
use sha2::{Digest as _, Sha256};
use tokio::time::Instant;

use super::metrics::{TokenMetrics, TokenRefusal, TokenReview};
use super::token::{self, EXPIRY_LEEWAY_SECS};

/// How long a TokenReview's verdict is reused: a revoked token keeps access at most this long.
pub const VERDICT_TTL: Duration = Duration::from_secs(60);
/// Verdicts cached at most.
pub const MAX_VERDICTS: u64 = 4096;
/// TokenReviews in flight at most.
pub const MAX_REVIEWS: usize = 16;
/// Longer Authorization headers are refused unread (a projected token is about 1 KiB).
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// Rejected verdicts cached at most, apart from the accepted ones.
pub const MAX_REJECTED: usize = 4096;
/// TokenReviews of tokens not known, per second (`--lookup-token-review-qps`), by default.
pub const DEFAULT_REVIEWS_PER_SECOND: f64 = 20.0;

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
    /// A token not known, while `--lookup-token-review-qps` new tokens a second are checked
    /// already (503, `Retry-After: 1`).
    #[error("too many new Bearer tokens to check; retry")]
    Throttled,
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
    /// Accepted tokens: who, and until when, read with one table probe. An entry past its time
    /// still says the token was accepted (its review again skips the bounds on new tokens).
    known: quick_cache::sync::Cache<[u8; 32], (Arc<str>, Instant)>,
    /// Rejected tokens, until when.
    rejected: quick_cache::sync::Cache<[u8; 32], Instant>,
    /// Where checks of one token share its one TokenReview: the verdict and when it was given.
    reviewed: moka::future::Cache<[u8; 32], (Verdict, Instant)>,
    reviews: tokio::sync::Semaphore,
    /// Reviews of tokens not known.
    rate: Mutex<TokenBucket>,
    metrics: TokenMetrics,
}

impl std::fmt::Debug for TokenAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenAuth")
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

/// Why a review was not had.
#[derive(Debug)]
enum NoReview {
    Throttled,
    Unavailable(String),
}

/// `per_second` reviews a second (at least one an hour), bursts of as many.
fn bucket(per_second: f64) -> TokenBucket {
    let burst = if per_second.is_finite() && per_second >= 1.0 {
        u32::try_from(per_second.ceil() as u64).unwrap_or(u32::MAX)
    } else {
        1
    };
    TokenBucket::new(per_second, burst, Instant::now().into_std())
}

impl TokenAuth {
    /// Tokens checked for `audience` by `reviewer`: [`DEFAULT_REVIEWS_PER_SECOND`] reviews of
    /// new tokens a second, counted nowhere until [`TokenAuth::with_metrics`].
    pub fn new(reviewer: Arc<dyn TokenReviewer>, audience: impl Into<String>) -> Self {
        Self {
            reviewer,
            audience: audience.into(),
            known: quick_cache::sync::Cache::new(
                usize::try_from(MAX_VERDICTS).unwrap_or(usize::MAX),
            ),
            rejected: quick_cache::sync::Cache::new(MAX_REJECTED),
            reviewed: moka::future::Cache::builder()
                .max_capacity(MAX_VERDICTS)
                .time_to_live(VERDICT_TTL)
                .build(),
            reviews: tokio::sync::Semaphore::new(MAX_REVIEWS),
            rate: Mutex::new(bucket(DEFAULT_REVIEWS_PER_SECOND)),
            metrics: TokenMetrics::unregistered(),
        }
    }

    /// At most `per_second` TokenReviews of tokens not known a second (bursts of as many).
    pub fn with_reviews_per_second(mut self, per_second: f64) -> Self {
        self.rate = Mutex::new(bucket(per_second));
        self
    }

    /// Counts refusals and reviews in `metrics`.
    pub fn with_metrics(mut self, metrics: TokenMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Who `token` is: its cached verdict, else what it says of itself and then one TokenReview
    /// (shared by concurrent callers; bounded for tokens not known). Failures to ask are not
    /// cached.
    pub async fn check(&self, token: &str) -> Result<Arc<str>, Refused> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        let renewal = match self.known.get(&key) {
            Some((username, until)) if until > now => return Ok(username),
            Some(_) => true,
            None => false,
        };
        let exp = match token::precheck(token, &self.audience, unix_now()) {
            Ok(exp) => exp,
            Err(unfit) => return Err(self.refused(TokenRefusal::Unfit(unfit))),
        };
        if self.rejected.get(&key).is_some_and(|until| until > now) {
            return Err(self.refused(TokenRefusal::Rejected));
        }
        // Used for VERDICT_TTL from its review, whichever cache it is read from: one the shared
        // cache still holds past that is dropped and the token reviewed again.
        for _ in 0..2 {
            let reviewed = self
                .reviewed
                .try_get_with(key, self.review(token, renewal))
                .await;
            let (verdict, reviewed) = match reviewed {
                Ok(reviewed) => reviewed,
                Err(error) => {
                    return Err(match &*error {
                        NoReview::Throttled => self.refused(TokenRefusal::Throttled),
                        NoReview::Unavailable(why) => Refused::Unavailable(why.clone()),
                    })
                }
            };
            match reviewed.checked_add(VERDICT_TTL) {
                Some(until) if until > now => {
                    return match verdict {
                        Verdict::Authenticated { username } => {
                            // Never past the token's own end (the API server's leeway included).
                            let until = match exp.and_then(|exp| end_of(exp, now)) {
                                Some(end) => until.min(end),
                                None => until,
                            };
                            self.known.insert(key, (username.clone(), until));
                            Ok(username)
                        }
                        Verdict::Rejected => {
                            self.rejected.insert(key, until);
                            Err(self.refused(TokenRefusal::Rejected))
                        }
                    };
                }
                _ => self.reviewed.invalidate(&key).await,
            }
        }
        Err(Refused::Unavailable(
            "the token's verdict expired while it was reviewed".to_owned(),
        ))
    }

    /// One TokenReview of `token`. A token not accepted before takes a token of the rate (else
    /// it is throttled at once) and one of the [`MAX_REVIEWS`] slots; a `renewal` (a token
    /// accepted before, whose verdict ended) waits for neither.
    async fn review(&self, token: &str, renewal: bool) -> Result<(Verdict, Instant), NoReview> {
        let _slot = if renewal {
            None
        } else {
            let admitted = self
                .rate
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(Instant::now().into_std())
                .is_ok();
            if !admitted {
                return Err(NoReview::Throttled);
            }
            Some(
                self.reviews
                    .acquire()
                    .await
                    .map_err(|_| NoReview::Unavailable("shutting down".to_owned()))?,
            )
        };
        let verdict = self.reviewer.review(token, &self.audience).await;
        self.metrics.reviewed(match &verdict {
            Ok(Verdict::Authenticated { .. }) => TokenReview::Authenticated,
            Ok(Verdict::Rejected) => TokenReview::Rejected,
            Err(_) => TokenReview::Failed,
        });
        Ok((verdict.map_err(NoReview::Unavailable)?, Instant::now()))
    }

    fn refused(&self, refusal: TokenRefusal) -> Refused {
        self.metrics.refused(refusal);
        match refusal {
            TokenRefusal::Throttled => Refused::Throttled,
            TokenRefusal::Unfit(_) | TokenRefusal::Rejected => Refused::Forbidden,
        }
    }
}

/// Seconds since the epoch.
fn unix_now() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
}

/// The instant (on the clock of `now`) at which the API server stops accepting a token whose
/// `exp` is `exp`; `None` beyond what the clock can say.
fn end_of(exp: i64, now: Instant) -> Option<Instant> {
    let left = exp
        .saturating_add(EXPIRY_LEEWAY_SECS)
        .saturating_sub(unix_now());
    now.checked_add(Duration::from_secs(u64::try_from(left).unwrap_or(0)))
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
        tokens.check(token).await.map(Caller::Token)
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
    use noe_test_support::service_account_token;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const KYVERNO: &str = "system:serviceaccount:kyverno:kyverno";

    /// The token of `name` for `aud`, valid for an hour.
    /// The same token for `name` throughout the test process: its `exp` is fixed once (a token
    /// made again a wall-clock second later would be another token, and the reviewer below
    /// tells tokens apart by comparing them with `jwt`).
    fn jwt(name: &str) -> String {
        static EXP: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
        service_account_token(name, &["aud"], *EXP.get_or_init(|| unix_now() + 3600))
    }

    /// `jwt("good")` is valid for `aud`; `jwt("down")` cannot be checked; anything else is
    /// rejected.
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
                if token == jwt("good") && audience == "aud" {
                    Ok(Verdict::Authenticated {
                        username: KYVERNO.into(),
                    })
                } else if token == jwt("down") {
                    Err("the Kubernetes API failed".to_owned())
                } else {
                    Ok(Verdict::Rejected)
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

    fn bearer_of(name: &str) -> HeaderMap {
        headers(Some(&format!("Bearer {}", jwt(name))))
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
        let good = jwt("good");
        assert_eq!(tokens.check(&good).await, Ok(KYVERNO.into()));
        tokio::time::advance(VERDICT_TTL - Duration::from_secs(1)).await;
        assert_eq!(tokens.check(&good).await, Ok(KYVERNO.into()));
        assert_eq!(script.reviews.load(Ordering::SeqCst), 1);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(tokens.check(&good).await, Ok(KYVERNO.into()));
        assert_eq!(script.reviews.load(Ordering::SeqCst), 2);
        assert_eq!(tokens.check(&good).await, Ok(KYVERNO.into()));
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
            both.caller(false, &bearer_of("good")).await,
            Ok(Caller::Token(KYVERNO.into()))
        );
        assert_eq!(
            both.caller(false, &bearer_of("bad")).await,
            Err(Refused::Forbidden)
        );
        assert!(matches!(
            both.caller(false, &bearer_of("down")).await,
            Err(Refused::Unavailable(_))
        ));
        // Verdicts are cached, failures to ask are not.
        assert_eq!(script.reviews.load(Ordering::SeqCst), 3);
        let _ = both.caller(false, &bearer_of("good")).await;
        let _ = both.caller(false, &bearer_of("bad")).await;
        let _ = both.caller(false, &bearer_of("down")).await;
        assert_eq!(script.reviews.load(Ordering::SeqCst), 4);
        // What no review could accept is refused without one.
        let other_audience = service_account_token("good", &["other"], unix_now() + 3600);
        let expired = service_account_token("good", &["aud"], unix_now() - 3600);
        for refused in [
            "Bearer kyverno-token",
            &format!("Bearer {other_audience}"),
            &format!("Bearer {expired}"),
        ] {
            assert_eq!(
                both.caller(false, &headers(Some(refused))).await,
                Err(Refused::Forbidden),
                "{refused}"
            );
        }
        assert_eq!(script.reviews.load(Ordering::SeqCst), 4);

        let tokens_only = Auth {
            certificates: false,
            tokens: None,
        };
        assert_eq!(
            tokens_only.caller(true, &bearer_of("good")).await,
            Err(Refused::Unauthenticated)
        );
    }

    /// Time is paused: 200 new tokens in one second get 20 reviews (the rest are throttled at
    /// once), a token accepted before is answered from its verdict meanwhile, and reviewed again
    /// when its verdict ends whatever the flood.
    #[tokio::test(start_paused = true)]
    async fn new_tokens_are_throttled_and_never_delay_a_known_one() {
        let script = Arc::new(Script::default());
        let tokens = TokenAuth::new(script.clone(), "aud");
        let good = jwt("good");
        assert_eq!(tokens.check(&good).await, Ok(KYVERNO.into()));
        assert_eq!(script.reviews.load(Ordering::SeqCst), 1);
        tokio::time::advance(Duration::from_secs(1)).await;
        let mut throttled = 0;
        for i in 0..200 {
            match tokens.check(&jwt(&format!("stranger-{i}"))).await {
                Err(Refused::Forbidden) => {}
                Err(Refused::Throttled) => throttled += 1,
                other => panic!("{other:?}"),
            }
            assert_eq!(tokens.check(&good).await, Ok(KYVERNO.into()));
        }
        assert_eq!(script.reviews.load(Ordering::SeqCst), 1 + 20);
        assert_eq!(throttled, 180);
        // The rejected are remembered: asked again, no review.
        assert_eq!(
            tokens.check(&jwt("stranger-0")).await,
            Err(Refused::Forbidden)
        );
        assert_eq!(script.reviews.load(Ordering::SeqCst), 1 + 20);
        // The bucket is empty; the known token's verdict ends: it is reviewed at once.
        tokio::time::advance(VERDICT_TTL).await;
        for i in 200..240 {
            let _ = tokens.check(&jwt(&format!("stranger-{i}"))).await;
        }
        let reviews = script.reviews.load(Ordering::SeqCst);
        assert_eq!(tokens.check(&good).await, Ok(KYVERNO.into()));
        assert_eq!(script.reviews.load(Ordering::SeqCst), reviews + 1);
    }

    /// Time is paused: more rejected tokens than the caches hold never push an accepted one out.
    #[tokio::test(start_paused = true)]
    async fn rejected_tokens_never_evict_an_accepted_one() {
        let script = Arc::new(Script::default());
        let tokens = TokenAuth::new(script.clone(), "aud").with_reviews_per_second(1000.0);
        let good = jwt("good");
        assert_eq!(tokens.check(&good).await, Ok(KYVERNO.into()));
        for i in 0..2 * MAX_REJECTED {
            if i % 1000 == 0 {
                tokio::time::advance(Duration::from_millis(1100)).await;
            }
            let _ = tokens.check(&jwt(&format!("stranger-{i}"))).await;
        }
        let reviews = script.reviews.load(Ordering::SeqCst);
        assert_eq!(tokens.check(&good).await, Ok(KYVERNO.into()));
        assert_eq!(script.reviews.load(Ordering::SeqCst), reviews);
    }

    /// A token accepted within the API server's leeway after its `exp` is not remembered past it.
    #[tokio::test]
    async fn an_accepted_verdict_ends_with_its_token() {
        let tokens = TokenAuth::new(Arc::new(AcceptsAll), "aud");
        let late = service_account_token("late", &["aud"], unix_now() - 30);
        assert_eq!(tokens.check(&late).await, Ok("late".into()));
        let key: [u8; 32] = Sha256::digest(late.as_bytes()).into();
        let (_, until) = tokens.known.get(&key).unwrap();
        assert!(
            until <= Instant::now() + Duration::from_secs(31),
            "{until:?}"
        );
    }

    struct AcceptsAll;

    impl TokenReviewer for AcceptsAll {
        fn review<'a>(
            &'a self,
            _token: &'a str,
            _audience: &'a str,
        ) -> BoxFuture<'a, Result<Verdict, String>> {
            Box::pin(async {
                Ok(Verdict::Authenticated {
                    username: "late".into(),
                })
            })
        }
    }
}
