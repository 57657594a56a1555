//! `--log-format` and `--log-level`; `RUST_LOG`, when set, wins over `--log-level`. The commands
//! for people (`inspect`, `explain`, `untaint`) log text on a terminal unless a format is chosen.

use clap::{Args, ValueEnum};
use tracing_subscriber::EnvFilter;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

#[derive(Clone, Debug, Args)]
#[command(next_help_heading = "Logging")]
pub struct LogArgs {
    /// Log output format (default: json; text for `inspect`, `explain` and `untaint` on a
    /// terminal).
    #[arg(long, value_enum, default_value = "json")]
    pub log_format: LogFormat,

    /// Log level or tracing filter (`info`, `debug`, `noe_registry=debug,info`); RUST_LOG wins when set.
    #[arg(long, default_value = "info", value_parser = parse_filter)]
    pub log_level: String,
}

fn parse_filter(text: &str) -> Result<String, String> {
    EnvFilter::try_new(text)
        .map(|_| text.to_owned())
        .map_err(|error| format!("invalid log level {text:?}: {error}"))
}

impl LogArgs {
    /// Installs the global subscriber, writing to stderr. A second call is a no-op. `for_people`:
    /// a command a person runs, which logs text on a terminal unless `--log-format` (or
    /// `NOE_LOG_FORMAT`) chose otherwise (`chosen`).
    pub fn init(&self, for_people: bool, chosen: bool) {
        let filter = match std::env::var("RUST_LOG") {
            Ok(spec) if !spec.trim().is_empty() => {
                EnvFilter::try_new(&spec).unwrap_or_else(|_| EnvFilter::new(&self.log_level))
            }
            _ => EnvFilter::new(&self.log_level),
        };
        // Colours only for a person at a terminal, never into files, pipes or log collectors.
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(ansi)
            .with_writer(std::io::stderr);
        // `try_init` fails only when a subscriber is already set (tests): keep that one.
        let format = if for_people && !chosen && ansi {
            LogFormat::Text
        } else {
            self.log_format
        };
        let _ = match format {
            LogFormat::Json => builder.json().flatten_event(true).try_init(),
            LogFormat::Text => builder.try_init(),
        };
    }
}
