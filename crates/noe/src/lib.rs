//! The `noe` binary's command line and wiring.
//!
//! [`cli`] parses the flags into typed configuration and dispatches; `cli::serve` is the one
//! composition root of the server; [`config`] is what the flags turn into; [`app`] builds what
//! `serve`, `inspect` and `explain` share.
//! The libraries below (noe-webhook, noe-controller, noe-registry) know no flag.

pub mod app;
pub mod cli;
pub mod config;
