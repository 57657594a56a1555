//! The `noe` binary: installs the rustls crypto provider and runs the command line.

use std::process::ExitCode;

/// mimalloc instead of the system allocator: the admission path makes many small, short-lived
/// allocations (the review's JSON tree, the patch) on two worker threads, and glibc's malloc was
/// a large share of the warm path's CPU time (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Fails only when a provider is already installed, which is then the one to use.
    let _ = rustls::crypto::ring::default_provider().install_default();
    noe::cli::Args::parse_normalized().run()
}
