//! The webhook library's integration tests, one binary: the decision's tables, flows and the
//! replay of our peers' placement cases, the admission over scripted lookups, properties of the
//! admission, the fault matrix through the HTTPS server, the transport alone, and pull secrets,
//! namespaces and nodes through kube's real client.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod webhook {
    mod admission_scripted;
    mod bounded;
    mod corrections;
    mod facts;
    mod fault_admission;
    mod memo;
    mod policy_endpoint_listener;
    mod prop_admission;
    mod pull_secrets;
    mod route_once;
    mod scope;
    mod server;
    mod service_accounts;
}

/// A `--cert-dir` holding a loopback certificate of a new CA named `name`, and that CA.
fn cert_dir(name: &str) -> (tempfile::TempDir, noe_test_support::TestCa) {
    let dir = tempfile::tempdir().unwrap();
    let ca = noe_test_support::TestCa::with_name(name).unwrap();
    noe_test_support::write_cert_dir(&ca, dir.path()).unwrap();
    (dir, ca)
}
