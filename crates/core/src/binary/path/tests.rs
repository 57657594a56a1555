use super::*;

#[test]
fn paths_are_normalized_inside_the_root() {
    let cases = [
        ("/", "usr/bin/", "/usr/bin"),
        ("/", "./usr//bin/./sh", "/usr/bin/sh"),
        ("/srv", "../../etc/passwd", "/etc/passwd"),
        ("/srv/app", "bin/x", "/srv/app/bin/x"),
        ("/srv/app", "/abs/x", "/abs/x"),
        ("/", "", "/"),
        ("/", ".", "/"),
        ("/a/b", "..", "/a"),
    ];
    for (base, path, expected) in cases {
        assert_eq!(normalize(base, path).unwrap(), expected, "{base} {path}");
    }
    assert_eq!(normalize("/", &"a/".repeat(2049)), Err(TooLong));
    assert_eq!(parent("/usr/bin/sh"), "/usr/bin");
    assert_eq!(parent("/app"), "/");
    assert_eq!(parent("/"), "/");
    assert_eq!(file_name("/usr/bin/sh"), "sh");
    assert!(is_prefix_or_equal("/usr", "/usr/bin"));
    assert!(is_prefix_or_equal("/usr/bin", "/usr/bin"));
    assert!(is_prefix_or_equal("/", "/usr"));
    assert!(!is_prefix_or_equal("/us", "/usr/bin"));
    assert!(!is_prefix_or_equal("/usr/bin/sh", "/usr/bin"));
}
