//! The lookup endpoint's metrics: `noe_lookup_requests_total{caller,result}`,
//! `noe_lookup_duration_seconds{caller}`, and of its Bearer tokens
//! `noe_lookup_token_refusals_total{reason}` and `noe_lookup_token_reviews_total{result}`; every
//! label value from the fixed sets below (the children are resolved once, at registration).

use std::sync::Arc;

use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts};

use super::token::Unfit;

/// The `caller` label: which route was asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Gatekeeper,
    Kyverno,
}

impl Engine {
    pub const ALL: [Self; 2] = [Self::Gatekeeper, Self::Kyverno];

    pub fn label(self) -> &'static str {
        match self {
            Self::Gatekeeper => "gatekeeper",
            Self::Kyverno => "kyverno",
        }
    }

    fn index(self) -> usize {
        match self {
            Self::Gatekeeper => 0,
            Self::Kyverno => 1,
        }
    }
}

/// The `result` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every key answered with its platforms.
    Ok,
    /// Some keys answered with an error.
    Partial,
    /// Every key answered with an error.
    Failed,
    /// Refused: not a request of the engine, too many keys, a wrong method (400, 405).
    Invalid,
    /// Refused: a body above 1 MiB, or not read in time (413, 408).
    TooLarge,
    /// No client certificate, no Bearer token (401).
    Unauthenticated,
    /// A token the Kubernetes API rejected (403).
    Forbidden,
    /// The token could not be checked (503): the TokenReview failed, or a new token came while
    /// `--lookup-token-review-qps` new tokens were being checked.
    Unavailable,
}

impl Outcome {
    pub const ALL: [Self; 8] = [
        Self::Ok,
        Self::Partial,
        Self::Failed,
        Self::Invalid,
        Self::TooLarge,
        Self::Unauthenticated,
        Self::Forbidden,
        Self::Unavailable,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Partial => "partial",
            Self::Failed => "failed",
            Self::Invalid => "invalid",
            Self::TooLarge => "too_large",
            Self::Unauthenticated => "unauthenticated",
            Self::Forbidden => "forbidden",
            Self::Unavailable => "unavailable",
        }
    }

    fn index(self) -> usize {
        match self {
            Self::Ok => 0,
            Self::Partial => 1,
            Self::Failed => 2,
            Self::Invalid => 3,
            Self::TooLarge => 4,
            Self::Unauthenticated => 5,
            Self::Forbidden => 6,
            Self::Unavailable => 7,
        }
    }
}

/// Why a Bearer token was refused (the `reason` label of `noe_lookup_token_refusals_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenRefusal {
    /// Refused for what it says of itself, without a TokenReview: `malformed`, `audience`,
    /// `expired`.
    Unfit(Unfit),
    /// Rejected by a TokenReview, now or remembered from one.
    Rejected,
    /// Not known, and not reviewed: `--lookup-token-review-qps` reached.
    Throttled,
}

impl TokenRefusal {
    const LABELS: [&'static str; 5] = ["malformed", "audience", "expired", "rejected", "throttled"];

    fn index(self) -> usize {
        match self {
            Self::Unfit(Unfit::Malformed) => 0,
            Self::Unfit(Unfit::Audience) => 1,
            Self::Unfit(Unfit::Expired) => 2,
            Self::Rejected => 3,
            Self::Throttled => 4,
        }
    }
}

/// What a TokenReview answered (the `result` label of `noe_lookup_token_reviews_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokenReview {
    Authenticated,
    Rejected,
    /// The review itself failed (the API unreachable, an error answer).
    Failed,
}

impl TokenReview {
    const LABELS: [&'static str; 3] = ["authenticated", "rejected", "failed"];

    fn index(self) -> usize {
        match self {
            Self::Authenticated => 0,
            Self::Rejected => 1,
            Self::Failed => 2,
        }
    }
}

/// The Bearer tokens' counters; cheap to clone. Counts nothing when unregistered.
#[derive(Clone, Debug, Default)]
pub struct TokenMetrics(Option<Arc<TokenCounters>>);

#[derive(Debug)]
struct TokenCounters {
    refusals: [IntCounter; 5],
    /// `authenticated`, `rejected`, `failed`.
    reviews: [IntCounter; 3],
}

impl TokenMetrics {
    /// Counters registered nowhere (tests, benches).
    pub fn unregistered() -> Self {
        Self(None)
    }

    pub(crate) fn refused(&self, refusal: TokenRefusal) {
        if let Some(counter) = self
            .0
            .as_ref()
            .and_then(|c| c.refusals.get(refusal.index()))
        {
            counter.inc();
        }
    }

    pub(crate) fn reviewed(&self, review: TokenReview) {
        if let Some(counter) = self.0.as_ref().and_then(|c| c.reviews.get(review.index())) {
            counter.inc();
        }
    }
}

/// The endpoint's metrics. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Metrics {
    requests: [[IntCounter; 8]; 2],
    duration: [Histogram; 2],
    tokens: TokenMetrics,
}

impl Metrics {
    /// Registers the metrics on `registry`.
    pub fn register(registry: &prometheus::Registry) -> Result<Self, prometheus::Error> {
        let requests = IntCounterVec::new(
            Opts::new(
                "noe_lookup_requests_total",
                "Requests to the policy engines' lookup endpoint, by route (caller) and result.",
            ),
            &["caller", "result"],
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "noe_lookup_duration_seconds",
                "Time to answer a request of the policy engines' lookup endpoint, by route (caller).",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0,
            ]),
            &["caller"],
        )?;
        let refusals = IntCounterVec::new(
            Opts::new(
                "noe_lookup_token_refusals_total",
                "Bearer tokens the lookup endpoint refused, by reason: malformed, audience, expired (without a TokenReview), rejected (by a TokenReview, now or remembered), throttled (a new token beyond --lookup-token-review-qps)",
            ),
            &["reason"],
        )?;
        let reviews = IntCounterVec::new(
            Opts::new(
                "noe_lookup_token_reviews_total",
                "TokenReviews the lookup endpoint asked for, by result: authenticated, rejected, failed",
            ),
            &["result"],
        )?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        registry.register(Box::new(refusals.clone()))?;
        registry.register(Box::new(reviews.clone()))?;
        let tokens = TokenMetrics(Some(Arc::new(TokenCounters {
            refusals: TokenRefusal::LABELS.map(|reason| refusals.with_label_values(&[reason])),
            reviews: TokenReview::LABELS.map(|result| reviews.with_label_values(&[result])),
        })));
        let per_engine = |engine: Engine| {
            Outcome::ALL
                .map(|outcome| requests.with_label_values(&[engine.label(), outcome.label()]))
        };
        Ok(Self {
            requests: Engine::ALL.map(per_engine),
            duration: Engine::ALL.map(|engine| duration.with_label_values(&[engine.label()])),
            tokens,
        })
    }

    /// The Bearer tokens' counters, for [`super::TokenAuth::with_metrics`].
    pub fn tokens(&self) -> TokenMetrics {
        self.tokens.clone()
    }

    /// Counts one request and its duration.
    pub fn observe(&self, engine: Engine, outcome: Outcome, seconds: f64) {
        if let Some(counter) = self
            .requests
            .get(engine.index())
            .and_then(|row| row.get(outcome.index()))
        {
            counter.inc();
        }
        if let Some(histogram) = self.duration.get(engine.index()) {
            histogram.observe(seconds);
        }
    }
}
