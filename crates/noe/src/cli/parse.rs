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

/// A path flag; an empty value (Go's `--flag=`) is accepted and means "unset".
pub fn any_path(text: &str) -> Result<PathBuf, std::convert::Infallible> {
    Ok(PathBuf::from(text))
}

/// `path` unless it is empty (Go's `--flag=`).
pub fn non_empty_path(path: &Option<PathBuf>) -> Option<&PathBuf> {
    path.as_ref().filter(|p| !p.as_os_str().is_empty())
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
    noe_registry::duration::parse(text).map_err(|error| error.to_string())
}

/// A Go duration above zero (timeouts and deadlines).
pub fn positive_duration(text: &str) -> Result<Duration, String> {
    let duration = duration(text)?;
    if duration.is_zero() {
        return Err(format!("{text:?} must be above zero"));
    }
    Ok(duration)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
