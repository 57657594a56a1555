//! Kubernetes resource quantities, parsed exactly (`resource.Quantity`'s grammar: a decimal
//! number with a binary `Ki..Ei`, decimal `n u m k M G T P E` or exponent `e3`/`E3` suffix) into
//! integer milli-units, rounded up as the apiserver rounds `MilliValue`; and written back in the
//! canonical form. No floating point: the sums of a report are exact.

use std::fmt;

/// Longest quantity string read (real ones are a few characters).
pub const MAX_QUANTITY_LEN: usize = 64;
/// Largest value accepted, in milli-units: 2^63 - 1 (the apiserver's own int64 bound).
pub const MAX_MILLI: u128 = i64::MAX as u128;

/// Why a quantity string is not one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuantityError {
    #[error("is empty")]
    Empty,
    #[error("is longer than {MAX_QUANTITY_LEN} characters")]
    TooLong,
    #[error("is negative")]
    Negative,
    #[error("is not a Kubernetes quantity")]
    Syntax,
    #[error("is too large")]
    TooLarge,
}

/// A quantity in milli-units (`100m` CPU is 100, `1Ki` is 1,024,000).
pub fn parse_milli(text: &str) -> Result<u128, QuantityError> {
    if text.is_empty() {
        return Err(QuantityError::Empty);
    }
    if text.len() > MAX_QUANTITY_LEN {
        return Err(QuantityError::TooLong);
    }
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(QuantityError::Syntax);
    }
    // The digits as one integer, and the power of ten that scales them to milli-units.
    let mut digits: u128 = 0;
    let mut significant = 0usize;
    for c in whole.bytes().chain(fraction.bytes()) {
        let digit = u128::from(c.wrapping_sub(b'0'));
        if significant > 0 || digit > 0 {
            significant = significant.saturating_add(1);
        }
        // 38 significant digits fit a u128; more cannot be a real request.
        if significant > 38 {
            return Err(QuantityError::TooLarge);
        }
        digits = digits
            .checked_mul(10)
            .and_then(|d| d.checked_add(digit))
            .ok_or(QuantityError::TooLarge)?;
    }
    let fraction_len = i64::try_from(fraction.len()).map_err(|_| QuantityError::TooLong)?;
    let (binary_power, decimal_power): (u32, i64) = match suffix {
        "" => (0, 0),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        exponent => {
            let digits = exponent
                .strip_prefix('e')
                .or_else(|| exponent.strip_prefix('E'))
                .ok_or(QuantityError::Syntax)?;
            let unsigned = digits.strip_prefix(['+', '-']).unwrap_or(digits);
            if unsigned.is_empty()
                || unsigned.len() > 4
                || !unsigned.bytes().all(|b| b.is_ascii_digit())
            {
                return Err(QuantityError::Syntax);
            }
            (0, digits.parse::<i64>().map_err(|_| QuantityError::Syntax)?)
        }
    };
    if negative && digits > 0 {
        return Err(QuantityError::Negative);
    }
    if digits == 0 {
        return Ok(0);
    }
    // milli = digits * 2^binary * 10^(decimal + 3 - fraction_len), rounded up.
    let scaled = digits
        .checked_mul(1u128 << binary_power)
        .ok_or(QuantityError::TooLarge)?;
    let power = decimal_power.saturating_add(3).saturating_sub(fraction_len);
    let milli = if power >= 0 {
        let power = u32::try_from(power).map_err(|_| QuantityError::TooLarge)?;
        10u128
            .checked_pow(power)
            .and_then(|p| scaled.checked_mul(p))
            .ok_or(QuantityError::TooLarge)?
    } else {
        let power = u32::try_from(power.unsigned_abs()).unwrap_or(u32::MAX);
        match 10u128.checked_pow(power) {
            // Rounded up: a non-zero request never reads as zero.
            Some(divisor) => scaled.div_ceil(divisor),
            None => 1,
        }
    };
    if milli > MAX_MILLI {
        return Err(QuantityError::TooLarge);
    }
    Ok(milli)
}

/// CPU in millicores. Displays as `1500m`, or `2` when whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cpu(pub u128);

/// Memory in bytes. Displays with the largest binary suffix that divides it exactly (`3Gi`,
/// `1536Mi`), else in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Memory(pub u128);

impl Cpu {
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        parse_milli(text).map(Self)
    }

    /// `self + other`, saturating (sums of bounded values stay far below the bound).
    pub fn plus(self, other: Self) -> Self {
        Self(self.0.saturating_add(other.0))
    }

    /// `self × times`, saturating.
    pub fn times(self, times: u64) -> Self {
        Self(self.0.saturating_mul(u128::from(times)))
    }
}

impl Memory {
    /// Bytes, rounded up (`500m` bytes is 1 byte).
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        parse_milli(text).map(|milli| Self(milli.div_ceil(1000)))
    }

    /// `self + other`, saturating.
    pub fn plus(self, other: Self) -> Self {
        Self(self.0.saturating_add(other.0))
    }

    /// `self × times`, saturating.
    pub fn times(self, times: u64) -> Self {
        Self(self.0.saturating_mul(u128::from(times)))
    }
}

impl fmt::Display for Cpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_multiple_of(1000) {
            write!(f, "{}", self.0 / 1000)
        } else {
            write!(f, "{}m", self.0)
        }
    }
}

impl fmt::Display for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SUFFIXES: [(&str, u32); 6] = [
            ("Ei", 60),
            ("Pi", 50),
            ("Ti", 40),
            ("Gi", 30),
            ("Mi", 20),
            ("Ki", 10),
        ];
        if self.0 > 0 {
            for (suffix, power) in SUFFIXES {
                let unit = 1u128 << power;
                if self.0.is_multiple_of(unit) {
                    return write!(f, "{}{suffix}", self.0 / unit);
                }
            }
        }
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
