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
mod tests;
