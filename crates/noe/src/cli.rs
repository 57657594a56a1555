//! The command line: `noe` (serve), `noe inspect`, `noe explain`, `noe untaint`, `noe ungate`.
//!
//! Every flag has an environment variable `NOE_<FLAG_NAME>`, and Go `flag` spellings
//! (`-flag v`, `-flag=v`) are normalised before clap parses (see [`go_flags`]). The flag groups
//! are global: a flag may stand before or after the subcommand and means the same, and a flag
//! the subcommand does not use is refused rather than ignored. Each group turns into the typed
//! configuration of what it configures ([`Run`]); nothing below the command line sees a flag.

pub mod controller;
pub mod explain;
pub mod go_flags;
pub mod inspect;
pub mod kube;
pub mod logging;
pub mod parse;
pub mod policy;
pub mod registry;
pub mod serve;
pub mod server;
pub mod ungate;
pub mod untaint;

use std::collections::{BTreeSet, HashSet};
use std::ffi::OsString;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};

pub use controller::{ControllerArgs, TaintArgs};
pub use kube::KubeArgs;
pub use logging::{LogArgs, LogFormat};
pub use parse::ConfigError;
pub use policy::PolicyArgs;
pub use registry::RegistryArgs;
pub use server::ServerArgs;

use crate::config;
use explain::ExplainArgs;
use inspect::InspectArgs;
use ungate::UngateArgs;
use untaint::UntaintArgs;

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
    pub kube: KubeArgs,

    #[command(flatten)]
    pub policy: PolicyArgs,

    #[command(flatten)]
    pub controller: ControllerArgs,

    #[command(flatten)]
    pub taints: TaintArgs,

    #[command(flatten)]
    pub registry: RegistryArgs,

    #[command(flatten)]
    pub log: LogArgs,

    /// Long names of the flags given on the command line (not from the environment).
    #[arg(skip)]
    pub given: BTreeSet<String>,
}

#[derive(Clone, Debug, Subcommand)]
pub enum Command {
    /// Run the admission webhook server (what `noe` without a subcommand does).
    Serve,
    /// Print the platforms of images, as the webhook sees them.
    Inspect(InspectArgs),
    /// Print what the webhook would do to a Pod or workload file, without a cluster.
    ///
    /// The decision flags (preferred arch, modes, tolerations, overrides...) and the registry
    /// flags apply as they would to the server; the server flags are refused.
    Explain(ExplainArgs),
    /// Remove the arch taint (`--taint-arches`) from every node that carries it.
    Untaint(UntaintArgs),
    /// Release every pod still carrying noe's scheduling gate (`--lookup-mode=gate|hybrid`).
    Ungate(UngateArgs),
}

/// How long finished work waits for blocking threads at exit.
const RUNTIME_SHUTDOWN: std::time::Duration = std::time::Duration::from_secs(1);

/// What to run, with its typed configuration.
// Built once per process: the size of its largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Run {
    Serve(config::Serve),
    Inspect(config::Inspect),
    Explain(config::Explain),
    Untaint(config::Untaint),
    Ungate(config::Ungate),
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
        let mut command = Self::command();
        command.build();
        let argv = go_flags::normalize(argv, &long_flag_names(&command));
        let matches = command.clone().try_get_matches_from(argv)?;
        let mut args = Self::from_arg_matches(&matches)?;
        args.given = given_flags(&command, &matches);
        Ok(args)
    }

    /// The subcommand's name and the flag groups it uses.
    fn command_and_groups(&self) -> (&'static str, &'static [&'static str]) {
        match &self.command {
            None | Some(Command::Serve) => (
                "serve",
                &[
                    "ServerArgs",
                    "KubeArgs",
                    "PolicyArgs",
                    "ControllerArgs",
                    "TaintArgs",
                    "RegistryArgs",
                    "LogArgs",
                ],
            ),
            Some(Command::Inspect(_)) => ("inspect", &["RegistryArgs", "LogArgs"]),
            Some(Command::Explain(_)) => (
                "explain",
                &["PolicyArgs", "TaintArgs", "RegistryArgs", "LogArgs"],
            ),
            Some(Command::Untaint(_)) => ("untaint", &["KubeArgs", "LogArgs"]),
            Some(Command::Ungate(_)) => (
                "ungate",
                &[
                    "KubeArgs",
                    "PolicyArgs",
                    "ControllerArgs",
                    "TaintArgs",
                    "RegistryArgs",
                    "LogArgs",
                ],
            ),
        }
    }

    /// The typed configuration of what to run; reads the files the flags name (once).
    pub fn to_run(&self) -> Result<Run, ConfigError> {
        let (command, groups) = self.command_and_groups();
        let root = Self::command();
        for group in root.get_groups() {
            if groups.contains(&group.get_id().as_str()) {
                continue;
            }
            for id in group.get_args() {
                let flag = root
                    .get_arguments()
                    .find(|arg| arg.get_id() == id)
                    .and_then(clap::Arg::get_long);
                if let Some(flag) = flag.filter(|flag| self.given.contains(*flag)) {
                    return Err(ConfigError::NotForCommand {
                        flag: flag.to_owned(),
                        command,
                    });
                }
            }
        }
        Ok(match &self.command {
            None | Some(Command::Serve) => {
                let decision = self.decision()?;
                let env = |name: &str| std::env::var(name).ok();
                let controllers = self.controller.settings(
                    &self.taints,
                    decision.policy.schedulable_from_nodes,
                    &env,
                )?;
                Run::Serve(config::Serve {
                    server: self.server.settings(),
                    kube: self.kube.settings(),
                    decision,
                    registry: self.registry.settings()?,
                    controllers,
                })
            }
            Some(Command::Inspect(inspect)) => Run::Inspect(config::Inspect {
                images: inspect.images.clone(),
                output: inspect.output,
                registry: self.registry.settings()?,
            }),
            Some(Command::Explain(explain)) => Run::Explain(config::Explain {
                file: explain.file.clone(),
                output: explain.output,
                decision: self.decision()?,
                registry: self.registry.settings()?,
            }),
            Some(Command::Untaint(_)) => Run::Untaint(config::Untaint {
                kube: self.kube.settings(),
            }),
            Some(Command::Ungate(ungate)) => Run::Ungate(config::Ungate {
                kube: self.kube.settings(),
                decision: self.decision()?,
                registry: self.registry.settings()?,
                namespace: ungate.namespace()?,
                deadline: ungate.deadline,
                force: ungate.force,
                max_attempts: self.controller.gate_max_attempts,
                delete_webhook_configuration: ungate.delete_webhook_configuration.clone(),
            }),
        })
    }

    /// The decision's configuration, with the tolerations of the tainted arches.
    fn decision(&self) -> Result<config::Decision, ConfigError> {
        let mut decision = self.policy.decision()?;
        self.taints.tolerate(&mut decision.policy)?;
        Ok(decision)
    }

    /// Builds the configuration, sets up logging, and runs the server or the subcommand.
    /// Exit codes: 0 done, 1 failed (an image not resolved, a pod denied by `explain`, the server
    /// could not start, `untaint` could not reach every node), 2 the command line cannot run.
    pub fn run(self) -> ExitCode {
        let run = match self.to_run() {
            Ok(run) => run,
            Err(error) => {
                eprintln!("noe: {error}");
                return ExitCode::from(2);
            }
        };
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
        let code = runtime.block_on(async move {
            match run {
                Run::Serve(config) => serve::run(config).await,
                Run::Inspect(config) => inspect::run(config).await,
                Run::Explain(config) => explain::run(config).await,
                Run::Untaint(config) => untaint::run(config).await,
                Run::Ungate(config) => ungate::run(config).await,
            }
        });
        // A blocking read that never returns (a credential file on a hung mount) must not keep
        // the process alive after its work is done.
        runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
        code
    }
}

/// Every long flag name of `command` and its subcommands.
fn long_flag_names(command: &clap::Command) -> HashSet<String> {
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
    collect(command, &mut names);
    names
}

/// Long names of the flags given on the command line, at the top level or in the subcommand.
fn given_flags(command: &clap::Command, matches: &ArgMatches) -> BTreeSet<String> {
    let mut given = BTreeSet::new();
    let mut levels = vec![(command, matches)];
    while let Some((command, matches)) = levels.pop() {
        for arg in command.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            let on_command_line = matches!(matches.try_get_raw(arg.get_id().as_str()), Ok(Some(_)))
                && matches.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine);
            if on_command_line {
                given.insert(long.to_owned());
            }
        }
        if let Some((name, sub_matches)) = matches.subcommand() {
            if let Some(sub) = command.find_subcommand(name) {
                levels.push((sub, sub_matches));
            }
        }
    }
    given
}

#[cfg(test)]
mod tests;
