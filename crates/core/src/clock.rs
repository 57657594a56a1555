//! Time as a seam: what a cache with lifetimes asks "now" of. Production code holds
//! [`Clock::system`]; a test holds [`Clock::manual`] and moves it forward with
//! [`Clock::advance`], so a lifetime is tested without waiting for it on the real clock.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A source of [`Instant`]s. Cheap to clone; clones of a manual clock share its time.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// `None`: the system's monotonic clock. `Some`: a manual clock's offset from its start.
    manual: Option<Arc<Manual>>,
}

#[derive(Debug)]
struct Manual {
    start: Instant,
    offset: Mutex<Duration>,
}

impl Clock {
    /// The system's monotonic clock.
    pub fn system() -> Self {
        Self::default()
    }

    /// A clock that stands still until [`Clock::advance`] moves it (tests).
    pub fn manual() -> Self {
        Self {
            manual: Some(Arc::new(Manual {
                start: Instant::now(),
                offset: Mutex::new(Duration::ZERO),
            })),
        }
    }

    /// Now, by this clock.
    pub fn now(&self) -> Instant {
        match &self.manual {
            None => Instant::now(),
            Some(manual) => {
                let offset = *manual.offset.lock().unwrap_or_else(PoisonError::into_inner);
                manual.start.checked_add(offset).unwrap_or(manual.start)
            }
        }
    }

    /// Moves a manual clock forward by `by` (at most about 30 years in all); the system clock
    /// is not moved.
    pub fn advance(&self, by: Duration) {
        if let Some(manual) = &self.manual {
            let mut offset = manual.offset.lock().unwrap_or_else(PoisonError::into_inner);
            *offset = offset.saturating_add(by).min(FAR);
        }
    }

    /// `now + ttl`, or a far future when that does not fit an [`Instant`].
    pub fn expiry(&self, ttl: Duration) -> Instant {
        let now = self.now();
        now.checked_add(ttl)
            .or_else(|| now.checked_add(FAR))
            .unwrap_or(now)
    }
}

/// About 30 years: "never" for a lifetime too long to add to an [`Instant`].
const FAR: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_advanced_and_its_clones_share_it() {
        let clock = Clock::manual();
        let clone = clock.clone();
        let start = clock.now();
        assert_eq!(clock.now(), start);
        clone.advance(Duration::from_secs(5));
        assert_eq!(clock.now(), start + Duration::from_secs(5));
        assert_eq!(
            clock.expiry(Duration::from_secs(1)),
            start + Duration::from_secs(6)
        );
    }

    #[test]
    fn an_absurd_lifetime_does_not_overflow() {
        let clock = Clock::manual();
        assert!(clock.expiry(Duration::MAX) > clock.now());
        let before = clock.now();
        clock.advance(Duration::MAX);
        assert!(clock.now() > before, "time never goes back");
    }

    #[test]
    fn the_system_clock_is_not_moved() {
        let clock = Clock::system();
        let before = clock.now();
        clock.advance(Duration::from_secs(3600));
        assert!(clock.now() < before + Duration::from_secs(3600));
    }
}
