//! What the learned store costs each replica: RSS of the real `noe` process with
//! `--detect-exec-format-errors` reading a store of N entries (each near the 1 KiB bound: a long
//! image reference and a 256-byte message), beside the same process reading an empty store, in
//! alternating rounds.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::bail;
use noe_bench::noe::{start_noe_env, Process, Tls};
use noe_controller::learned::{Entry, Evidence, DEFAULT_NAME};
use noe_controller::Platform;
use noe_core::truth::Source;
use noe_test_support::{node_json, KubeApi, Resource};
use serde_json::json;

/// noe's namespace in these benchmarks.
pub const NAMESPACE: &str = "noe-system";
/// The environment the chart gives noe's pod.
pub const POD_ENV: &[(&str, &str)] = &[("POD_NAME", "noe-0"), ("POD_NAMESPACE", NAMESPACE)];

/// `learned` options.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// The `noe` binary to measure (a release build).
    #[arg(long, default_value = "target/release/noe")]
    pub noe: PathBuf,
    /// Entries of the full store (`--learned-max-entries` is raised to fit).
    #[arg(long, default_value_t = 1000)]
    pub entries: usize,
    /// Rounds, each an empty-store process then a full-store one.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
}

/// Entry `i`: its own digest, linux/arm64, evidence at its bounds.
pub fn entry(i: usize) -> Entry {
    let image = format!(
        "registry.example.com/a-team-with-a-long-name/{}/service-{i:05}:v1.{i}.0-build.{i}",
        "x".repeat(120)
    );
    let message = format!("exec /app: exec format error {}", "y".repeat(256));
    Entry::new(
        &image,
        &format!("sha256:{i:064x}"),
        &Platform::new("linux", "arm64", None),
        Source::ExecFormatError,
        Evidence {
            namespace: "shop".to_owned(),
            pod: format!("web-5d8f7c9b4-{i:05}"),
            container: "app".to_owned(),
            node: format!("ip-10-0-{}-{}.eu-west-1.compute.internal", i / 250, i % 250),
            message,
            time: "2026-11-28T09:00:00Z".to_owned(),
        },
    )
}

/// The store's ConfigMap in `namespace`, holding `entries`.
pub fn put_store(api: &KubeApi, namespace: &str, entries: &[Entry]) {
    let data: serde_json::Map<String, serde_json::Value> = entries
        .iter()
        .filter_map(|entry| Some((entry.key(), json!(serde_json::to_string(entry).ok()?))))
        .collect();
    api.put(
        Resource::ConfigMaps,
        namespace,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": DEFAULT_NAME, "namespace": namespace}, "data": data}),
    );
}

/// Starts noe reading the store of `namespace`; returns it once it holds `entries` corrections
/// and three more seconds passed (the allocator settles).
async fn reading(
    options: &Options,
    api: &KubeApi,
    tls: &Tls,
    kubeconfig: &std::path::Path,
    namespace: &str,
    entries: usize,
) -> anyhow::Result<Process> {
    let env = [("POD_NAME", "noe-0"), ("POD_NAMESPACE", namespace)];
    let started = Instant::now();
    let noe = start_noe_env(
        &options.noe,
        tls,
        &[
            format!("--kubeconfig={}", kubeconfig.display()),
            "--detect-exec-format-errors".to_owned(),
            format!(
                "--learned-max-entries={}",
                entries.max(noe_controller::learned::DEFAULT_MAX_ENTRIES)
            ),
        ],
        &env,
    )
    .await?;
    // Read once its watch has listed it (a watch follows the list) and the gauge says so.
    let path = format!("/api/v1/namespaces/{namespace}/configmaps");
    loop {
        let watched = api.requests().iter().any(|r| {
            r.method == "GET"
                && r.path == path
                && r.query.contains("watch=true")
                && r.received > started
        });
        if watched && noe.metric("noe_learned_corrections").await.ok() == Some(entries as f64) {
            break;
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!("the store of {namespace} was not read within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    Ok(noe)
}

pub async fn run(options: &Options) -> anyhow::Result<()> {
    let tls = Tls::new()?;
    let api = KubeApi::start().await?;
    api.put_node(node_json("amd-1", "amd64", "linux"));
    api.put_node(node_json("arm-1", "arm64", "linux"));
    let entries: Vec<Entry> = (0..options.entries).map(entry).collect();
    let bytes: usize = entries
        .iter()
        .filter_map(|e| serde_json::to_string(e).ok())
        .map(|text| text.len())
        .sum();
    put_store(&api, "noe-empty", &[]);
    put_store(&api, "noe-full", &entries);
    let kubeconfig = tls.dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, api.kubeconfig_yaml())?;

    let mut added = Vec::with_capacity(options.rounds);
    let mut rows = Vec::with_capacity(options.rounds);
    for _ in 0..options.rounds.max(1) {
        let empty = reading(options, &api, &tls, &kubeconfig, "noe-empty", 0).await?;
        let (empty_rss, _) = empty.rss_kib()?;
        drop(empty);
        let full = reading(options, &api, &tls, &kubeconfig, "noe-full", entries.len()).await?;
        let (full_rss, _) = full.rss_kib()?;
        drop(full);
        let diff = full_rss as f64 - empty_rss as f64;
        added.push(diff);
        rows.push((empty_rss, full_rss));
    }
    added.sort_by(f64::total_cmp);
    let mib = |kib: f64| kib / 1024.0;
    let median = added.get(added.len() / 2).copied().unwrap_or_default();
    println!("## Controllers: the learned store's memory per replica");
    println!();
    println!(
        "`noe --kubeconfig ... --detect-exec-format-errors` reading a learned store of {} entries ({:.0} KiB of JSON, each entry near the 1 KiB bound) beside the same process reading an empty store, {} alternating rounds.",
        entries.len(),
        bytes as f64 / 1024.0,
        rows.len()
    );
    println!();
    println!("| round | empty store RSS MiB | full store RSS MiB | added MiB |");
    println!("|---:|---:|---:|---:|");
    for (round, (empty, full)) in rows.iter().enumerate() {
        println!(
            "| {} | {:.1} | {:.1} | {:.2} |",
            round + 1,
            mib(*empty as f64),
            mib(*full as f64),
            mib(*full as f64 - *empty as f64)
        );
    }
    println!();
    println!(
        "Added per replica: median {:.2} MiB (min {:.2}, max {:.2}); target < 2 MiB.",
        mib(median),
        mib(added.first().copied().unwrap_or_default()),
        mib(added.last().copied().unwrap_or_default())
    );
    println!();
    Ok(())
}
