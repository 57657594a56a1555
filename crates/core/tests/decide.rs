//! The pure decision: tables of cases (noe's behaviours and our peers'), multi-step flows, and the
//! replay of the placement conformance cases, each judged by where the scheduler may place the
//! patched pod.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod decide {
    mod cases_nodes;
    mod cases_noe;
    mod cases_peers;
    mod conformance;
    mod explain;
    mod flows;
    mod helpers;
    mod runner;
    mod schedule;
    mod table;
}
