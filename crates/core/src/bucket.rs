//! The one token bucket: `rate` tokens per second up to `capacity`, time passed in (a pure
//! state machine: tests give it instants, never sleep). The registry throttle takes one per
//! request to a host (`--registry-qps`, `--registry-burst`), remediation one per eviction.

use std::time::{Duration, Instant};

/// The bucket.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    capacity: f64,
    /// Tokens per second.
    rate: f64,
    /// Tokens now (negative: tokens already promised to waiting callers).
    tokens: f64,
    refilled: Instant,
}

impl TokenBucket {
    /// A full bucket of `capacity` tokens (at least 1) refilled at `rate` per second (a rate
    /// that is not positive and finite is taken as one token per hour).
    pub fn new(rate: f64, capacity: u32, now: Instant) -> Self {
        let capacity = f64::from(capacity.max(1));
        let rate = if rate.is_finite() && rate > 0.0 {
            rate
        } else {
            1.0 / 3600.0
        };
        Self {
            capacity,
            rate,
            tokens: capacity,
            refilled: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.capacity);
        // Time never goes back here (an earlier `now` adds nothing).
        self.refilled = self.refilled.max(now);
    }

    /// Takes a token if one is there or will be within `max_wait`: `Ok(wait)`, the token is the
    /// caller's after `wait` (zero: now). Else `Err(wait)`, how long until one would be, and
    /// nothing is taken.
    pub fn take_within(&mut self, now: Instant, max_wait: Duration) -> Result<Duration, Duration> {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(Duration::ZERO);
        }
        let wait =
            Duration::try_from_secs_f64((1.0 - self.tokens) / self.rate).unwrap_or(Duration::MAX);
        if wait > max_wait {
            return Err(wait);
        }
        // Promised: the next token is this caller's.
        self.tokens -= 1.0;
        Ok(wait)
    }

    /// Takes a token now, or says how long until one is there (nothing taken).
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        self.take_within(now, Duration::ZERO).map(|_| ())
    }

    /// Whether the bucket is full again at `now` (nothing owed, nothing taken since).
    pub fn is_full(&self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens + elapsed * self.rate >= self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate() {
        let t0 = Instant::now();
        // Three per minute, a burst of three.
        let mut bucket = TokenBucket::new(3.0 / 60.0, 3, t0);
        for _ in 0..3 {
            assert_eq!(bucket.take(t0), Ok(()));
        }
        // Empty: one token every 20 s.
        assert_eq!(bucket.take(t0), Err(Duration::from_secs(20)));
        assert!(bucket.take(t0 + Duration::from_secs(19)).is_err());
        assert_eq!(bucket.take(t0 + Duration::from_secs(20)), Ok(()));
        assert!(!bucket.is_full(t0 + Duration::from_secs(20)));
        // A long pause refills to the burst, not beyond.
        let later = t0 + Duration::from_secs(3600);
        assert!(bucket.is_full(later));
        for _ in 0..3 {
            assert_eq!(bucket.take(later), Ok(()));
        }
        assert!(bucket.take(later).is_err());
        // Time going backwards adds no token.
        assert!(bucket.take(t0).is_err());
    }

    #[test]
    fn waits_are_promised_in_order_up_to_the_longest_accepted() {
        let t0 = Instant::now();
        // Ten per second, a burst of one.
        let mut bucket = TokenBucket::new(10.0, 1, t0);
        assert_eq!(bucket.take_within(t0, Duration::ZERO), Ok(Duration::ZERO));
        let ms = Duration::from_millis;
        // The next two callers are promised the next tokens, 100 ms apart.
        assert_eq!(bucket.take_within(t0, ms(250)), Ok(ms(100)));
        assert_eq!(bucket.take_within(t0, ms(250)), Ok(ms(200)));
        // A third would wait 300 ms: refused, and nothing is taken.
        assert_eq!(bucket.take_within(t0, ms(250)), Err(ms(300)));
        assert_eq!(bucket.take_within(t0, ms(300)), Ok(ms(300)));
        // Once the promises are paid, tokens flow at the rate again.
        assert!(!bucket.is_full(t0 + ms(300)));
        assert_eq!(
            bucket.take_within(t0 + ms(400), Duration::ZERO),
            Ok(Duration::ZERO)
        );
    }

    #[test]
    fn a_rate_that_is_not_one_is_an_hourly_token() {
        let t0 = Instant::now();
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let mut bucket = TokenBucket::new(rate, 0, t0);
            assert_eq!(bucket.take(t0), Ok(()), "{rate}: the burst is at least one");
            assert_eq!(bucket.take(t0), Err(Duration::from_secs(3600)), "{rate}");
        }
    }
}
