//! The flag groups, each a clap `Args` flattened into [`super::Args`], and what they turn into
//! ([`crate::config`]): one file per group, the value parsers they share ([`parse`]), the Go
//! spellings normalised before clap parses ([`go_flags`]), and the conventions every flag
//! follows, applied once to the derived command ([`conventions`]).

pub mod controller;
pub mod go_flags;
pub mod kube;
pub mod logging;
pub mod parse;
pub mod policy;
pub mod registry;
pub mod server;

pub use controller::{ControllerArgs, TaintArgs};
pub use kube::KubeArgs;
pub use logging::{LogArgs, LogFormat};
pub use parse::ConfigError;
pub use policy::PolicyArgs;
pub use registry::RegistryArgs;
pub use server::ServerArgs;

use clap::Command;

/// `command` (the derived one) with what every flag follows, so no flag states it: a flag of the
/// groups (the root command's flags) is global, each long flag of any subcommand has an
/// environment variable `NOE_<FLAG_NAME>` (unless it names one), and a boolean flag is a Go
/// boolean ([`go_flags::booleans`]).
pub fn conventions(command: Command) -> Command {
    go_flags::booleans(environment(command.mut_args(|arg| arg.global(true))))
}

/// Each long flag of `command` and its subcommands that names no environment variable gets
/// `NOE_<FLAG_NAME>` (`--registry-qps`: `NOE_REGISTRY_QPS`).
fn environment(command: Command) -> Command {
    let subcommands: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_owned())
        .collect();
    let mut command = command.mut_args(|arg| match arg.get_long() {
        Some(long) if arg.get_env().is_none() => {
            let name = format!("NOE_{}", long.to_uppercase().replace('-', "_"));
            arg.env(name)
        }
        _ => arg,
    });
    for name in subcommands {
        command = command.mut_subcommand(name, environment);
    }
    command
}
