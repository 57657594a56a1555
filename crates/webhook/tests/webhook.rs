//! The webhook library's integration tests, one binary: the admission over scripted lookups,
//! properties of the admission, the fault matrix through the HTTPS server, the transport alone,
//! and pull secrets through kube's real client.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod webhook {
    mod admission_scripted;
    mod fault_admission;
    mod prop_admission;
    mod pull_secrets;
    mod server;
}
