//! `noe inspect IMAGE...`: the platforms of images, as the webhook sees them.

use std::process::ExitCode;

use std::io::Write;

use clap::{Args, ValueEnum};
use noe_registry::Resolution;

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
    /// Prints each image's resolution; exit 1 (one line per failure on stderr) when any image
    /// cannot be resolved.
    pub async fn run(self) -> ExitCode {
        let (resolver, sources) = match self.registry.build(&prometheus::Registry::new()).await {
            Ok(built) => built,
            Err(reason) => {
                eprintln!("noe: {reason}");
                return ExitCode::from(2);
            }
        };
        let credentials = crate::lookup::Credentials {
            resolver: resolver.clone(),
            sources: std::sync::Arc::new(sources),
            pull_secrets: None,
        };
        let mut failed = false;
        let mut stdout = std::io::stdout().lock();
        for image in &self.images {
            let candidates = credentials.candidates(image, None).await;
            match resolver.resolve(image, &candidates).await {
                Ok(resolution) => {
                    let printed = match self.output {
                        Output::Json => serde_json::to_string(&*resolution)
                            .map(|line| writeln!(stdout, "{line}"))
                            .unwrap_or(Ok(())),
                        Output::Text => write_text(&mut stdout, &resolution),
                    };
                    if printed.is_err() {
                        return ExitCode::FAILURE;
                    }
                }
                Err(error) => {
                    failed = true;
                    eprintln!("noe: {image}: {}", one_line(&error));
                }
            }
        }
        if failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    }
}

/// The error and its sources on one line.
pub fn one_line(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let inner_text = inner.to_string();
        if !text.contains(&inner_text) {
            text.push_str(": ");
            text.push_str(&inner_text);
        }
        source = inner.source();
    }
    text.replace('\n', " ")
}

fn write_text(out: &mut impl Write, resolution: &Resolution) -> std::io::Result<()> {
    let registry = resolution
        .resolved
        .split_once('/')
        .map_or(resolution.resolved.as_str(), |(host, _)| host);
    let platforms: Vec<String> = resolution
        .platforms
        .iter()
        .map(ToString::to_string)
        .collect();
    writeln!(out, "image:       {}", resolution.image)?;
    writeln!(out, "resolved:    {}", resolution.resolved)?;
    writeln!(out, "registry:    {registry}")?;
    writeln!(out, "mediaType:   {}", resolution.media_type)?;
    writeln!(out, "digest:      {}", resolution.digest)?;
    writeln!(
        out,
        "credential:  {}",
        resolution
            .credential_source
            .as_deref()
            .unwrap_or("anonymous")
    )?;
    writeln!(out, "platforms:   {}", platforms.join(" "))?;
    writeln!(out)
}
