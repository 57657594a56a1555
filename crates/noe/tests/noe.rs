//! The `noe` binary end to end: as a process (`inspect`, `explain`, the server, SIGTERM) and
//! its server started in-process from a command line, against real registries on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod noe {
    mod cli_honest;
    mod conformance_admission;
    mod containerd_mirror_cli;
    mod docs_architecture;
    mod docs_flags;
    mod e2e_admission;
    mod e2e_cli;
    mod e2e_controllers;
    mod e2e_facts;
    mod e2e_gate;
    mod e2e_learned;
    mod e2e_overrides;
    mod e2e_policy_endpoint;
    mod e2e_private;
    mod e2e_select;
    mod e2e_shared;
    mod e2e_verify;
    mod explain_hosts;
    mod fault_sigterm;
    mod harness;
    mod inspect_account;
    mod inspect_tools;
    mod process;
    mod report;
    mod report_html;
    mod report_upgrades;
}
