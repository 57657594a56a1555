//! Kubernetes' rules for names written in objects and flags: label values and the name part of
//! label keys, and object names (DNS-1123, as `noe`'s flags check them).

/// A qualified name (a label value, the name part of a label key): at most `max` of
/// `[A-Za-z0-9._-]`, alphanumeric at both ends.
pub fn is_qualified_name(text: &str, max: usize) -> bool {
    is_name(text, max, u8::is_ascii_alphanumeric, |b| {
        matches!(b, b'-' | b'_' | b'.')
    })
}

/// An object name (DNS-1123 characters): at most `max` of `[a-z0-9.-]`, alphanumeric at both
/// ends.
pub fn is_object_name(text: &str, max: usize) -> bool {
    let lower = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    is_name(text, max, lower, |b| matches!(b, b'-' | b'.'))
}

/// At most `max` bytes, each `alphanumeric` or `inner`, `alphanumeric` at both ends.
fn is_name(text: &str, max: usize, alphanumeric: fn(&u8) -> bool, inner: fn(&u8) -> bool) -> bool {
    let bytes = text.as_bytes();
    let edge = |b: Option<&u8>| b.is_some_and(alphanumeric);
    !text.is_empty()
        && text.len() <= max
        && edge(bytes.first())
        && edge(bytes.last())
        && bytes.iter().all(|b| alphanumeric(b) || inner(b))
}
