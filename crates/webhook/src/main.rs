//! The `noe` binary: installs the rustls crypto provider and runs the command line.

use std::process::ExitCode;

fn main() -> ExitCode {
    // Fails only when a provider is already installed, which is then the one to use.
    let _ = rustls::crypto::ring::default_provider().install_default();
    noe_webhook::args::Args::parse_normalized().run()
}
