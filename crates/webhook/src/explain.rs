//! `noe explain -f FILE`: what the webhook would do to a Pod or workload, without a cluster.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::args::{PolicyArgs, RegistryArgs};
use crate::inspect::Output;

#[derive(Clone, Debug, Args)]
pub struct ExplainArgs {
    /// A Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or CronJob (YAML or JSON; `-` = stdin).
    #[arg(long, short = 'f', env = "NOE_FILE")]
    pub file: PathBuf,

    /// `json` prints `{"allowed","message","warnings","patch"}`.
    #[arg(
        long,
        short = 'o',
        env = "NOE_OUTPUT",
        value_enum,
        default_value = "text"
    )]
    pub output: Output,

    #[command(flatten)]
    pub policy: PolicyArgs,

    #[command(flatten)]
    pub registry: RegistryArgs,
}

impl ExplainArgs {
    pub async fn run(self) -> ExitCode {
        eprintln!("noe: explain is not available in this build yet");
        ExitCode::FAILURE
    }
}
