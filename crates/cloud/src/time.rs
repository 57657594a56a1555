//! Timestamps from the wire: RFC 3339 UTC (`2026-11-26T03:00:00Z`, STS and Pod Identity) and epoch
//! seconds (ECR's `expiresAt`), bounded so no input overflows.

use std::time::{Duration, SystemTime};

/// Latest accepted timestamp (year 9999), so arithmetic on it never overflows.
const MAX_EPOCH_SECONDS: u64 = 253_402_300_799;

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|+00:00)`; other offsets are refused (AWS answers in UTC).
pub(crate) fn parse_rfc3339_utc(s: &str) -> Option<SystemTime> {
    let s = s.trim();
    if s.len() > 40 || !s.is_ascii() {
        return None;
    }
    let rest = s.strip_suffix('Z').or_else(|| s.strip_suffix("+00:00"))?;
    let (date, time) = rest.split_once(['T', 't'])?;
    let time = time.split_once('.').map_or(time, |(whole, fraction)| {
        if fraction.bytes().all(|b| b.is_ascii_digit()) {
            whole
        } else {
            ""
        }
    });
    let mut d = date.splitn(3, '-');
    let year: i64 = digits(d.next()?, 4)?;
    let month: i64 = digits(d.next()?, 2)?;
    let day: i64 = digits(d.next()?, 2)?;
    let mut t = time.splitn(3, ':');
    let hour: i64 = digits(t.next()?, 2)?;
    let minute: i64 = digits(t.next()?, 2)?;
    let second: i64 = digits(t.next()?, 2)?;
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let seconds = days
        .checked_mul(86_400)?
        .checked_add(hour * 3600 + minute * 60 + second)?;
    from_epoch_seconds(u64::try_from(seconds).ok()? as f64)
}

/// Epoch seconds (fractional allowed) as a time; `None` for negative, NaN or absurd values.
pub(crate) fn from_epoch_seconds(seconds: f64) -> Option<SystemTime> {
    if !seconds.is_finite() || seconds < 0.0 || seconds > MAX_EPOCH_SECONDS as f64 {
        return None;
    }
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs_f64(seconds))
}

fn digits(s: &str, len: usize) -> Option<i64> {
    (s.len() == len && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epoch(s: u64) -> Option<SystemTime> {
        Some(SystemTime::UNIX_EPOCH + Duration::from_secs(s))
    }

    #[test]
    fn rfc3339_table() {
        let cases: &[(&str, Option<SystemTime>)] = &[
            ("1970-01-01T00:00:00Z", epoch(0)),
            ("2014-10-24T23:00:23Z", epoch(1_414_191_623)),
            ("2024-02-29T12:00:00.123Z", epoch(1_709_208_000)),
            ("2024-02-29T12:00:00+00:00", epoch(1_709_208_000)),
            ("2024-02-29 12:00:00Z", None),
            ("2024-02-29T12:00:00+02:00", None),
            ("2024-13-01T00:00:00Z", None),
            ("2024-01-01T24:00:00Z", None),
            ("1969-12-31T23:59:59Z", None),
            ("99999-01-01T00:00:00Z", None),
            ("", None),
            ("2024-01-01T00:00:00.x1Z", None),
            ("২০২৪-01-01T00:00:00Z", None),
        ];
        for (input, want) in cases {
            assert_eq!(parse_rfc3339_utc(input), *want, "{input}");
        }
    }

    #[test]
    fn epoch_seconds_are_bounded() {
        assert_eq!(from_epoch_seconds(1.5e9), epoch(1_500_000_000));
        assert_eq!(from_epoch_seconds(-1.0), None);
        assert_eq!(from_epoch_seconds(f64::NAN), None);
        assert_eq!(from_epoch_seconds(f64::INFINITY), None);
        assert_eq!(from_epoch_seconds(1e300), None);
    }
}
