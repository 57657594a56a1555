//! Exec format error detection in the real `noe` process over a large cluster: RSS with
//! `--detect-exec-format-errors` over N bound pods of which C crash-loop (each a suspect whose
//! previous log is read), above the same binary idle, and the previous-log reads per container
//! restart over two rounds of restarts (every crash-looping container restarts once more after
//! the first round is read).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::bail;
use noe_bench::cluster::{arm_node, populate_with};
use noe_bench::noe::start_noe_env;
use noe_test_support::{crash_loop, Crash, KubeApi, PodFixture, PodLog};

use crate::learned::{put_store, NAMESPACE, POD_ENV};
use crate::process::Cluster;

/// `detect` options.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// The `noe` binary to measure (a release build).
    #[arg(long, default_value = "target/release/noe")]
    pub noe: PathBuf,
    /// Nodes in the cluster (half amd64, half arm64; at least 2).
    #[arg(long, default_value_t = 5000)]
    pub nodes: usize,
    /// Bound pods in the cluster, the crash-looping ones included.
    #[arg(long, default_value_t = 150_000)]
    pub pods: usize,
    /// Pods among them whose container crash-loops (exit 1 at once, on an arm64 node); one in
    /// ten logs `exec /app: exec format error` (learned), the others another error.
    #[arg(long, default_value_t = 1000)]
    pub crashlooping: usize,
    /// `--log-reads-per-second` of the measured process (1-100; at the default 5, the first
    /// round alone would take C / 5 seconds).
    #[arg(long, default_value_t = 100)]
    pub log_reads_per_second: u32,
}

/// Pod `i` of the crash-looping ones, at its `restarts`-th restart.
fn crashed(i: usize, nodes: usize, restarts: u32, image: &str) -> serde_json::Value {
    let node = arm_node(i % (nodes / 2).max(1));
    let mut pod = PodFixture::new("crashing", &format!("crash-{i:05}"), &node, &[image]).json();
    let image_id = format!("registry.example.com/crash/app@sha256:{i:064x}");
    crash_loop(&mut pod, 0, &Crash::new(&image_id, restarts));
    pod
}

/// Previous-log requests the API server answered so far.
fn log_reads(api: &KubeApi) -> usize {
    api.requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path.ends_with("/log"))
        .count()
}

/// Waits until `want` previous logs were read (at most `limit`).
async fn wait_reads(api: &KubeApi, want: usize, limit: Duration) -> anyhow::Result<Duration> {
    let started = Instant::now();
    while log_reads(api) < want {
        if started.elapsed() > limit {
            bail!(
                "{} of {want} previous logs read after {limit:?}",
                log_reads(api)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(started.elapsed())
}

pub async fn run(options: &Options) -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let (tls, api) = (&cluster.tls, &cluster.api);
    let crashing = options.crashlooping.min(options.pods);
    let started = Instant::now();
    populate_with(api, options.nodes, options.pods - crashing, &cluster.pool);
    let image = cluster.fixtures.docker_list.reference();
    for i in 0..crashing {
        let text: &[u8] = if i.is_multiple_of(10) {
            b"exec /app: exec format error\n"
        } else {
            b"Error: open /etc/app/config.yaml: no such file or directory\n"
        };
        api.set_log(
            "crashing",
            &format!("crash-{i:05}"),
            "c0",
            true,
            PodLog::Text(text.to_vec()),
        );
        api.put_pod(crashed(i, options.nodes, 1, &image));
    }
    put_store(api, NAMESPACE, &[]);
    eprintln!(
        "populated {} nodes and {} pods ({crashing} crash-looping) in {:.1} s",
        options.nodes,
        options.pods,
        started.elapsed().as_secs_f64()
    );
    let (kubeconfig, insecure) = cluster.noe_args()?;

    let idle_rss = crate::process::idle_rss(&options.noe, tls, &insecure).await?;

    let noe = start_noe_env(
        &options.noe,
        tls,
        &[
            insecure,
            format!("--kubeconfig={}", kubeconfig.display()),
            "--detect-exec-format-errors".to_owned(),
            format!("--log-reads-per-second={}", options.log_reads_per_second),
        ],
        POD_ENV,
    )
    .await?;
    let limit = Duration::from_secs(900);
    let first = wait_reads(api, crashing, limit).await?;
    // Every crash-looping container restarts once more.
    for i in 0..crashing {
        api.put_pod(crashed(i, options.nodes, 2, &image));
    }
    // The learned ones were reported: their Event is written, their log not read again.
    let learned = crashing.div_ceil(10);
    let second = wait_reads(api, 2 * crashing - learned, limit).await?;
    // Anything more would be a second read of one restart.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let reads = log_reads(api);
    let (rss, peak) = noe.rss_kib()?;
    let entries = noe.metric("noe_learned_corrections").await?;
    drop(noe);

    let restarts = 2 * crashing;
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!("## Controllers: exec format error detection over a large cluster");
    println!();
    println!(
        "`noe --kubeconfig ... --detect-exec-format-errors --log-reads-per-second={}` over {} nodes and {} bound pods, {crashing} of them crash-looping on arm64 nodes (one in ten logs `exec format error`), served by the scripted API server; two rounds of restarts; the idle process is the same binary without controllers.",
        options.log_reads_per_second, options.nodes, options.pods
    );
    println!();
    println!("| RSS idle MiB | RSS after MiB | above idle MiB | peak MiB | target |");
    println!("|---:|---:|---:|---:|---|");
    println!(
        "| {:.1} | {:.1} | {:.1} | {:.1} | peak < 384 MiB (the chart's limit at 150,000 pods) |",
        mib(idle_rss),
        mib(rss),
        mib(rss.saturating_sub(idle_rss)),
        mib(peak),
    );
    println!();
    println!(
        "| container restarts | previous logs read | reads per restart | learned entries | first round s | second round s | target |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---|");
    println!(
        "| {restarts} | {reads} | {:.3} | {entries} | {:.1} | {:.1} | ≤ 1 read per restart |",
        reads as f64 / restarts.max(1) as f64,
        first.as_secs_f64(),
        second.as_secs_f64()
    );
    println!();
    Ok(())
}
