#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn ancestors_go_up_to_the_root() {
    assert_eq!(
        ancestors("/usr/bin/sh").collect::<Vec<_>>(),
        ["/usr/bin", "/usr", "/"]
    );
    assert_eq!(ancestors("/app").collect::<Vec<_>>(), ["/"]);
}

#[test]
fn entries_concern_the_path_waited_for() {
    assert!(Search::concerns("/usr/bin/sh", "/usr/bin/sh"));
    assert!(!Search::concerns("/usr/bin/bash", "/usr/bin/sh"));
    assert!(Search::concerns("/usr/bin/sh", "/usr"));
    assert!(Search::concerns("/usr/bin/.wh.sh", "/usr/bin/sh"));
    assert!(Search::concerns("/usr/.wh.bin", "/usr/bin/sh"));
    assert!(Search::concerns("/usr/bin/.wh..wh..opq", "/usr/bin/sh"));
    assert!(!Search::concerns("/usr/bin/sh/.wh..wh..opq", "/usr/bin/sh"));
    assert!(!Search::concerns("/usr/lib/.wh.sh", "/usr/bin/sh"));
}
