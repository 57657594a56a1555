//! Go `time.Duration` strings (`12h`, `1h30m`, `500ms`, `0`), as Kubernetes `metav1.Duration`
//! serializes them.

use std::time::Duration;

/// Parse a Go duration string. Negative durations are rejected (`None`), as is anything malformed.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    if let Some(negative) = s.strip_prefix('-') {
        // "-0" is zero in Go; any other negative value is meaningless here.
        return parse_go_duration(negative).filter(Duration::is_zero);
    }
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() {
        return None;
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return None;
        }
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * seconds_per_unit;
    }
    if !total.is_finite() || total > 1e12 {
        return None;
    }
    Some(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let cases: &[(&str, Option<Duration>)] = &[
            ("0", Some(Duration::ZERO)),
            ("0s", Some(Duration::ZERO)),
            ("-0", Some(Duration::ZERO)),
            ("12h", Some(Duration::from_secs(12 * 3600))),
            ("1h30m", Some(Duration::from_secs(5400))),
            ("1h0m0s", Some(Duration::from_secs(3600))),
            ("90s", Some(Duration::from_secs(90))),
            ("1.5s", Some(Duration::from_millis(1500))),
            ("500ms", Some(Duration::from_millis(500))),
            ("10us", Some(Duration::from_micros(10))),
            ("+5m", Some(Duration::from_secs(300))),
            ("", None),
            ("5", None),
            ("h", None),
            ("5d", None),
            ("-5m", None),
            ("1e3s", None),
        ];
        for (input, expected) in cases {
            assert_eq!(parse_go_duration(input), *expected, "{input:?}");
        }
    }
}
