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
