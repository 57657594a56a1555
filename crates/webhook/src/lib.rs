//! noe-rs webhook: the `noe` binary's library. The command line ([`args`]), the HTTPS admission
//! server ([`server`], [`tls`], [`admission`]), the pure decision ([`decide`], [`patch`]), metrics
//! and health endpoints, and the `inspect` and `explain` subcommands.

pub mod admission;
pub mod args;
pub mod decide;
pub mod explain;
pub mod health;
pub mod inspect;
pub mod lookup;
pub mod memo;
pub mod metrics;
pub mod patch;
pub mod pull_secrets;
pub mod server;
pub mod tls;
