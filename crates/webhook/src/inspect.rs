//! `noe inspect IMAGE...`: the platforms of images, as the webhook sees them.

use std::process::ExitCode;

use clap::{Args, ValueEnum};

use crate::args::RegistryArgs;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Output {
    #[default]
    Text,
    Json,
}

#[derive(Clone, Debug, Args)]
pub struct InspectArgs {
    /// Image references (`nginx:1.27`, `ghcr.io/org/app@sha256:...`).
    #[arg(required = true)]
    pub images: Vec<String>,

    /// `json` prints one JSON object per image and line.
    #[arg(
        long,
        short = 'o',
        env = "NOE_OUTPUT",
        value_enum,
        default_value = "text"
    )]
    pub output: Output,

    #[command(flatten)]
    pub registry: RegistryArgs,
}

impl InspectArgs {
    pub async fn run(self) -> ExitCode {
        eprintln!("noe: inspect is not available in this build yet");
        ExitCode::FAILURE
    }
}
