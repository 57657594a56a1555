//! The command line: `noe` (serve), `noe inspect`, `noe explain`.
//!
//! Every flag has an environment variable `NOE_<FLAG_NAME>`, and Go `flag` spellings
//! (`-flag v`, `-flag=v`) are normalised before clap parses (see [`go_flags`]).

pub mod duration;
pub mod go_flags;
pub mod logging;
pub mod policy;
pub mod registry;
pub mod server;

use std::collections::HashSet;
use std::ffi::OsString;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub use logging::{LogArgs, LogFormat};
pub use policy::{OnLookupErrorArg, PolicyArgs, PreferenceModeArg};
pub use registry::RegistryArgs;
pub use server::ServerArgs;

use crate::explain::ExplainArgs;
use crate::inspect::InspectArgs;

/// noe-rs: pins Pods to the CPU architectures all their images support.
///
/// Without a subcommand, runs the admission webhook server.
#[derive(Clone, Debug, Parser)]
#[command(name = "noe", version, about, long_about = None)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub server: ServerArgs,

    #[command(flatten)]
    pub policy: PolicyArgs,

    #[command(flatten)]
    pub registry: RegistryArgs,

    #[command(flatten)]
    pub log: LogArgs,
}

#[derive(Clone, Debug, Subcommand)]
pub enum Command {
    /// Print the platforms of images, as the webhook sees them.
    Inspect(InspectArgs),
    /// Print what the webhook would do to a Pod or workload file, without a cluster.
    Explain(ExplainArgs),
}

impl Args {
    /// Parses the process arguments (Go spellings normalised); exits on `--help` or an error.
    pub fn parse_normalized() -> Self {
        match Self::try_parse_normalized(std::env::args_os()) {
            Ok(args) => args,
            Err(error) => error.exit(),
        }
    }

    pub fn try_parse_normalized<I>(argv: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = OsString>,
    {
        let argv = go_flags::normalize(argv, &long_flag_names());
        let matches = Self::command().try_get_matches_from(argv)?;
        Self::from_arg_matches(&matches)
    }

    /// Contradictory settings, as a one-line reason.
    pub fn validate(&self) -> Result<(), String> {
        match &self.command {
            None => {
                self.policy.validate()?;
                self.registry.validate()
            }
            Some(Command::Inspect(inspect)) => inspect.registry.validate(),
            Some(Command::Explain(explain)) => {
                explain.policy.validate()?;
                explain.registry.validate()
            }
        }
    }

    /// Validates, sets up logging, and runs the server or the subcommand.
    pub fn run(self) -> ExitCode {
        if let Err(reason) = self.validate() {
            eprintln!("noe: {reason}");
            return ExitCode::from(2);
        }
        self.log.init();
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => {
                eprintln!("noe: cannot start the async runtime: {error}");
                return ExitCode::FAILURE;
            }
        };
        let Self {
            command,
            server,
            policy,
            registry,
            log: _,
        } = self;
        runtime.block_on(async move {
            match command {
                Some(Command::Inspect(inspect)) => inspect.run().await,
                Some(Command::Explain(explain)) => explain.run().await,
                None => crate::server::run(server, policy, registry).await,
            }
        })
    }
}

/// Every long flag name of `noe` and its subcommands.
pub fn long_flag_names() -> HashSet<String> {
    fn collect(command: &clap::Command, names: &mut HashSet<String>) {
        for arg in command.get_arguments() {
            if let Some(long) = arg.get_long() {
                names.insert(long.to_owned());
            }
        }
        names.insert("help".into());
        names.insert("version".into());
        for sub in command.get_subcommands() {
            collect(sub, names);
        }
    }
    let mut names = HashSet::new();
    collect(&Args::command(), &mut names);
    names
}

#[cfg(test)]
mod tests;
