//! The `noe` binary's command line and wiring.
//!
//! [`cli`] parses the flags ([`cli::flags`]) into typed configuration ([`config`]) and runs a
//! subcommand ([`cli::commands`]) or the server; [`serve`] is the one composition root of the
//! server; [`app`] builds what `serve`, `inspect`, `explain` and `report` share.
//! The libraries below (noe-webhook, noe-controller, noe-registry) know no flag, and [`serve`]
//! knows no `*Args`.

pub mod app;
pub mod cli;
pub mod config;
pub mod serve;
