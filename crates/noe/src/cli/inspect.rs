//! `noe inspect IMAGE...`: the platforms of images, as the webhook sees them.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use noe_registry::Resolution;
use noe_webhook::resolve::one_line;

use crate::app::{App, Overridden};
use crate::config::{self, Output};

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
}

/// Prints each image's resolution; exit 1 (one line per failure on stderr) when any image
/// cannot be resolved, 2 when the registry configuration cannot be used.
pub async fn run(config: config::Inspect) -> ExitCode {
    let config::Inspect {
        images,
        output,
        registry,
    } = config;
    let app = match App::build(registry).await {
        Ok(app) => app,
        Err(error) => {
            eprintln!("noe: {}", one_line(&error));
            return ExitCode::from(2);
        }
    };
    let mut failed = false;
    let mut stdout = std::io::stdout().lock();
    for image in &images {
        // A reference that does not parse fails below, with the usual message.
        if let Ok(Some(found)) = app.platform_override(image).await {
            let printed = match output {
                Output::Json => serde_json::to_string(&found.json())
                    .map_err(std::io::Error::other)
                    .and_then(|line| writeln!(stdout, "{line}")),
                Output::Text => found.write_text(&mut stdout),
            };
            if printed.is_err() {
                return ExitCode::FAILURE;
            }
            continue;
        }
        match app.resolve(image).await {
            Ok(resolution) => {
                let printed = match output {
                    Output::Json => serde_json::to_string(&*resolution)
                        .map_err(std::io::Error::other)
                        .and_then(|line| writeln!(stdout, "{line}")),
                    Output::Text => write_text(&mut stdout, &resolution),
                };
                if printed.is_err() {
                    return ExitCode::FAILURE;
                }
            }
            Err(error) => {
                failed = true;
                let reason = printable(&one_line(&error));
                let image = printable(image);
                if reason.contains(image.as_str()) {
                    eprintln!("noe: {reason}");
                } else {
                    eprintln!("noe: {image}: {reason}");
                }
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `text` with control characters escaped, so a registry cannot write to the terminal.
fn printable(text: &str) -> String {
    if text.chars().any(char::is_control) {
        text.chars()
            .flat_map(|c| {
                if c.is_control() {
                    c.escape_default().collect::<Vec<_>>()
                } else {
                    vec![c]
                }
            })
            .collect()
    } else {
        text.to_owned()
    }
}

fn write_text(out: &mut impl Write, resolution: &Resolution) -> std::io::Result<()> {
    let registry = resolution
        .resolved
        .split_once('/')
        .map_or(resolution.resolved.as_str(), |(host, _)| host);
    let platforms: Vec<String> = resolution
        .platforms
        .iter()
        .map(|platform| printable(&platform.to_string()))
        .collect();
    writeln!(out, "image:       {}", printable(&resolution.image))?;
    writeln!(out, "resolved:    {}", printable(&resolution.resolved))?;
    writeln!(out, "registry:    {}", printable(registry))?;
    writeln!(out, "mediaType:   {}", printable(&resolution.media_type))?;
    writeln!(out, "digest:      {}", printable(&resolution.digest))?;
    writeln!(
        out,
        "credential:  {}",
        printable(
            resolution
                .credential_source
                .as_deref()
                .unwrap_or("anonymous")
        )
    )?;
    writeln!(out, "platforms:   {}", platforms.join(" "))?;
    writeln!(out, "answeredBy:  {}", resolution.answered_by.as_str())?;
    writeln!(out)
}

impl Overridden {
    /// The `--output json` line: the usual keys (no digest, media type or credential: no
    /// registry was contacted) and `override`.
    fn json(&self) -> serde_json::Value {
        let resolution = self.matched.resolution(&self.reference);
        let mut json = serde_json::to_value(&resolution).unwrap_or_default();
        json["credentialSource"] = serde_json::json!("none");
        json["override"] = serde_json::json!({
            "file": self.file.display().to_string(),
            "entry": self.matched.entry,
            "pattern": self.matched.pattern,
        });
        json
    }

    fn write_text(&self, out: &mut impl Write) -> std::io::Result<()> {
        let platforms: Vec<String> = self
            .matched
            .platforms
            .iter()
            .map(ToString::to_string)
            .collect();
        writeln!(
            out,
            "image:       {}",
            printable(&self.reference.to_string())
        )?;
        writeln!(
            out,
            "override:    {} entry {} (pattern {}): no registry contacted",
            printable(&self.file.display().to_string()),
            self.matched.entry,
            printable(&self.matched.pattern)
        )?;
        writeln!(out, "platforms:   {}", platforms.join(" "))?;
        writeln!(out)
    }
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("linux/amd64"), "linux/amd64");
        assert_eq!(printable("a\nb\u{1b}[31m"), "a\\nb\\u{1b}[31m");
        assert_eq!(printable("tab\there"), "tab\\there");
    }
}
