//! Reflector memory: the controllers in a child process over N nodes and M pods.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use noe_controller::{Config, Controllers, Deps, LeaseConfig, Metrics, Remediate};
use noe_test_support::{KubeApi, Resource};
use tokio::io::AsyncBufReadExt as _;

use noe_bench::cluster::{counter_sum, platforms, populate};

/// `memory` options.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// Nodes.
    #[arg(long, default_value_t = 1000)]
    pub nodes: usize,
    /// Pods (bound to the nodes).
    #[arg(long, default_value_t = 20_000)]
    pub pods: usize,
    /// What to measure (repeatable; default: each in turn).
    #[arg(long, value_enum)]
    pub part: Vec<Part>,
}

/// What the child runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// The node reflector only (`watch_nodes`).
    Nodes,
    /// Nodes and pod remediation in `report` mode (the pod reflector).
    All,
    /// Every controller that watches the cluster: nodes, remediation (`report`), node taints
    /// (`--taint-arches=arm64`) and leader election.
    Every,
}

/// `child` options.
#[derive(Clone, Debug, clap::Args)]
pub struct ChildOptions {
    /// The scripted API server.
    #[arg(long)]
    pub url: String,
    /// Nodes to wait for.
    #[arg(long)]
    pub nodes: usize,
    /// Pods to wait for (checked by remediation).
    #[arg(long)]
    pub pods: usize,
    /// What to run.
    #[arg(long, value_enum)]
    pub part: Part,
}

fn rss_kib(pid: &str) -> anyhow::Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> anyhow::Result<u64> {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .with_context(|| format!("{name} missing"))?;
        Ok(line
            .split_whitespace()
            .nth(1)
            .with_context(|| format!("bad {name} line"))?
            .parse()?)
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

/// The measured process: idle RSS, then the controllers until everything is listed and
/// checked, then RSS again. Prints one `RESULT` line.
pub async fn child(options: &ChildOptions) -> anyhow::Result<()> {
    let config = kube::Config::new(options.url.parse()?);
    let client = kube::Client::try_from(config)?;
    let registry = prometheus::Registry::new();
    let metrics = Metrics::new(&registry, 1000)?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (idle, _) = rss_kib("self")?;
    let started = Instant::now();
    let every = options.part == Part::Every;
    let config = Config {
        watch_nodes: true,
        remediate: if options.part == Part::Nodes {
            Remediate::Off
        } else {
            Remediate::Report
        },
        taint_arches: if every {
            ["arm64".to_owned()].into()
        } else {
            std::collections::BTreeSet::new()
        },
        leader_election: every.then(|| LeaseConfig::new("noe", "noe", "bench")),
        ..Config::default()
    };
    let running = Controllers::start(
        client,
        config,
        Deps {
            platforms: Some(platforms()),
        },
        metrics,
    )?;
    let view = running.node_view().context("no node view")?;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let checked = counter_sum(&registry, "noe_controller_pods_checked_total");
        let pods_done = options.part == Part::Nodes || checked >= options.pods as u64;
        let leading = !every || running.leadership().is_leader();
        if view.len() >= options.nodes && view.is_ready() && pods_done && leading {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "not synced after 600 s: {} nodes, {checked} pods checked",
                view.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let synced = started.elapsed();
    // Let the allocator return what the initial list's pages freed.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (loaded, peak) = rss_kib("self")?;
    println!(
        "RESULT {idle} {loaded} {peak} {} {}",
        synced.as_millis(),
        counter_sum(&registry, "noe_controller_pods_checked_total")
    );
    running.shutdown().await;
    Ok(())
}

struct Measured {
    idle: u64,
    loaded: u64,
    peak: u64,
    synced_ms: u64,
    checked: u64,
}

async fn measure(api: &KubeApi, options: &Options, part: Part) -> anyhow::Result<Measured> {
    let exe = std::env::current_exe()?;
    let part_arg = match part {
        Part::Nodes => "nodes",
        Part::All => "all",
        Part::Every => "every",
    };
    let mut child = tokio::process::Command::new(exe)
        .args(["child", "--url", &api.url(), "--part", part_arg])
        .args([
            "--nodes",
            &options.nodes.to_string(),
            "--pods",
            &options.pods.to_string(),
        ])
        .envs(
            noe_webhook::ALLOCATOR_ENV
                .iter()
                .filter(|(key, _)| std::env::var_os(key).is_none())
                .copied(),
        )
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut result = None;
    while let Some(line) =
        tokio::time::timeout(Duration::from_secs(700), lines.next_line()).await??
    {
        if let Some(rest) = line.strip_prefix("RESULT ") {
            let numbers: Vec<u64> = rest.split(' ').filter_map(|n| n.parse().ok()).collect();
            if let [idle, loaded, peak, synced_ms, checked] = numbers[..] {
                result = Some(Measured {
                    idle,
                    loaded,
                    peak,
                    synced_ms,
                    checked,
                });
            }
        }
    }
    let status = child.wait().await?;
    if !status.success() {
        bail!("child failed: {status}");
    }
    result.context("the child printed no RESULT line")
}

/// Runs both parts and prints the table.
pub async fn run(options: &Options) -> anyhow::Result<()> {
    let api = KubeApi::start().await?;
    let started = Instant::now();
    populate(&api, options.nodes, options.pods);
    eprintln!(
        "populated {} nodes and {} pods in {:.1} s",
        api.count(Resource::Nodes),
        api.count(Resource::Pods),
        started.elapsed().as_secs_f64()
    );
    let size = |resource, namespace: &str, name: &str| {
        api.get(resource, namespace, name)
            .map_or(0, |object| object.to_string().len())
    };
    let node_bytes = size(Resource::Nodes, "", &noe_bench::cluster::node_name(0));
    let pod_bytes = size(Resource::Pods, "team-0", "svc-000000");
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!("## Controllers: reflector memory");
    println!();
    println!(
        "{} nodes ({node_bytes} bytes of JSON each) and {} pods ({pod_bytes} bytes each: 3 containers, managedFields, env, volumes, probes) from the scripted API server; RSS of the controller process.",
        options.nodes, options.pods
    );
    println!();
    println!("| running | RSS idle MiB | RSS synced MiB | above idle MiB | peak MiB | synced in s | pods checked | target |");
    println!("|---|---:|---:|---:|---:|---:|---:|---|");
    let parts = if options.part.is_empty() {
        vec![Part::Nodes, Part::All, Part::Every]
    } else {
        options.part.clone()
    };
    // DESIGN's two bars: 1,000 nodes + 20,000 pods under 128 MiB above idle; Kubernetes'
    // limits (5,000 nodes, 150,000 pods) under 256 MiB, the chart's default limit.
    let target = if options.pods > 20_000 {
        "< 256 MiB RSS"
    } else {
        "< 128 MiB above idle"
    };
    for part in parts {
        let m = measure(&api, options, part).await?;
        let name = match part {
            Part::Nodes => "node reflector (`watch_nodes`)",
            Part::All => "nodes + pods (`remediate=report`)",
            Part::Every => "every controller (`report`, `taint_arches=arm64`, leader election)",
        };
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {target} |",
            mib(m.idle),
            mib(m.loaded),
            mib(m.loaded.saturating_sub(m.idle)),
            mib(m.peak),
            m.synced_ms as f64 / 1000.0,
            m.checked
        );
    }
    println!();
    Ok(())
}
