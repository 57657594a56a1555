//! noe-rs benchmarks (the targets of docs/benchmarks.md). Not a test suite: it measures and prints tables, it asserts
//! nothing about timing. `scripts/bench.sh` builds the release `noe` and runs `noe-bench all`.
//!
//! - [`cluster`]: a simulated cluster (nodes and pods) for the scripted API server, shared with
//!   `noe-bench-controllers`.
//! - [`floor`]: the floor server, a minimal HTTPS admission endpoint on the same TLS stack as
//!   `noe` (hyper 1 auto builder + tokio-rustls, ring) that parses the request JSON and answers
//!   a constant AdmissionReview.
//! - [`warm`]: `noe` (platforms cached) and the floor driven side by side by `wrk`; with
//!   `--controllers`, also `noe` running its controllers over a simulated cluster.
//! - [`fresh`]: the warm path with every pod new (`warm --every-pod-new`), beside the same pod
//!   sent again, against the floor that parses and the floor that only reads.
//! - [`requests`]: registry HTTP requests per unique image, from the real registry's access log,
//!   and N concurrent admissions of one uncached image.
//! - [`memory`]: RSS of `noe` holding 100k cached lookups.
//! - [`startup`]: exec to `/readyz` answering 200.
//! - [`pulls`]: counted pulls (manifest GETs) against HEADs over a simulated day.
//! - [`fleet`]: registry requests of 3 replicas without and with a shared cache (real
//!   `redis-server`), and admissions while it is killed.
//! - [`cold`]: cold admissions of K images through a proxy adding a round trip.
//! - [`policy_endpoint`]: the policy engines' endpoint (Gatekeeper requests of 1 and 64 cached
//!   keys) against the floor, side by side like [`warm`].
//! - [`gate`]: the gate and hybrid lookup modes beside inline (admission latency against a slow
//!   registry, creation to release, API writes, a storm of gated pods).
//! - [`hostile`]: hostile NFD image-compatibility artifacts (deep nesting, tens of thousands of
//!   regular expressions): CPU seconds and peak RSS of `noe explain` deciding one pod.
//! - [`report`]: `noe report` over 10,000 workloads and 1,000 images through a proxy adding a
//!   round trip (wall time, peak RSS, requests per image).
//! - [`verify`]: verification by the images' own programs (bytes read, memory of 100 at once,
//!   admission latency during a burst beside `--verify-binaries=off`).

pub mod cluster;
pub mod cold;
pub mod fleet;
pub mod floor;
pub mod fresh;
pub mod gate;
pub mod hostile;
pub mod images;
pub mod memory;
pub mod noe;
pub mod policy_endpoint;
pub mod pulls;
pub mod report;
pub mod requests;
pub mod startup;
pub mod verify;
pub mod warm;
pub mod wrk;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// noe-rs benchmarks.
#[derive(Debug, Parser)]
#[command(name = "noe-bench")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the floor: parse each request as JSON, answer a constant AdmissionReview.
    Floor {
        /// Listen address.
        #[arg(long)]
        addr: SocketAddr,
        /// Directory holding tls.crt and tls.key.
        #[arg(long)]
        cert_dir: PathBuf,
        /// Answer this file's bytes instead of the constant AdmissionReview (the lookup
        /// endpoint's floor answers a body as long as the endpoint's).
        #[arg(long)]
        response: Option<PathBuf>,
        /// What it does with each body: `parse` it into a JSON value, or only `read` it (the
        /// uid cut out by a byte search and written into the answer).
        #[arg(long, value_enum, default_value_t = floor::Work::Parse)]
        work: floor::Work,
    },
    /// Print the review `warm --every-pod-new` sends, its label's value `@POD@` (for
    /// scripts/instructions-per-admission.sh).
    Review {
        /// The Deployment's pod as the apiserver sends it, not the minimal one.
        #[arg(long)]
        deployment_pod: bool,
        /// The pod's image.
        #[arg(long)]
        image: String,
    },
    /// Run every measurement and print markdown tables.
    All(Options),
    /// Warm path only.
    Warm(Options),
    /// Registry requests only.
    Requests(Options),
    /// Memory only.
    Memory(Options),
    /// Start-up time only.
    Startup(Options),
    /// Counted pulls (manifest GETs) and HEADs over a simulated day (`--baseline` runs it too).
    Pulls(Options),
    /// Registry requests of a fleet of 3 replicas, without and with a shared cache.
    Fleet(Options),
    /// Cold admissions of 1, 5 and 20 images through a proxy adding `--rtt`.
    Cold(Options),
    /// The gate and hybrid lookup modes beside inline.
    Gate(Options),
    /// `noe report` over 10,000 workloads and 1,000 images through a proxy adding `--rtt`.
    Report(Options),
    /// `noe report` with and without upgrade paths (100 blocked images of 1,000 tags), and its
    /// HTML page in headless Chromium.
    ReportUpgrades(Options),
    /// The policy engines' lookup endpoint, warm (1 and 64 keys), beside the floor.
    Lookup(Options),
    /// Hostile NFD artifacts: CPU seconds and peak RSS of `noe explain` (and `--baseline`).
    Hostile(Options),
    /// Verification: bytes read, memory of 100 at once, admissions during a burst.
    Verify(Options),
}

/// What the warm path's floor answers (see [`Options::floor_answer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FloorAnswer {
    /// noe's own answer to the bench's review, byte for byte.
    Noe,
    /// A constant AdmissionReview without a patch.
    Constant,
}

/// Shared options.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// The `noe` binary to measure (a release build).
    #[arg(long, default_value = "target/release/noe")]
    pub noe: PathBuf,
    /// `warm`: another `noe` binary (e.g. built from an earlier commit) measured in the same
    /// alternating rounds, to compare two builds side by side.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// `warm`: run `noe` (not the baseline) with `--namespace-preference` against a scripted API
    /// server whose namespace carries the preferred-arch label, to measure what reading it costs.
    #[arg(long)]
    pub namespace_preference: bool,
    /// `warm`: send a pod as the apiserver sends a Deployment's (field-manager entries, env,
    /// probes, resources, status: about 3.7 KiB) instead of the minimal one (about 500 bytes).
    #[arg(long)]
    pub deployment_pod: bool,
    /// `warm`: what the floor answers: `noe` (the default) sends noe's own answer to the bench's
    /// review, byte for byte (a constant response as long as noe's, its patch included, as the
    /// lookup endpoint's floor does); `constant` sends a constant AdmissionReview without a patch
    /// (134 bytes, the floor's answer before).
    #[arg(long, value_enum, default_value_t = FloorAnswer::Noe)]
    pub floor_answer: FloorAnswer,
    /// `warm`: every request a pod never seen before (a label of its own), so nothing can be
    /// remembered; measured beside the same pod sent again, against each `--floor`.
    #[arg(long)]
    pub every_pod_new: bool,
    /// `warm --every-pod-new`: the floors measured in the same rounds (comma-separated): `parse`
    /// (the body parsed into a JSON value) and `read` (the body read, nothing parsed: the uid
    /// cut out by a byte search).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "parse,read")]
    pub floor: Vec<floor::Work>,
    /// `lookup`: every request body new (the same cached keys in an order no other request of
    /// the run has), so no answer can be remembered; measured beside the same body sent again.
    #[arg(long)]
    pub unique_bodies: bool,
    /// wrk run length per round.
    #[arg(long, default_value = "10s", value_parser = parse_seconds)]
    pub duration: Duration,
    /// wrk concurrent keep-alive connections.
    #[arg(long, default_value_t = 64)]
    pub connections: u32,
    /// wrk threads.
    #[arg(long, default_value_t = 2)]
    pub threads: u32,
    /// Alternating floor/noe rounds.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Cached entries for the memory measurement.
    #[arg(long, default_value_t = 100_000)]
    pub entries: u32,
    /// Concurrent admissions of one uncached image.
    #[arg(long, default_value_t = 64)]
    pub concurrent: usize,
    /// Start-up samples.
    #[arg(long, default_value_t = 10)]
    pub starts: u32,
    /// `warm`: also measure `noe` running its controllers (`--watch-nodes --remediate=report`)
    /// over a simulated cluster served by the scripted API server, in the same rounds.
    #[arg(long)]
    pub controllers: bool,
    /// Nodes of the simulated cluster (`--controllers`).
    #[arg(long, default_value_t = 1000)]
    pub cluster_nodes: usize,
    /// Pods of the simulated cluster (`--controllers`).
    #[arg(long, default_value_t = 20_000)]
    pub cluster_pods: usize,
    /// `pulls`: simulated hours.
    #[arg(long, default_value_t = 24)]
    pub hours: usize,
    /// `pulls`: real time standing for one hour (the `--cache-ttl` of the run).
    #[arg(long, default_value = "1000ms", value_parser = parse_millis)]
    pub hour: Duration,
    /// `pulls`: admissions per simulated hour.
    #[arg(long, default_value_t = 12)]
    pub per_hour: usize,
    /// `fleet`: `--shared-cache-timeout` of the replicas.
    #[arg(long, default_value = "10ms")]
    pub shared_cache_timeout: String,
    /// `cold`: the round trip the proxy adds.
    #[arg(long, default_value = "50ms", value_parser = parse_millis)]
    pub rtt: Duration,
    /// `cold`: pods per K.
    #[arg(long, default_value_t = 5)]
    pub samples: usize,
    /// `verify`: only this part (`bytes`, `memory` or `burst`); every part when absent.
    #[arg(long)]
    pub verify_part: Option<String>,
}

fn parse_millis(text: &str) -> Result<Duration, String> {
    let digits = text.strip_suffix("ms").unwrap_or(text);
    digits
        .parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|e| format!("{text:?}: expected whole milliseconds like 50ms ({e})"))
}

fn parse_seconds(text: &str) -> Result<Duration, String> {
    let digits = text.strip_suffix('s').unwrap_or(text);
    digits
        .parse::<u64>()
        .map(Duration::from_secs)
        .map_err(|e| format!("{text:?}: expected whole seconds like 10s ({e})"))
}

impl Cli {
    /// Runs the chosen command.
    pub fn run(self) -> ExitCode {
        let runtime = match tokio::runtime::Runtime::new() {
            Ok(runtime) => runtime,
            Err(error) => {
                eprintln!("noe-bench: cannot start the runtime: {error}");
                return ExitCode::FAILURE;
            }
        };
        let result = runtime.block_on(async {
            match self.command {
                Command::Floor {
                    addr,
                    cert_dir,
                    response,
                    work,
                } => floor::serve(addr, &cert_dir, response.as_deref(), work).await,
                Command::Review {
                    deployment_pod,
                    image,
                } => {
                    println!("{}", fresh::body(deployment_pod, image)?);
                    Ok(())
                }
                Command::All(options) => {
                    startup::run(&options).await?;
                    requests::run(&options).await?;
                    memory::run(&options).await?;
                    cold::run(&options).await?;
                    pulls::run(&options).await?;
                    fleet::run(&options).await?;
                    gate::run(&options).await?;
                    report::run(&options).await?;
                    report::upgrades::run(&options).await?;
                    policy_endpoint::run(&options).await?;
                    verify::run(&options).await?;
                    warm::run(&options).await
                }
                Command::Warm(options) => warm::run(&options).await,
                Command::Requests(options) => requests::run(&options).await,
                Command::Memory(options) => memory::run(&options).await,
                Command::Startup(options) => startup::run(&options).await,
                Command::Pulls(options) => pulls::run(&options).await,
                Command::Fleet(options) => fleet::run(&options).await,
                Command::Cold(options) => cold::run(&options).await,
                Command::Gate(options) => gate::run(&options).await,
                Command::Report(options) => report::run(&options).await,
                Command::ReportUpgrades(options) => report::upgrades::run(&options).await,
                Command::Lookup(options) => policy_endpoint::run(&options).await,
                Command::Hostile(options) => hostile::run(&options).await,
                Command::Verify(options) => verify::run(&options).await,
            }
        });
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("noe-bench: {error:#}");
                ExitCode::FAILURE
            }
        }
    }
}
