//! Shell-style patterns, as Go's `filepath.Match`: `*` any run of characters, `?` one character
//! (neither crosses a `/`), `[...]` a class (`^` negates, `a-z` ranges), `\` escapes. A malformed
//! pattern matches nothing (noe and the kubelet ignore Go's `ErrBadPattern` the same way).
//!
//! One matcher serves every pattern of the crate: `--registry-proxies` rules and the `registry`
//! metric label's configured hosts (whole host names), kubelet `matchImages` and docker config
//! keys (one DNS label at a time, [`crate::matching`]), and containerd `imports`
//! (file names). Host names compare ASCII case-insensitively; file names exactly.

/// The characters that make a pattern more than a string: one without any matches only itself,
/// and is compared as a string (no character buffers).
const META: [char; 4] = ['*', '?', '[', '\\'];

/// Whether `pattern` has no glob character: it matches only itself.
pub fn is_literal(pattern: &str) -> bool {
    !pattern.contains(META)
}

/// Whether `text` matches `pattern`, exactly as written.
pub fn matches(pattern: &str, text: &str) -> bool {
    if is_literal(pattern) {
        return pattern == text;
    }
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    match_chars(&pattern, &text).unwrap_or(false)
}

/// Whether the host name (or DNS label) `text` matches `pattern`, ignoring ASCII case.
pub fn matches_ignore_case(pattern: &str, text: &str) -> bool {
    if is_literal(pattern) {
        return pattern.eq_ignore_ascii_case(text);
    }
    let pattern: Vec<char> = pattern.chars().map(|c| c.to_ascii_lowercase()).collect();
    let text: Vec<char> = text.chars().map(|c| c.to_ascii_lowercase()).collect();
    match_chars(&pattern, &text).unwrap_or(false)
}

/// Whether `pattern` is well formed (every class closed, no dangling `\`).
pub fn is_valid(pattern: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    validate(&pattern).is_some()
}

const SEPARATOR: char = '/';

/// `None` when the pattern is malformed.
fn match_chars(glob: &[char], text: &[char]) -> Option<bool> {
    // Iterative matcher with single-star backtracking: linear in practice, no recursion.
    let (mut g, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    loop {
        if let Some(&c) = glob.get(g) {
            let current = text.get(t).copied();
            match c {
                '*' => {
                    star = Some((g, t));
                    g += 1;
                    continue;
                }
                '?' if current.is_some_and(|x| x != SEPARATOR) => {
                    g += 1;
                    t += 1;
                    continue;
                }
                '[' => {
                    // Validate the class even at the end of the text, as Go does.
                    let (matched, next) = match_class(glob, g, current.unwrap_or(' '))?;
                    if matched && current.is_some() {
                        g = next;
                        t += 1;
                        continue;
                    }
                }
                '\\' => {
                    let escaped = *glob.get(g + 1)?;
                    if current == Some(escaped) {
                        g += 2;
                        t += 1;
                        continue;
                    }
                }
                c if current == Some(c) => {
                    g += 1;
                    t += 1;
                    continue;
                }
                _ => {}
            }
        } else if t == text.len() {
            return Some(true);
        }
        // Mismatch: let the last star eat one more character (never a separator), or fail.
        match star {
            Some((star_g, star_t)) if text.get(star_t).is_some_and(|&x| x != SEPARATOR) => {
                star = Some((star_g, star_t + 1));
                g = star_g + 1;
                t = star_t + 1;
            }
            _ => {
                // Check the rest of the glob is well formed so errors surface consistently.
                return validate(glob.get(g..).unwrap_or_default()).map(|()| false);
            }
        }
    }
}

/// Match `c` against the class starting at `glob[start] == '['`; returns (matched, index after `]`).
fn match_class(glob: &[char], start: usize, c: char) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negated = matches!(glob.get(i), Some('^'));
    if negated {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let ch = *glob.get(i)?;
        if ch == ']' && !first {
            return Some((matched != negated, i + 1));
        }
        first = false;
        let (lo, next) = class_char(glob, i)?;
        i = next;
        let hi = if glob.get(i) == Some(&'-') && glob.get(i + 1) != Some(&']') {
            let (hi, next) = class_char(glob, i + 1)?;
            i = next;
            hi
        } else {
            lo
        };
        if lo > hi {
            return None;
        }
        if lo <= c && c <= hi {
            matched = true;
        }
    }
}

fn class_char(glob: &[char], i: usize) -> Option<(char, usize)> {
    match *glob.get(i)? {
        '\\' => Some((*glob.get(i + 1)?, i + 2)),
        // Go rejects an unescaped `-` or `]` where a class character is expected.
        '-' | ']' => None,
        c => Some((c, i + 1)),
    }
}

fn validate(glob: &[char]) -> Option<()> {
    let mut i = 0;
    while i < glob.len() {
        match glob[i] {
            '\\' => {
                glob.get(i + 1)?;
                i += 2;
            }
            '[' => {
                let (_, next) = match_class(glob, i, ' ')?;
                i = next;
            }
            _ => i += 1,
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_filepath_match_table() {
        // (pattern, text, matches)
        let cases: &[(&str, &str, bool)] = &[
            ("*", "", true),
            ("*", "anything", true),
            ("a*", "a", true),
            ("a*", "b", false),
            ("*a*b", "xaxb", true),
            ("*a*b", "xaxbx", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("a*b*c", "abc", true),
            ("a*b*c", "acb", false),
            ("??", "ab", true),
            ("??", "a", false),
            ("[a-c]x", "bx", true),
            ("[a-c]x", "dx", false),
            ("[^a-c]x", "dx", true),
            ("[ab-]x", "-x", false),
            ("[\\-]x", "-x", true),
            ("a\\*b", "a*b", true),
            ("a\\*b", "axb", false),
            ("x[", "x", false),
            ("x\\", "x", false),
            ("[]a]", "]", false),
            ("[z-a]", "m", false),
            // Neither `*` nor `?` crosses a separator.
            ("a*b", "a/b", false),
            ("a?b", "a/b", false),
            ("a/*", "a/b", true),
            // Whole host names (proxy rules).
            ("docker.io", "docker.io", true),
            ("docker.io", "ghcr.io", false),
            ("*.io", "ghcr.io", true),
            ("*", "anything:5000", true),
            ("registry-?.corp", "registry-1.corp", true),
            ("registry-?.corp", "registry-10.corp", false),
            ("registry-[0-9].corp", "registry-7.corp", true),
            ("quay.io*", "quay.io:443", true),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(matches(pattern, text), *expected, "{pattern:?} {text:?}");
        }
    }

    #[test]
    fn host_names_ignore_ascii_case() {
        assert!(matches_ignore_case("*.DOCKER.io", "x.docker.IO"));
        assert!(matches_ignore_case("[A-C]x.io", "bX.io"));
        assert!(!matches("*.DOCKER.io", "x.docker.io"));
    }

    #[test]
    fn validity() {
        for good in ["a", "*.io", "[a-z]", "\\*", "[^x]y"] {
            assert!(is_valid(good), "{good}");
        }
        for bad in ["[", "a[b", "x\\", "[]", "[z-a]", "[a-]"] {
            assert!(!is_valid(bad), "{bad}");
        }
    }

    proptest::proptest! {
        /// A pattern without metacharacters, compared as a string, matches as the matcher would.
        #[test]
        fn literal_patterns_match_as_the_matcher_does(
            pattern in "[a-zA-Z0-9.:/^\\]-]{0,10}",
            other in "[a-zA-Z0-9.:/^\\]-]{0,10}",
            same in proptest::bool::ANY,
        ) {
            let text = if same { pattern.to_ascii_uppercase() } else { other };
            let chars = |s: &str, lower: bool| -> Vec<char> {
                s.chars().map(|c| if lower { c.to_ascii_lowercase() } else { c }).collect()
            };
            let exact = match_chars(&chars(&pattern, false), &chars(&text, false)).unwrap_or(false);
            let folded = match_chars(&chars(&pattern, true), &chars(&text, true)).unwrap_or(false);
            proptest::prop_assert_eq!(matches(&pattern, &text), exact);
            proptest::prop_assert_eq!(matches_ignore_case(&pattern, &text), folded);
        }
    }

    #[test]
    fn long_inputs_stay_linear() {
        // A pathological pattern against a long text ends (single-star backtracking).
        let text = "a".repeat(5_000);
        let pattern = format!("{}b", "*a".repeat(50));
        assert!(!matches(&pattern, &text));
    }
}
