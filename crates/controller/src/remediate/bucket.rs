//! A token bucket: at most `per_minute` evictions per minute, with a burst of `per_minute`.

use std::time::Duration;

use tokio::time::Instant;

/// The bucket; time is passed in so it is tested without a clock.
#[derive(Debug)]
pub struct Bucket {
    capacity: f64,
    per_second: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    /// A full bucket (`per_minute` ≥ 1; 0 is taken as 1).
    pub fn new(per_minute: u32, now: Instant) -> Self {
        let capacity = f64::from(per_minute.max(1));
        Self {
            capacity,
            per_second: capacity / 60.0,
            tokens: capacity,
            last: now,
        }
    }

    /// Takes a token, or says how long until one is there.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.capacity);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        let wait = (1.0 - self.tokens) / self.per_second;
        Err(Duration::try_from_secs_f64(wait).unwrap_or(Duration::from_secs(60)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_rate() {
        let t0 = Instant::now();
        let mut bucket = Bucket::new(3, t0);
        assert_eq!(bucket.take(t0), Ok(()));
        assert_eq!(bucket.take(t0), Ok(()));
        assert_eq!(bucket.take(t0), Ok(()));
        // Empty: one token every 20 s.
        assert_eq!(bucket.take(t0), Err(Duration::from_secs(20)));
        assert!(bucket.take(t0 + Duration::from_secs(19)).is_err());
        assert_eq!(bucket.take(t0 + Duration::from_secs(20)), Ok(()));
        // A long pause refills to the burst, not beyond.
        let later = t0 + Duration::from_secs(3600);
        for _ in 0..3 {
            assert_eq!(bucket.take(later), Ok(()));
        }
        assert!(bucket.take(later).is_err());
        // Time going backwards (never with Instant, but) does not add tokens.
        assert!(bucket.take(t0).is_err());
    }
}
