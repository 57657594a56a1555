//! An architecture named on the command line (`--target-arch` of `noe inspect` and `noe report`).

/// Longest target architecture name (real ones are a few characters).
const MAX_ARCH_LEN: usize = 32;

/// An architecture name: 1 to 32 characters of `[a-z0-9_-]`.
pub fn parse_arch(text: &str) -> Result<String, String> {
    let arch = text.trim();
    let valid = !arch.is_empty()
        && arch.len() <= MAX_ARCH_LEN
        && arch
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if valid {
        Ok(arch.to_owned())
    } else {
        Err(format!(
            "{arch:?} is not an architecture (1 to {MAX_ARCH_LEN} characters of a-z, 0-9, _ and -)"
        ))
    }
}
