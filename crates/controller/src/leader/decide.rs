//! The pure part of an election round: given the Lease as read, what to write.

use std::time::Duration;

use tokio::time::Instant;

/// The longest lease duration honoured from the wire (a holder claiming more is treated as
/// holding for this long after our last observation of a change).
const MAX_HONOURED: Duration = Duration::from_secs(3600);

/// What we last saw of the lease record, and when (on our monotonic clock). Like client-go, we
/// judge expiry by when *we* observed the record change, not by its `renewTime`: clocks of
/// different nodes need not agree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Observed {
    /// `(holderIdentity, renewTime, leaseDurationSeconds)` as read.
    pub(crate) record: (String, String, i32),
    pub(crate) at: Instant,
}

/// The outcome of looking at a lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// Someone else holds it and it has not expired from our point of view.
    HeldByOther { holder: String },
    /// Write the lease with us as holder; `transitions` is the new `leaseTransitions`, and
    /// `acquire` says whether `acquireTime` is set to now (a new term) or kept.
    Write { transitions: i32, acquire: bool },
}

/// Decides a round: `holder`, `renew_time`, `duration_seconds`, `transitions` as read now,
/// `observed` what was seen before (updated here when the record changed).
pub(crate) fn decide(
    identity: &str,
    holder: &str,
    renew_time: &str,
    duration_seconds: i32,
    transitions: i32,
    observed: &mut Option<Observed>,
    now: Instant,
) -> Attempt {
    let record = (holder.to_owned(), renew_time.to_owned(), duration_seconds);
    let changed = observed.as_ref().is_none_or(|seen| seen.record != record);
    if changed {
        *observed = Some(Observed { record, at: now });
    }
    let ours = holder == identity;
    if !holder.is_empty() && !ours {
        let seen_at = observed.as_ref().map_or(now, |seen| seen.at);
        let duration =
            Duration::from_secs(u64::try_from(duration_seconds).unwrap_or(0)).min(MAX_HONOURED);
        let expired = seen_at.checked_add(duration).is_some_and(|end| end <= now);
        if !expired {
            return Attempt::HeldByOther {
                holder: holder.to_owned(),
            };
        }
    }
    Attempt::Write {
        transitions: if ours {
            transitions.max(0)
        } else {
            transitions.max(0).saturating_add(1)
        },
        acquire: !ours,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Case = (
        &'static str,
        &'static str,
        i32,
        i32,
        Option<Observed>,
        Instant,
        Attempt,
    );

    #[test]
    fn rounds() {
        let t0 = Instant::now();
        let secs = |n: u64| t0 + Duration::from_secs(n);
        // (holder, renew, duration, transitions, seen before, now) -> attempt
        let cases: Vec<Case> = vec![
            // Empty lease: take it, a new term.
            (
                "",
                "",
                0,
                0,
                None,
                t0,
                Attempt::Write {
                    transitions: 1,
                    acquire: true,
                },
            ),
            // Ours: renew, same term.
            (
                "me",
                "r1",
                15,
                4,
                None,
                t0,
                Attempt::Write {
                    transitions: 4,
                    acquire: false,
                },
            ),
            // Another holder, first seen now: wait.
            (
                "other",
                "r1",
                15,
                4,
                None,
                t0,
                Attempt::HeldByOther {
                    holder: "other".into(),
                },
            ),
            // Another holder, unchanged for 16 s of our clock: expired, take it.
            (
                "other",
                "r1",
                15,
                4,
                Some(Observed {
                    record: ("other".into(), "r1".into(), 15),
                    at: t0,
                }),
                secs(16),
                Attempt::Write {
                    transitions: 5,
                    acquire: true,
                },
            ),
            // Another holder that renewed meanwhile: the clock restarts.
            (
                "other",
                "r2",
                15,
                4,
                Some(Observed {
                    record: ("other".into(), "r1".into(), 15),
                    at: t0,
                }),
                secs(16),
                Attempt::HeldByOther {
                    holder: "other".into(),
                },
            ),
            // Hostile values: a negative duration is expired at once, transitions saturate.
            (
                "other",
                "r1",
                -5,
                i32::MAX,
                Some(Observed {
                    record: ("other".into(), "r1".into(), -5),
                    at: t0,
                }),
                secs(1),
                Attempt::Write {
                    transitions: i32::MAX,
                    acquire: true,
                },
            ),
            // A huge duration is honoured for at most an hour of unchanged record.
            (
                "other",
                "r1",
                i32::MAX,
                0,
                Some(Observed {
                    record: ("other".into(), "r1".into(), i32::MAX),
                    at: t0,
                }),
                secs(3601),
                Attempt::Write {
                    transitions: 1,
                    acquire: true,
                },
            ),
        ];
        for (i, (holder, renew, duration, transitions, mut seen, now, want)) in
            cases.into_iter().enumerate()
        {
            let got = decide("me", holder, renew, duration, transitions, &mut seen, now);
            assert_eq!(got, want, "case {i}");
            assert_eq!(
                seen.map(|s| s.record.0),
                Some(holder.to_owned()),
                "case {i}"
            );
        }
    }
}
