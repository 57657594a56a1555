//! What the flag groups share: value parsers for Go-style flags and the error of a command line
//! that parses but cannot run.

use std::path::PathBuf;
use std::time::Duration;

/// A command line that parses but cannot run, as one line naming the flags at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("--{flag} does not apply to `noe {command}`")]
    NotForCommand { flag: String, command: &'static str },
    #[error("cannot read --{flag} {path}: {source}", path = path.display())]
    Read {
        flag: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid --{flag} {path}: {reason}", path = path.display())]
    Invalid {
        flag: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("{0}")]
    Contradiction(String),
}

/// `--namespace NAME` when NAME is a namespace name (at most 63 lowercase letters, digits and
/// `-`), else the reason.
pub fn namespace(namespace: &str) -> Result<&str, ConfigError> {
    let valid = !namespace.is_empty()
        && namespace.len() <= 63
        && namespace
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if valid {
        Ok(namespace)
    } else {
        Err(ConfigError::Contradiction(format!(
            "--namespace {namespace:?} is not a namespace name"
        )))
    }
}

/// A path flag; an empty value (Go's `--flag=`) is accepted and means "unset".
pub fn any_path(text: &str) -> Result<PathBuf, std::convert::Infallible> {
    Ok(PathBuf::from(text))
}

/// `path` unless it is empty (Go's `--flag=`).
pub fn non_empty_path(path: &Option<PathBuf>) -> Option<&PathBuf> {
    path.as_ref().filter(|p| !p.as_os_str().is_empty())
}

/// The bytes of the file a path flag names (`None` when it is unset or empty), or why they
/// cannot be read.
pub fn read_file(
    flag: &'static str,
    path: &Option<PathBuf>,
) -> Result<Option<Vec<u8>>, ConfigError> {
    non_empty_path(path)
        .map(|path| {
            std::fs::read(path).map_err(|source| ConfigError::Read {
                flag,
                path: path.clone(),
                source,
            })
        })
        .transpose()
}

/// Non-empty, trimmed items of a comma list.
pub fn non_empty(items: &[String]) -> Vec<String> {
    items
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A Go duration (`5s`, `1m30s`, `1.5h`, `0`), as Go's `flag` parses it.
pub fn duration(text: &str) -> Result<Duration, String> {
    noe_credentials::duration::parse(text).map_err(|error| error.to_string())
}

/// A Go duration above zero (timeouts and deadlines).
pub fn positive_duration(text: &str) -> Result<Duration, String> {
    let duration = duration(text)?;
    if duration.is_zero() {
        return Err(format!("{text:?} must be above zero"));
    }
    Ok(duration)
}

/// A byte count as Kubernetes quantities write one: `67108864`, `64Mi`, `64MiB`, `512Ki`,
/// `1Gi`, or decimal `64M`, `1G`; at least 1 KiB, at most 16 GiB.
pub fn byte_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let digits = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(digits);
    let multiplier: u64 = match unit.trim() {
        "" => 1,
        "Ki" | "KiB" => 1 << 10,
        "Mi" | "MiB" => 1 << 20,
        "Gi" | "GiB" => 1 << 30,
        "K" | "k" | "KB" => 1_000,
        "M" | "MB" => 1_000_000,
        "G" | "GB" => 1_000_000_000,
        _ => {
            return Err(format!(
                "invalid size {text:?} (expected bytes, or a number with Ki, Mi, Gi, K, M or G)"
            ))
        }
    };
    let bytes = number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .ok_or_else(|| format!("invalid size {text:?}"))?;
    if !(1 << 10..=16 << 30).contains(&bytes) {
        return Err(format!("{text:?} is out of range (1Ki to 16Gi)"));
    }
    Ok(bytes)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes() {
        assert_eq!(byte_size("64Mi").unwrap(), 64 << 20);
        assert_eq!(byte_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(byte_size("67108864").unwrap(), 64 << 20);
        assert_eq!(byte_size("2G").unwrap(), 2_000_000_000);
        assert_eq!(byte_size(" 512Ki ").unwrap(), 512 << 10);
        for bad in [
            "",
            "Mi",
            "1.5Mi",
            "-1",
            "64Xi",
            "1",
            "17Gi",
            "99999999999999999999",
        ] {
            assert!(byte_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(duration("0").unwrap(), Duration::ZERO);
        assert!(duration("5").is_err());
        assert!(positive_duration("0s").is_err());
        assert_eq!(
            positive_duration("500ms").unwrap(),
            Duration::from_millis(500)
        );
    }
}
