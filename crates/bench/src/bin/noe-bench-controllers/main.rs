//! `noe-bench-controllers`: the controller measurements of docs/benchmarks.md ("Controllers").
//!
//! - `memory`: RSS of a process running the node and pod reflectors (remediation in `report`
//!   mode) over 1,000 nodes and 20,000 pods served by the scripted API server
//!   (`noe_test_support::KubeApi`, realistic JSON with managedFields, env, volumes, probes),
//!   above the same process idle. The API server runs in this process; the controllers in a
//!   child (this binary, `child`), so its RSS holds only what the controllers cost.
//! - `nodeview`: nanoseconds per `NodeView::archs()` and `NodeView::node(name)` call.
//! - `latency`: time from a wrong-arch pod appearing in the watch to its Event and its eviction
//!   request arriving at the API server, over a bounded number of pods added one at a time.
//! - `process`: the real `noe` binary with `--kubeconfig --watch-nodes --remediate=report`: RSS
//!   above the same binary idle, and wrong-arch pod to Event through the webhook's resolver.
//! - `nodefeatures`: the real `noe` binary with `--watch-nodes --image-selection`, with and
//!   without `--watch-node-features`, over N nodes in G groups of nfd-worker `NodeFeature`s.
//! - `detect`: the real `noe` binary with `--detect-exec-format-errors` over N pods of which C
//!   crash-loop: RSS above idle and previous-log reads per container restart.
//! - `learned`: RSS of the real `noe` binary reading a learned store of N entries, beside one
//!   reading an empty store.
//! - `learn-latency`: time from a crash's status update to its learned entry, the API server
//!   behind a fixed round trip.
//!
//! Not a test: it measures and prints markdown, it asserts nothing about timing.

mod detect;
mod latency;
mod learn_latency;
mod learned;
mod nodefeatures;
mod nodeview;
mod process;
mod reflector_memory;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// noe-rs controller benchmarks.
#[derive(Debug, Parser)]
#[command(name = "noe-bench-controllers")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Reflector memory: RSS above idle with N nodes and M pods.
    Memory(reflector_memory::Options),
    /// Time from a wrong-arch pod in the watch to its Event and eviction request.
    Latency(latency::Options),
    /// What the admission path pays to read the node store.
    Nodeview(nodeview::Options),
    /// The real `noe` process: reflector memory and wrong-arch pod to Event.
    Process(process::Options),
    /// The real `noe` process: RSS of `--watch-node-features` over N nodes in G node groups.
    Nodefeatures(nodefeatures::Options),
    /// The real `noe` process: detection's RSS and log reads per restart over N pods, C crashing.
    Detect(detect::Options),
    /// The real `noe` process: RSS added by a learned store of N entries.
    Learned(learned::Options),
    /// Time from a crash's status update to its learned entry, at a fixed API round trip.
    LearnLatency(learn_latency::Options),
    /// (internal) The measured process of `memory`.
    Child(reflector_memory::ChildOptions),
}

fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("noe-bench-controllers: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Memory(options) => reflector_memory::run(&options).await,
            Command::Latency(options) => latency::run(&options).await,
            Command::Child(options) => reflector_memory::child(&options).await,
            Command::Process(options) => process::run(&options).await,
            Command::Nodefeatures(options) => nodefeatures::run(&options).await,
            Command::Detect(options) => detect::run(&options).await,
            Command::Learned(options) => learned::run(&options).await,
            Command::LearnLatency(options) => learn_latency::run(&options).await,
            Command::Nodeview(options) => {
                nodeview::run(&options);
                Ok(())
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("noe-bench-controllers: {error:#}");
            ExitCode::FAILURE
        }
    }
}
