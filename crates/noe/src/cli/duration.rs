//! Durations in Go's `time.ParseDuration` syntax: `5s`, `1h`, `500ms`, `1m30s`, `1.5h`, `0`.

use std::time::Duration;

/// Parses a non-negative Go duration. Units: `ns`, `us` (`µs`, `μs`), `ms`, `s`, `m`, `h`.
pub fn parse(text: &str) -> Result<Duration, String> {
    let invalid = || format!("invalid duration {text:?} (expected e.g. 5s, 500ms, 1m30s, 1h)");
    let body = text.strip_prefix('+').unwrap_or(text);
    if body == "0" {
        return Ok(Duration::ZERO);
    }
    if body.is_empty() || body.starts_with('-') {
        return Err(invalid());
    }
    let mut total_nanos: f64 = 0.0;
    let mut rest = body;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(invalid)?;
        let (number, after) = rest.split_at(number_len);
        if number.is_empty() || number == "." {
            return Err(invalid());
        }
        let value: f64 = number.parse().map_err(|_| invalid())?;
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let nanos_per_unit = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(invalid()),
        };
        total_nanos += value * nanos_per_unit;
        rest = next;
    }
    if !total_nanos.is_finite() || total_nanos > u64::MAX as f64 {
        return Err(invalid());
    }
    Ok(Duration::from_nanos(total_nanos.round() as u64))
}

/// A Go duration above zero (timeouts and deadlines).
pub fn positive(text: &str) -> Result<Duration, String> {
    let duration = parse(text)?;
    if duration.is_zero() {
        return Err(format!("{text:?} must be above zero"));
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let ok: &[(&str, Duration)] = &[
            ("5s", Duration::from_secs(5)),
            ("1h", Duration::from_secs(3600)),
            ("500ms", Duration::from_millis(500)),
            ("1m30s", Duration::from_secs(90)),
            ("1.5h", Duration::from_secs(5400)),
            ("2h45m", Duration::from_secs(2 * 3600 + 45 * 60)),
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("+3s", Duration::from_secs(3)),
            ("10us", Duration::from_micros(10)),
            ("10µs", Duration::from_micros(10)),
            ("7ns", Duration::from_nanos(7)),
            (".5s", Duration::from_millis(500)),
        ];
        for (text, want) in ok {
            assert_eq!(parse(text), Ok(*want), "{text}");
        }
        for bad in ["", "5", "s", "-1s", "5x", "1.2.3s", "5 s", "1h-5m", "."] {
            assert!(parse(bad).is_err(), "{bad:?} should be refused");
        }
    }
}
