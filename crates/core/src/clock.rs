//! Time as a seam: what a cache with lifetimes asks "now" of. Production code holds
//! [`Clock::system`]; a test holds [`Clock::manual`] and moves it forward with
//! [`Clock::advance`], so a lifetime is tested without waiting for it on the real clock.
//!
//! Two readings: [`Clock::now`] is monotonic (lifetimes measured from here), [`Clock::wall`] is
//! wall time (absolute expiries announced by someone else, like a cloud token's). A manual clock
//! moves both together; its wall reading can also be stepped on its own ([`Clock::set_wall`]),
//! the way NTP steps a real one.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

/// A source of [`Instant`]s and wall times. Cheap to clone; clones of a manual clock share its
/// time.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// `None`: the system's monotonic clock. `Some`: a manual clock's offset from its start.
    manual: Option<Arc<Manual>>,
}

#[derive(Debug)]
struct Manual {
    start: Instant,
    time: Mutex<ManualTime>,
}

#[derive(Debug)]
struct ManualTime {
    /// How far the clock was advanced since `start`.
    offset: Duration,
    /// The wall time now.
    wall: SystemTime,
}

impl Clock {
    /// The system's monotonic clock.
    pub fn system() -> Self {
        Self::default()
    }

    /// A clock that stands still until [`Clock::advance`] moves it (tests), its wall reading
    /// starting at the system's wall time.
    pub fn manual() -> Self {
        Self::manual_at(SystemTime::now())
    }

    /// [`Clock::manual`], its wall reading starting at `wall`.
    pub fn manual_at(wall: SystemTime) -> Self {
        Self {
            manual: Some(Arc::new(Manual {
                start: Instant::now(),
                time: Mutex::new(ManualTime {
                    offset: Duration::ZERO,
                    wall,
                }),
            })),
        }
    }

    /// Now, by this clock (monotonic).
    pub fn now(&self) -> Instant {
        match &self.manual {
            None => Instant::now(),
            Some(manual) => {
                let offset = manual.time().offset;
                manual.start.checked_add(offset).unwrap_or(manual.start)
            }
        }
    }

    /// The wall time now, by this clock (it may go back when the system's is stepped).
    pub fn wall(&self) -> SystemTime {
        match &self.manual {
            None => SystemTime::now(),
            Some(manual) => manual.time().wall,
        }
    }

    /// Moves a manual clock forward by `by` (at most about 30 years in all), both readings;
    /// the system clock is not moved.
    pub fn advance(&self, by: Duration) {
        if let Some(manual) = &self.manual {
            let mut time = manual.time();
            let before = time.offset;
            time.offset = before.saturating_add(by).min(FAR);
            let moved = time.offset.saturating_sub(before);
            time.wall = time.wall.checked_add(moved).unwrap_or(time.wall);
        }
    }

    /// Steps a manual clock's wall reading to `to` (forwards or back), its monotonic reading
    /// staying where it is; the system clock is not moved.
    pub fn set_wall(&self, to: SystemTime) {
        if let Some(manual) = &self.manual {
            manual.time().wall = to;
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

impl Manual {
    fn time(&self) -> std::sync::MutexGuard<'_, ManualTime> {
        self.time.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// About 30 years: "never" for a lifetime too long to add to an [`Instant`].
const FAR: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

#[cfg(test)]
mod tests;
