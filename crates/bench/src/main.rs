//! `noe-bench`: the measurements of docs/benchmarks.md, run by `scripts/bench.sh`.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    noe_bench::Cli::parse().run()
}
