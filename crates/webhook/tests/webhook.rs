//! The webhook library's integration tests, one binary: the decision's tables, flows and the
//! replay of our peers' placement cases, the admission over scripted lookups, properties of the
//! admission, the fault matrix through the HTTPS server, the transport alone, and pull secrets
//! through kube's real client.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod webhook {
    mod admission_scripted;
    mod decide;
    mod fault_admission;
    mod prop_admission;
    mod pull_secrets;
    mod scope;
    mod server;
}
