//! The controller crate's integration tests, one binary: the pure decisions' tables, and the
//! controllers end to end with kube's real `Client` against the scripted API server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod controller {
    mod detect;
    mod detect_tables;
    mod e2e;
    mod gate;
    mod limits;
    mod node_features;
    mod support;
    mod tables;
}
