use super::*;

/// The hostile names every rendering is tested with.
const HOSTILE: [&str; 6] = [
    "=cmd|' /C calc'!A0",
    "<img src=x onerror=alert(1)>",
    "+SUM(1+1)*cmd|' /C calc'!A0",
    "@SUM(1)",
    "-2+3",
    "\tx",
];

#[test]
fn csv_fields_never_start_a_formula() {
    let cases = [
        ("plain", "plain"),
        ("", ""),
        ("a,b", "\"a,b\""),
        ("say \"hi\"", "\"say \"\"hi\"\"\""),
        ("=cmd|' /C calc'!A0", "\"'=cmd|' /C calc'!A0\""),
        ("+1", "\"'+1\""),
        ("-1", "\"'-1\""),
        ("@SUM(1)", "\"'@SUM(1)\""),
        ("\tx", "\"'\tx\""),
        ("\rx", "\"'\rx\""),
        ("=\"x\"", "\"'=\"\"x\"\"\""),
        ("a=b", "a=b"),
        ("line\nbreak", "\"line\nbreak\""),
    ];
    for (cell, expected) in cases {
        let mut out = String::new();
        csv_field(&mut out, cell);
        assert_eq!(out, expected, "{cell:?}");
    }
}

#[test]
fn markdown_escapes_html_and_table_syntax() {
    let cases = [
        ("web", "web"),
        (
            "<img src=x onerror=alert(1)>",
            "&lt;img src=x onerror=alert(1)&gt;",
        ),
        ("a|b", "a\\|b"),
        ("[x](javascript:alert(1))", "\\[x\\](javascript:alert(1))"),
        (
            "**bold** `code` ~~s~~",
            "\\*\\*bold\\*\\* \\`code\\` \\~\\~s\\~\\~",
        ),
        ("a\\|b", "a\\\\\\|b"),
        ("&lt;", "&amp;lt;"),
        ("esc\u{1b}[31m", "esc\\\\u{1b}\\[31m"),
        ("registry:5000/app-x:1.2", "registry:5000/app-x:1.2"),
    ];
    for (text, expected) in cases {
        assert_eq!(markdown(text), expected, "{text:?}");
    }
    for name in HOSTILE {
        let escaped = markdown(name);
        assert!(!escaped.contains('<'), "{escaped}");
        assert!(
            !escaped.replace("\\|", "").contains('|'),
            "an unescaped | in {escaped}"
        );
    }
}

#[test]
fn html_escapes_text_and_attributes() {
    assert_eq!(
        html("<img src=x onerror=alert(1)>"),
        "&lt;img src=x onerror=alert(1)&gt;"
    );
    assert_eq!(html("\"'><script>&"), "&quot;&#39;&gt;&lt;script&gt;&amp;");
    assert_eq!(html("a\u{0}b\u{1b}"), "a\\u{0}b\\u{1b}");
    assert_eq!(html("ünïcode ✓"), "ünïcode ✓");
}

#[test]
fn printable_escapes_control_characters() {
    assert_eq!(printable("plain"), "plain");
    assert_eq!(printable("a\u{1b}[31mb\n"), "a\\u{1b}[31mb\\n");
}
