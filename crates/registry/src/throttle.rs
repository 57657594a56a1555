//! Per registry host: a client-side rate limiter (noe-core's token bucket, `--registry-qps` and
//! `--registry-burst`) and a circuit breaker. After a 429, or [`FAILURES_TO_OPEN`] 5xx in a row,
//! requests to that host fail at once, without being sent, until its `Retry-After` (at most
//! [`MAX_OPEN`]; [`DEFAULT_OPEN`] when it gives none) has passed; then requests go again, and the
//! next 5xx opens it at once. A rate-limited registry is then asked once per period instead of
//! by every admission.
//!
//! Hosts come from pod specs: the table holds at most [`MAX_HOSTS`]. When full, it forgets idle
//! hosts (breaker closed, no failure in a row, bucket full again), then the closed hosts used
//! least recently; an open breaker is never forgotten (a pod naming thousands of hosts must not
//! reopen a rate-limited registry). A host that finds the table full of open breakers is not
//! tracked: neither limited nor held back. Hosts are compared as written (`localhost:5000` and
//! `127.0.0.1:5000` are two hosts). Times are tokio instants, so tests can pause the clock.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use http::StatusCode;
use noe_core::bucket::TokenBucket;
use tokio::time::Instant;

use crate::budget::Context;
pub mod cause;

use crate::metrics::Metrics;
use crate::Error;
pub use cause::{Cause, FAILURES_TO_OPEN};

/// Longest a breaker stays open, whatever `Retry-After` says.
pub const MAX_OPEN: Duration = Duration::from_secs(300);
/// How long a breaker stays open when the registry gives no `Retry-After`.
pub const DEFAULT_OPEN: Duration = Duration::from_secs(10);
/// Registry hosts tracked at most.
pub const MAX_HOSTS: usize = 4096;

#[derive(Debug)]
struct Host {
    /// `None`: unlimited (`--registry-qps=0`).
    bucket: Option<TokenBucket>,
    /// 5xx answers in a row.
    failures: u32,
    open: Option<(Instant, Cause)>,
    /// Last asked about.
    seen: Instant,
}

/// The limiter and breaker of every registry host.
#[derive(Debug)]
pub struct Throttle {
    /// Requests per second per host; `None`: unlimited.
    qps: Option<f64>,
    burst: u32,
    hosts: Mutex<HashMap<String, Host>>,
    metrics: Metrics,
}

impl Throttle {
    /// `qps` requests per second per host (0: unlimited), bursts of up to `burst`.
    pub fn new(qps: f64, burst: u32, metrics: Metrics) -> Self {
        let qps = (qps.is_finite() && qps > 0.0).then_some(qps);
        Self {
            qps,
            burst: burst.max(1),
            hosts: Mutex::new(HashMap::new()),
            metrics,
        }
    }

    /// Before a request to `host` (`host[:port]`): fails at once while its breaker is open;
    /// else takes a token, waiting for one when the bucket is empty, unless the wait would be
    /// longer than `max_wait` (then fails at once too).
    pub async fn admit(&self, ctx: &Context, host: &str, max_wait: Duration) -> Result<(), Error> {
        let wait = {
            let now = Instant::now();
            let mut hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
            let Some(state) = self.host(&mut hosts, host, now) else {
                return Ok(());
            };
            if let Some((until, cause)) = state.open {
                if until > now {
                    drop(hosts);
                    self.count(ctx, "circuit_open");
                    return Err(Error::CircuitOpen {
                        reference: ctx.reference.clone(),
                        registry: ctx.registry.clone(),
                        cause,
                        retry_in_secs: until.duration_since(now).as_secs().saturating_add(1),
                    });
                }
            }
            let Some(bucket) = &mut state.bucket else {
                return Ok(());
            };
            match bucket.take_within(now.into_std(), max_wait) {
                Ok(Duration::ZERO) => return Ok(()),
                // Promised: the next token is this request's.
                Ok(wait) => wait,
                Err(_) => {
                    drop(hosts);
                    self.count(ctx, "rate_limited");
                    return Err(Error::RateLimited {
                        reference: ctx.reference.clone(),
                        registry: ctx.registry.clone(),
                    });
                }
            }
        };
        self.count(ctx, "delayed");
        tokio::time::sleep(wait).await;
        Ok(())
    }

    /// After an answer from `host`: a 429 opens its breaker for `retry_after` (capped), a 5xx
    /// counts towards opening it, anything else closes it.
    pub fn record(
        &self,
        ctx: &Context,
        host: &str,
        status: StatusCode,
        retry_after: Option<Duration>,
    ) {
        let now = Instant::now();
        let opened = 'opened: {
            let mut hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
            let Some(state) = self.host(&mut hosts, host, now) else {
                break 'opened None;
            };
            let cause = if status == StatusCode::TOO_MANY_REQUESTS {
                Some(Cause::TooManyRequests)
            } else if status.is_server_error() {
                state.failures = state.failures.saturating_add(1);
                (state.failures >= FAILURES_TO_OPEN).then_some(Cause::ServerErrors)
            } else {
                state.failures = 0;
                state.open = None;
                None
            };
            cause.map(|cause| {
                let open = retry_after.unwrap_or(DEFAULT_OPEN).min(MAX_OPEN);
                // `now + open` is within a few minutes of now: it cannot overflow.
                let until = now.checked_add(open).unwrap_or(now);
                let newly = state.open.is_none_or(|(was, _)| was <= now);
                state.open = Some((until, cause));
                (cause, newly)
            })
        };
        if let Some((cause, true)) = opened {
            tracing::warn!(registry = %ctx.registry, cause = cause.as_str(), "registry requests held back");
            self.metrics
                .circuit_opened
                .with_label_values(&[
                    self.metrics.registry_label(&ctx.registry).as_str(),
                    cause.as_str(),
                ])
                .inc();
        }
    }

    /// The state of `host`, created when new (a full table first forgets some closed hosts);
    /// `None` when the table is full of open breakers.
    fn host<'a>(
        &self,
        hosts: &'a mut HashMap<String, Host>,
        host: &str,
        now: Instant,
    ) -> Option<&'a mut Host> {
        if !hosts.contains_key(host) && hosts.len() >= MAX_HOSTS {
            self.evict(hosts, now);
            if hosts.len() >= MAX_HOSTS {
                return None;
            }
        }
        let state = hosts.entry(host.to_owned()).or_insert_with(|| Host {
            bucket: self
                .qps
                .map(|qps| TokenBucket::new(qps, self.burst, now.into_std())),
            failures: 0,
            open: None,
            seen: now,
        });
        state.seen = now;
        Some(state)
    }

    /// Forgets the idle hosts; if none is, the closed hosts used least recently (a quarter of
    /// the table). Open breakers stay.
    fn evict(&self, hosts: &mut HashMap<String, Host>, now: Instant) {
        let open = |h: &Host| h.open.is_some_and(|(until, _)| until > now);
        let full = |h: &Host| {
            h.bucket
                .as_ref()
                .is_none_or(|bucket| bucket.is_full(now.into_std()))
        };
        hosts.retain(|_, h| open(h) || h.failures > 0 || !full(h));
        if hosts.len() < MAX_HOSTS {
            return;
        }
        let mut closed: Vec<(Instant, String)> = hosts
            .iter()
            .filter(|(_, h)| !open(h))
            .map(|(name, h)| (h.seen, name.clone()))
            .collect();
        closed.sort_unstable();
        for (_, name) in closed.into_iter().take(MAX_HOSTS / 4) {
            hosts.remove(&name);
        }
    }

    fn count(&self, ctx: &Context, reason: &'static str) {
        self.metrics
            .throttled
            .with_label_values(&[self.metrics.registry_label(&ctx.registry).as_str(), reason])
            .inc();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "throttle/tests.rs"]
mod tests;
