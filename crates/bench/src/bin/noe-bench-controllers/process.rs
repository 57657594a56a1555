//! The real `noe` process with its controllers: RSS above the same binary idle, and time from a
//! wrong-arch pod appearing in the watch to its Event, with image platforms from the real
//! registry (through the webhook's resolver and cache) and the cluster served by the scripted
//! API server through a kubeconfig.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use noe_bench::cluster::{node_name, populate_with};
use noe_bench::noe::{start_noe, Process, Tls};
use noe_test_support::{push_standard_fixtures, Fixtures, KubeApi, PodFixture, Registry};

use crate::latency::percentile;

/// `process` options.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// The `noe` binary to measure (a release build).
    #[arg(long, default_value = "target/release/noe")]
    pub noe: PathBuf,
    /// Nodes in the cluster.
    #[arg(long, default_value_t = 1000)]
    pub nodes: usize,
    /// Pods in the cluster (all fitting their node).
    #[arg(long, default_value_t = 20_000)]
    pub pods: usize,
    /// Wrong-arch pods added one at a time after the sync.
    #[arg(long, default_value_t = 100)]
    pub samples: usize,
}

/// Sum of every sample of a counter family in `noe`'s `/metrics`.
async fn counter_sum(process: &Process, name: &str) -> anyhow::Result<f64> {
    let addr = process.metrics.context("no metrics address")?;
    let text = reqwest::get(format!("http://{addr}/metrics"))
        .await?
        .text()
        .await?;
    Ok(text
        .lines()
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// RSS (KiB) of the same binary without controllers, idle for 3 s.
pub async fn idle_rss(noe: &Path, tls: &Tls, insecure: &str) -> anyhow::Result<u64> {
    let idle = start_noe(noe, tls, &[insecure.to_owned()]).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (rss, _) = idle.rss_kib()?;
    Ok(rss)
}

/// What the benches of a real `noe` process over a scripted cluster start from: the real
/// registry with the standard fixtures, `noe`'s TLS, the scripted API server and the images
/// pods are drawn from.
pub struct Cluster {
    pub registry: Registry,
    pub fixtures: Fixtures,
    pub tls: Tls,
    pub api: KubeApi,
    pub pool: [String; 3],
}

impl Cluster {
    pub async fn start() -> anyhow::Result<Self> {
        let registry = Registry::start().await?;
        let fixtures = push_standard_fixtures(&registry).await?;
        let tls = Tls::new()?;
        let api = KubeApi::start().await?;
        let pool = [
            fixtures.oci_index.reference(),
            fixtures.docker_list.reference(),
            fixtures.nested_index.reference(),
        ];
        Ok(Self {
            registry,
            fixtures,
            tls,
            api,
            pool,
        })
    }

    /// Writes the scripted API's kubeconfig beside `noe`'s certificates; returns its path and
    /// the flag that lets `noe` reach the test registry over plain HTTP.
    pub fn noe_args(&self) -> anyhow::Result<(PathBuf, String)> {
        let kubeconfig = self.tls.dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, self.api.kubeconfig_yaml())?;
        Ok((
            kubeconfig,
            format!("--insecure-registries={}", self.registry.host()),
        ))
    }
}

pub async fn run(options: &Options) -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let (tls, api) = (&cluster.tls, &cluster.api);
    let started = Instant::now();
    populate_with(api, options.nodes, options.pods, &cluster.pool);
    eprintln!(
        "populated {} nodes and {} pods in {:.1} s",
        options.nodes,
        options.pods,
        started.elapsed().as_secs_f64()
    );
    let (kubeconfig, insecure) = cluster.noe_args()?;

    let idle_rss = idle_rss(&options.noe, tls, &insecure).await?;

    let started = Instant::now();
    let noe = start_noe(
        &options.noe,
        tls,
        &[
            insecure,
            format!("--kubeconfig={}", kubeconfig.display()),
            "--watch-nodes".to_owned(),
            "--remediate=report".to_owned(),
        ],
    )
    .await?;
    let deadline = started + Duration::from_secs(600);
    while counter_sum(&noe, "noe_controller_pods_checked_total").await? < options.pods as f64 {
        if Instant::now() > deadline {
            bail!("the controllers did not check every pod within 600 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let synced = started.elapsed();
    // Let the allocator return what the initial list's pages freed.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (synced_rss, peak) = noe.rss_kib()?;

    // oci_single is linux/arm64 only: on an amd64 node (even index) it is misplaced.
    let wrong = cluster.fixtures.oci_single.reference();
    let mut requests = api.subscribe_requests();
    let mut to_event = Vec::with_capacity(options.samples);
    for i in 0..options.samples {
        let name = format!("wrong-{i:05}");
        let node = node_name((i.saturating_mul(2)) % options.nodes.max(1));
        let pod = PodFixture::new("latency", &name, &node, &[&wrong]).json();
        let appeared = Instant::now();
        api.put_pod(pod);
        loop {
            let request = tokio::time::timeout(Duration::from_secs(30), requests.recv())
                .await
                .with_context(|| format!("no Event for {name} within 30 s"))??;
            if request.method == "POST"
                && request.path.ends_with("/events")
                && request.body["regarding"]["name"] == name.as_str()
            {
                to_event.push(appeared.elapsed());
                break;
            }
        }
    }
    to_event.sort();
    drop(noe);

    let mib = |kib: u64| kib as f64 / 1024.0;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("## Controllers: the real `noe` process");
    println!();
    println!(
        "`noe --kubeconfig ... --watch-nodes --remediate=report` over {} nodes and {} pods (3 images each, from the real registry) served by the scripted API server; the idle process is the same binary without controllers.",
        options.nodes, options.pods
    );
    println!();
    println!(
        "| RSS idle MiB | RSS synced MiB | above idle MiB | peak MiB | synced in s | target |"
    );
    println!("|---:|---:|---:|---:|---:|---|");
    println!(
        "| {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | < 128 MiB above idle |",
        mib(idle_rss),
        mib(synced_rss),
        mib(synced_rss.saturating_sub(idle_rss)),
        mib(peak),
        synced.as_secs_f64()
    );
    println!();
    println!(
        "{} wrong-arch pods (an arm64-only image on an amd64 node) added one at a time after the sync; time from the pod's write to its Event `POST` at the API server (the first includes the image's registry lookup):",
        options.samples
    );
    println!();
    println!("| request | median ms | p99 ms | max ms |");
    println!("|---|---:|---:|---:|");
    println!(
        "| Event (`POST events`) | {:.2} | {:.2} | {:.2} |",
        ms(percentile(&to_event, 0.5)),
        ms(percentile(&to_event, 0.99)),
        ms(to_event.last().copied().unwrap_or_default())
    );
    println!();
    Ok(())
}
