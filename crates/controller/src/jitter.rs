//! Bounded random jitter for retry delays, so replicas (or watches) that failed together do not
//! retry in lockstep. The arithmetic is a pure function of a seed; [`seed`] draws one.

use std::hash::BuildHasher as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// `base` plus up to `spread` of it (`spread` 0.0 to 10.0; 1.2 gives `base..=2.2 * base`),
/// picked by `seed`. Never less than `base`, never more than `base * (1 + spread)`.
pub(crate) fn up(base: Duration, spread: f64, seed: u64) -> Duration {
    let spread = if spread.is_finite() {
        spread.clamp(0.0, 10.0)
    } else {
        0.0
    };
    // A fraction in [0, 1) from the seed's top 53 bits.
    let fraction = (seed >> 11) as f64 / (1u64 << 53) as f64;
    let extra = Duration::try_from_secs_f64(base.as_secs_f64() * spread * fraction)
        .unwrap_or(Duration::MAX);
    base.saturating_add(extra)
}

/// A fresh pseudo-random seed (std's per-process random hasher keys over a counter).
pub(crate) fn seed() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    std::collections::hash_map::RandomState::new().hash_one(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_its_bounds() {
        let base = Duration::from_secs(2);
        let cases = [
            (0.0, 0, base),
            (0.0, u64::MAX, base),
            (1.2, 0, base),
            (1.0, 1u64 << 63, Duration::from_secs(3)),
            (f64::NAN, u64::MAX, base),
            (-1.0, u64::MAX, base),
        ];
        for (spread, seed, want) in cases {
            assert_eq!(up(base, spread, seed), want, "{spread} {seed}");
        }
        for _ in 0..1000 {
            let got = up(base, 1.2, seed());
            assert!(got >= base && got <= base.mul_f64(2.2), "{got:?}");
        }
        // Huge values saturate instead of panicking.
        assert_eq!(up(Duration::MAX, 10.0, u64::MAX), Duration::MAX);
    }
}
