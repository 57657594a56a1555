//! Durations in Go's `time.ParseDuration` syntax (`5s`, `1h30m`, `1.5h`, `500ms`, `10us`, `+3s`,
//! `0`), as noe's flags and Kubernetes `metav1.Duration` fields write them.
//!
//! The arithmetic is Go's: integers in nanoseconds, a fraction scaled exactly enough for
//! nanosecond accuracy, and the same maximum (2^63 - 1 ns, about 292 years). Negative durations
//! are refused (a zero with a sign is zero).

use std::time::Duration;

/// Longest text quoted back in an error.
const QUOTED_MAX: usize = 64;
/// Go's `time.Duration` is an `int64` of nanoseconds.
const MAX_NANOS: u64 = i64::MAX as u64;
/// The bound Go's accumulators check against (one above the largest positive duration).
const ACCUMULATOR_MAX: u64 = 1 << 63;

/// Why a duration was refused. The text is quoted (cut to 64 characters).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    #[error("invalid duration {text:?}: {reason} (expected e.g. 5s, 500ms, 1m30s, 1h)")]
    Invalid { text: String, reason: &'static str },
    #[error("invalid duration {text:?}: negative durations are not allowed")]
    Negative { text: String },
    #[error("invalid duration {text:?}: longer than the largest Go duration (about 292 years)")]
    Overflow { text: String },
}

fn quoted(text: &str) -> String {
    text.chars().take(QUOTED_MAX).collect()
}

/// Nanoseconds per unit.
fn unit(name: &str) -> Option<u64> {
    Some(match name {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// Parses a non-negative Go duration.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(noe_credentials::duration::parse("1h30m"), Ok(Duration::from_secs(5400)));
/// assert_eq!(noe_credentials::duration::parse("1.5h"), Ok(Duration::from_secs(5400)));
/// assert!(noe_credentials::duration::parse("-1s").is_err());
/// ```
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let invalid = |reason| DurationError::Invalid {
        text: quoted(text),
        reason,
    };
    let overflow = || DurationError::Overflow { text: quoted(text) };
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid("empty"));
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        if !rest.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return Err(invalid("expected a number"));
        }
        let (whole, after) = leading_int(rest).ok_or_else(overflow)?;
        let had_whole = after.len() != rest.len();
        rest = after;
        let (mut fraction, mut scale, mut had_fraction) = (0, 1.0, false);
        if let Some(after_dot) = rest.strip_prefix('.') {
            let (f, s, after) = leading_fraction(after_dot);
            had_fraction = after.len() != after_dot.len();
            (fraction, scale, rest) = (f, s, after);
        }
        if !had_whole && !had_fraction {
            return Err(invalid("a number needs digits"));
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        if unit_len == 0 {
            return Err(invalid("missing unit"));
        }
        let nanos_per_unit = unit(&rest[..unit_len]).ok_or_else(|| invalid("unknown unit"))?;
        rest = &rest[unit_len..];
        let mut value = whole
            .checked_mul(nanos_per_unit)
            .filter(|v| *v <= ACCUMULATOR_MAX)
            .ok_or_else(overflow)?;
        if fraction > 0 {
            // As Go: float64 is exact enough for nanoseconds of fractions of an hour. The cast
            // saturates; the sum is checked below.
            let part = (fraction as f64 * (nanos_per_unit as f64 / scale)) as u64;
            value = value
                .checked_add(part)
                .filter(|v| *v <= ACCUMULATOR_MAX)
                .ok_or_else(overflow)?;
        }
        total = total
            .checked_add(value)
            .filter(|v| *v <= ACCUMULATOR_MAX)
            .ok_or_else(overflow)?;
    }
    if negative && total > 0 {
        return Err(DurationError::Negative { text: quoted(text) });
    }
    if total > MAX_NANOS {
        return Err(overflow());
    }
    Ok(Duration::from_nanos(total))
}

/// The leading `[0-9]*` of `text` and the rest; `None` on overflow.
fn leading_int(text: &str) -> Option<(u64, &str)> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let mut value: u64 = 0;
    for digit in text.bytes().take(digits) {
        value = value
            .checked_mul(10)?
            .checked_add(u64::from(digit - b'0'))
            .filter(|v| *v <= ACCUMULATOR_MAX)?;
    }
    Some((value, &text[digits..]))
}

/// The leading `[0-9]*` of a fraction as `(digits, 10^count, rest)`; digits past what a `u64`
/// holds are skipped (they are below a nanosecond), as Go does.
fn leading_fraction(text: &str) -> (u64, f64, &str) {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (mut value, mut scale) = (0u64, 1.0f64);
    for digit in text.bytes().take(digits) {
        match value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(digit - b'0')))
            .filter(|v| *v < ACCUMULATOR_MAX)
        {
            Some(next) => {
                value = next;
                scale *= 10.0;
            }
            None => break,
        }
    }
    (value, scale, &text[digits..])
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn accepted() {
        let cases: &[(&str, Duration)] = &[
            ("0", Duration::ZERO),
            ("+0", Duration::ZERO),
            ("-0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("-0s", Duration::ZERO),
            ("5s", Duration::from_secs(5)),
            ("90s", Duration::from_secs(90)),
            ("1h", Duration::from_secs(3600)),
            ("12h", Duration::from_secs(12 * 3600)),
            ("1h30m", Duration::from_secs(5400)),
            ("1h0m0s", Duration::from_secs(3600)),
            ("1m30s", Duration::from_secs(90)),
            ("2h45m", Duration::from_secs(2 * 3600 + 45 * 60)),
            ("1.5h", Duration::from_secs(5400)),
            ("1.5s", Duration::from_millis(1500)),
            (".5s", Duration::from_millis(500)),
            ("5.s", Duration::from_secs(5)),
            ("500ms", Duration::from_millis(500)),
            ("10us", Duration::from_micros(10)),
            ("10\u{b5}s", Duration::from_micros(10)),
            ("10\u{3bc}s", Duration::from_micros(10)),
            ("7ns", Duration::from_nanos(7)),
            ("+3s", Duration::from_secs(3)),
            ("+5m", Duration::from_secs(300)),
            ("1h1m1s1ms1us1ns", Duration::new(3661, 1_001_001)),
            // Go: 1.0000000001s is 1s plus a tenth of a nanosecond, truncated.
            ("1.0000000001s", Duration::from_secs(1)),
            // Digits beyond what a u64 holds are ignored, as in Go.
            ("0.100000000000000000000h", Duration::from_secs(360)),
            // The largest Go duration.
            (
                "9223372036854775807ns",
                Duration::from_nanos(i64::MAX as u64),
            ),
            (
                "2562047h47m16.854775807s",
                Duration::from_nanos(i64::MAX as u64),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text), Ok(*want), "{text}");
        }
    }

    #[test]
    fn refused() {
        let invalid = [
            "", "+", "-", "5", "s", "h", ".", ".s", "5d", "5x", "1e3s", "1.2.3s", "5 s", " 5s",
            "5s ", "1h-5m", "3h.", "--5s", "+-5s", "0x10s",
        ];
        for text in invalid {
            assert!(
                matches!(parse(text), Err(DurationError::Invalid { .. })),
                "{text:?}: {:?}",
                parse(text)
            );
        }
        for text in ["-1s", "-5m", "-0.5s", "-1ns"] {
            assert!(
                matches!(parse(text), Err(DurationError::Negative { .. })),
                "{text:?}"
            );
        }
        for text in [
            "9223372036854775808ns",
            "2562048h",
            "99999999999999999999s",
            "18446744073709551615h",
            "9223372036854775807ns1ns",
            "2562047h47m16.854775808s",
        ] {
            assert!(
                matches!(parse(text), Err(DurationError::Overflow { .. })),
                "{text:?}: {:?}",
                parse(text)
            );
        }
    }

    #[test]
    fn errors_quote_a_bounded_text() {
        let long = format!("{}x", "9".repeat(10_000));
        let message = parse(&long).unwrap_err().to_string();
        assert!(message.len() < 200, "{message}");
        assert!(parse("5x").unwrap_err().to_string().contains("\"5x\""));
    }
}
