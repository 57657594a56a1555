//! Proves each piece of the harness against the real registry.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness {
    mod ca;
    mod fake;
    mod hostile;
    mod registry;
    mod token;
}
