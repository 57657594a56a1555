//! Proves each piece of the harness against the real registry (and the real redis-server).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness {
    mod ca;
    mod fake;
    mod hostile;
    mod redis;
    mod registry;
    mod token;
}
