//! The command line: `noe` (serve), `noe inspect`, `noe explain`, `noe untaint`, `noe ungate`,
//! `noe report`, `noe learned`.
//!
//! Every flag has an environment variable `NOE_<FLAG_NAME>`, and Go `flag` spellings
//! (`-flag v`, `-flag=v`) are normalised before clap parses (see [`go_flags`]). The flag groups
//! are global: a flag may stand before or after the subcommand and means the same, and a flag
//! the subcommand does not use is refused rather than ignored. A subcommand's `--help` shows only
//! the groups it accepts ([`Args::command_for`]). Each group turns into the typed
//! configuration of what it configures ([`Run`]); nothing below the command line sees a flag.
//!
//! [`flags`] holds the flag groups, [`commands`] the subcommands; serving is `crate::serve`, the
//! composition root.

pub mod commands;
pub mod flags;

use std::collections::{BTreeSet, HashSet};
use std::ffi::OsString;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};

pub use flags::{
    ConfigError, ControllerArgs, KubeArgs, LogArgs, LogFormat, PolicyArgs, RegistryArgs,
    ServerArgs, TaintArgs,
};

use crate::config;
use commands::explain::ExplainArgs;
use commands::inspect::InspectArgs;
use commands::learned::LearnedArgs;
use commands::report::ReportArgs;
use commands::ungate::UngateArgs;
use commands::untaint::UntaintArgs;
use commands::{explain, inspect, learned, report, ungate, untaint};
use flags::go_flags;

/// noe-rs: pins Pods to the CPU architectures all their images support.
///
/// Without a subcommand, runs the admission webhook server.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "noe",
    version,
    about = "Keeps Kubernetes Pods on nodes whose CPU architecture all their images support.\nWithout a subcommand, runs the admission webhook server.",
    long_about = None
)]
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
    /// Which workloads of a cluster or a file could run on a target architecture, and the
    /// capacity that could move.
    Report(ReportArgs),
    /// The learned store (`--detect-exec-format-errors`): `list` its corrections, `forget`
    /// some so the next admissions trust the images' claims again.
    Learned(LearnedArgs),
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
    Report(config::Report),
    Learned(config::Learned),
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
        let argv: Vec<OsString> = argv.into_iter().collect();
        let command = Self::command_for(&argv);
        let argv = go_flags::normalize(argv, &long_flag_names(&command));
        let matches = command.clone().try_get_matches_from(argv)?;
        let mut args = Self::from_arg_matches(&matches)?;
        args.given = given_flags(&command, &matches);
        Ok(args)
    }

    /// The command, built, for the subcommand named in `argv`: the global flags of the groups
    /// it does not accept are hidden from its `--help` (they still parse there, and are refused
    /// by [`Args::to_run`] with a message naming the flag).
    pub fn command_for(argv: &[OsString]) -> clap::Command {
        let mut command = flags::conventions(Self::command());
        let names: Vec<String> = command
            .get_subcommands()
            .map(|sub| sub.get_name().to_owned())
            .collect();
        let subcommand = argv
            .iter()
            .skip(1)
            .filter_map(|arg| arg.to_str())
            .find(|arg| names.iter().any(|name| name == arg));
        if let Some(subcommand) = subcommand {
            let accepted = groups_of(subcommand);
            let foreign: Vec<String> = command
                .get_groups()
                .filter(|group| !accepted.contains(&group.get_id().as_str()))
                .flat_map(|group| group.get_args().map(|id| id.as_str().to_owned()))
                .filter(|id| !also_accepted(subcommand).contains(&id.as_str()))
                .collect();
            for id in foreign {
                command = command.mut_arg(id, |arg| arg.hide(true));
            }
        }
        command.build();
        command
    }

    /// The subcommand's name and the flag groups it uses.
    fn command_and_groups(&self) -> (&'static str, &'static [&'static str]) {
        let name = match &self.command {
            None | Some(Command::Serve) => "serve",
            Some(Command::Inspect(_)) => "inspect",
            Some(Command::Explain(_)) => "explain",
            Some(Command::Untaint(_)) => "untaint",
            Some(Command::Ungate(_)) => "ungate",
            Some(Command::Report(_)) => "report",
            Some(Command::Learned(_)) => "learned",
        };
        (name, groups_of(name))
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
                if also_accepted(command).contains(&id.as_str()) {
                    continue;
                }
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
                let server = self.server.settings();
                if controllers.gate_verify && !server.verify_binaries {
                    return Err(ConfigError::Contradiction(
                        "--gate-verify needs --verify-binaries=background".to_owned(),
                    ));
                }
                Run::Serve(config::Serve {
                    server,
                    kube: self.kube.settings(),
                    decision,
                    registry: self.registry.settings()?,
                    controllers,
                })
            }
            Some(Command::Inspect(inspect)) => {
                let mut registry = self.registry.settings()?;
                // Asking for an account's identity is asking for its tokens.
                registry.sources.service_account_tokens |= inspect.service_account.is_some();
                Run::Inspect(config::Inspect {
                    images: inspect.images.clone(),
                    output: inspect.output,
                    show: inspect.show()?,
                    registry,
                    service_account: inspect.service_account.clone(),
                    kube: self.kube.settings(),
                })
            }
            Some(Command::Explain(explain)) => Run::Explain(config::Explain {
                file: explain.file.clone(),
                output: explain.output,
                allow_lookup_errors: explain.allow_lookup_errors,
                nodes: explain.nodes.clone(),
                decision: self.decision()?,
                registry: self.registry.settings()?,
                kube: self.kube.settings(),
                learned: explain
                    .learned
                    .source(&self.controller.learned_store, false),
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
                facts: config::FactSettings {
                    namespace_preference: self.server.namespace_preference,
                    ephemeral_containers: false,
                },
                watch_nodes: self.controller.watch_nodes,
            }),
            Some(Command::Learned(learned)) => Run::Learned(config::Learned {
                kube: self.kube.settings(),
                store: self.controller.learned_store.trim().to_owned(),
                namespace: learned
                    .namespace
                    .as_deref()
                    .map(str::trim)
                    .filter(|ns| !ns.is_empty())
                    .map(str::to_owned),
                command: learned.command(),
            }),
            Some(Command::Report(report)) => Run::Report(config::Report {
                settings: report.settings()?,
                kube: self.kube.settings(),
                registry: self.registry.settings()?,
                learned: report
                    .learned
                    .source(&self.controller.learned_store, report.file.is_empty()),
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
        if let Run::Serve(config) = &run {
            if let Err(error) = cert_dir_usable(&config.server.cert) {
                eprintln!("noe: {error}");
                return ExitCode::from(2);
            }
        }
        let chosen =
            self.given.contains("log-format") || std::env::var_os("NOE_LOG_FORMAT").is_some();
        let for_people = !matches!(self.command, None | Some(Command::Serve));
        self.log.init(for_people, chosen);
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
                Run::Serve(config) => crate::serve::run(config).await,
                Run::Inspect(config) => inspect::run(config).await,
                Run::Explain(config) => commands::exit(explain::run(config).await),
                Run::Untaint(config) => untaint::run(config).await,
                Run::Ungate(config) => ungate::run(config).await,
                Run::Report(config) => commands::exit(report::run(config).await),
                Run::Learned(config) => learned::run(config).await,
            }
        });
        // A blocking read that never returns (a credential file on a hung mount) must not keep
        // the process alive after its work is done.
        runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
        code
    }
}

/// The server's certificate directory holds `tls.crt` and `tls.key` (else the server would never
/// be ready): refused at start, naming the directory.
fn cert_dir_usable(cert: &config::CertSource) -> Result<(), ConfigError> {
    let config::CertSource::Dir(dir) = cert else {
        return Ok(());
    };
    let missing: Vec<&str> = ["tls.crt", "tls.key"]
        .into_iter()
        .filter(|file| !dir.join(file).is_file())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(ConfigError::Contradiction(format!(
        "--cert-dir {} has no {}: mount the webhook's certificate there, or use --dev-self-signed-cert for a local trial",
        dir.display(),
        missing.join(" or ")
    )))
}

/// Every flag group, the server's own first.
const EVERY_GROUP: &[&str] = &[
    "ServerArgs",
    "KubeArgs",
    "PolicyArgs",
    "ControllerArgs",
    "TaintArgs",
    "RegistryArgs",
    "LogArgs",
];

/// The flag groups the subcommand `name` accepts (every group for the server).
fn groups_of(name: &str) -> &'static [&'static str] {
    match name {
        "inspect" => &["KubeArgs", "RegistryArgs", "LogArgs"],
        "explain" => &[
            "KubeArgs",
            "PolicyArgs",
            "TaintArgs",
            "RegistryArgs",
            "LogArgs",
        ],
        "untaint" | "learned" => &["KubeArgs", "LogArgs"],
        "report" => &["KubeArgs", "RegistryArgs", "LogArgs"],
        // Releases as the server's gate controller does: every group but serving's.
        "ungate" => &EVERY_GROUP[1..],
        _ => EVERY_GROUP,
    }
}

/// The flags (argument ids) the subcommand `name` accepts from groups it does not: `ungate`
/// decides with the server's facts.
fn also_accepted(name: &str) -> &'static [&'static str] {
    match name {
        "ungate" => &["namespace_preference"],
        "learned" | "explain" | "report" => &["learned_store"],
        _ => &[],
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
