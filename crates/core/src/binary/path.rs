//! Paths inside an image, lexically: absolute, `.` and empty components dropped, `..` going up
//! (never above the root, as inside a container), no trailing `/`.

use std::fmt;

/// Longest path or link target followed (Linux's `PATH_MAX`).
pub const MAX_PATH_LEN: usize = 4096;

/// A path or link target longer than [`MAX_PATH_LEN`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLong;

impl fmt::Display for TooLong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a path longer than {MAX_PATH_LEN} bytes")
    }
}

impl std::error::Error for TooLong {}

/// `path` resolved against the directory `base` (itself normalized) when relative.
pub fn normalize(base: &str, path: &str) -> Result<String, TooLong> {
    if path.len() > MAX_PATH_LEN || base.len() > MAX_PATH_LEN {
        return Err(TooLong);
    }
    let mut parts: Vec<&str> = Vec::new();
    if !path.starts_with('/') {
        parts.extend(base.split('/').filter(|c| !c.is_empty() && *c != "."));
    }
    for component in path.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    let mut out = String::with_capacity(path.len().saturating_add(1));
    for part in &parts {
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() {
        out.push('/');
    }
    if out.len() > MAX_PATH_LEN {
        return Err(TooLong);
    }
    Ok(out)
}

/// `dir/name` for a normalized `dir`.
pub fn join(dir: &str, name: &str) -> Result<String, TooLong> {
    normalize(dir, name)
}

/// The directory holding a normalized `path` (`/` for the root and its children).
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(at) => &path[..at],
    }
}

/// The last component of a normalized `path` (empty for the root).
pub fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or_default()
}

/// Whether `prefix` is `path` or one of its ancestors (both normalized).
pub fn is_prefix_or_equal(prefix: &str, path: &str) -> bool {
    if prefix == "/" {
        return true;
    }
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
