//! Bounds on what the decision writes for people: admission warnings and denial messages.
//!
//! The apiserver may truncate a warning over 256 characters and ignores warnings past 4096
//! characters from all webhooks together (the Kubernetes admission webhook documentation), and
//! image references and registry errors come from the wire: every text here is bounded.

use std::borrow::Cow;

/// The longest warning we return, in characters (the apiserver's per-warning limit).
pub const MAX_WARNING_CHARS: usize = 256;
/// All our warnings together, in characters: half the apiserver's total, the rest is for other
/// webhooks.
pub const MAX_WARNINGS_CHARS: usize = 2048;
/// The longest denial message, in characters.
pub const MAX_MESSAGE_CHARS: usize = 1024;
/// An image reference in a message, in characters.
const MAX_IMAGE_CHARS: usize = 120;
/// Platforms listed per image in a message.
const MAX_PLATFORMS: usize = 8;
/// Entries of a list in a message, before `+N more`.
const MAX_ITEMS: usize = 16;

/// `text` cut to `max` characters, ending with `...` when cut.
pub(crate) fn truncate(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => Cow::Borrowed(text),
        Some(_) => {
            let keep = max.saturating_sub(3);
            let end = text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i);
            Cow::Owned(format!("{}...", &text[..end]))
        }
    }
}

/// An image reference as shown in a message.
pub(crate) fn image(reference: &str) -> Cow<'_, str> {
    truncate(reference, MAX_IMAGE_CHARS)
}

/// `a, b, c`, with at most [`MAX_ITEMS`] entries, then `+N more`.
pub(crate) fn list<I, S>(items: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    join(items, ", ", MAX_ITEMS)
}

fn join<I, S>(items: I, separator: &str, max: usize) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut out = String::new();
    let mut extra = 0usize;
    for (n, item) in items.into_iter().enumerate() {
        if n >= max {
            extra = extra.saturating_add(1);
            continue;
        }
        if n > 0 {
            out.push_str(separator);
        }
        out.push_str(item.as_ref());
    }
    if extra > 0 {
        out.push_str(&format!("{separator}+{extra} more"));
    }
    out
}

/// `image [linux/amd64, linux/arm/v7]`: an image and the platforms it really has.
pub(crate) fn image_platforms(reference: &str, platforms: &[crate::Platform]) -> String {
    let mut shown: Vec<String> = Vec::new();
    for platform in platforms {
        let text = platform.to_string();
        if !shown.contains(&text) {
            shown.push(text);
        }
    }
    format!(
        "{} [{}]",
        image(reference),
        join(shown, ", ", MAX_PLATFORMS)
    )
}

/// A denial message, bounded.
pub(crate) fn message(text: String) -> String {
    match truncate(&text, MAX_MESSAGE_CHARS) {
        Cow::Borrowed(_) => text,
        Cow::Owned(cut) => cut,
    }
}

/// Each warning cut to [`MAX_WARNING_CHARS`]; once [`MAX_WARNINGS_CHARS`] are used, the rest is
/// replaced by one warning that says how many were left out.
pub(crate) fn bound_warnings(warnings: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(warnings.len());
    let mut used = 0usize;
    let mut omitted = 0usize;
    for warning in warnings {
        let warning = match truncate(&warning, MAX_WARNING_CHARS) {
            Cow::Borrowed(_) => warning,
            Cow::Owned(cut) => cut,
        };
        let chars = warning.chars().count();
        // Keep room for the closing "N more warnings" line.
        if omitted > 0 || used.saturating_add(chars) > MAX_WARNINGS_CHARS.saturating_sub(64) {
            omitted = omitted.saturating_add(1);
            continue;
        }
        used = used.saturating_add(chars);
        out.push(warning);
    }
    if omitted > 0 {
        out.push(format!("noe: {omitted} more warnings omitted"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_on_character_boundaries() {
        assert_eq!(truncate("abc", 3), "abc");
        assert_eq!(truncate("abcdef", 5), "ab...");
        assert_eq!(truncate("ééééé", 4), "é...");
        assert_eq!(truncate("", 0), "");
    }

    #[test]
    fn lists_are_bounded() {
        assert_eq!(list(["a", "b"]), "a, b");
        let many: Vec<String> = (0..20).map(|i| i.to_string()).collect();
        assert!(list(&many).ends_with(", 15, +4 more"), "{}", list(&many));
        let platforms: Vec<crate::Platform> = ["amd64", "arm64", "amd64"]
            .iter()
            .map(|a| crate::Platform::new("linux", *a, None))
            .collect();
        assert_eq!(
            image_platforms("app:1", &platforms),
            "app:1 [linux/amd64, linux/arm64]"
        );
    }

    #[test]
    fn warnings_are_bounded_one_by_one_and_together() {
        let long = "x".repeat(1000);
        let bounded = bound_warnings(vec![long; 40]);
        assert!(bounded
            .iter()
            .all(|w| w.chars().count() <= MAX_WARNING_CHARS));
        let total: usize = bounded.iter().map(|w| w.chars().count()).sum();
        assert!(total <= MAX_WARNINGS_CHARS, "{total}");
        assert_eq!(
            bounded.last().map(String::as_str),
            Some("noe: 33 more warnings omitted")
        );
        assert_eq!(bound_warnings(vec!["a".into()]), ["a"]);
    }
}
