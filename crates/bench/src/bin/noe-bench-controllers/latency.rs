//! Time from a wrong-arch pod appearing in the watch to its Event and eviction request.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use noe_controller::{Config, Controllers, Deps, Metrics, Remediate};
use noe_test_support::{KubeApi, PodFixture};

use noe_bench::cluster::{arm_node, counter_sum, platforms, populate, AMD_ONLY};

/// `latency` options.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// Nodes in the cluster.
    #[arg(long, default_value_t = 1000)]
    pub nodes: usize,
    /// Fitting pods in the cluster before the measurement.
    #[arg(long, default_value_t = 5000)]
    pub pods: usize,
    /// Wrong-arch pods added, one at a time.
    #[arg(long, default_value_t = 300)]
    pub samples: usize,
}

/// The `p` quantile of sorted samples (nearest rank).
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64) * p).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub async fn run(options: &Options) -> anyhow::Result<()> {
    let api = KubeApi::start().await?;
    populate(&api, options.nodes, options.pods);
    let registry = prometheus::Registry::new();
    let metrics = Metrics::new(&registry, 1000)?;
    let config = Config {
        remediate: Remediate::Evict,
        remediate_rate_per_minute: 1_000_000,
        ..Config::default()
    };
    let running = Controllers::start(
        api.client()?,
        config,
        Deps {
            platforms: Some(platforms()),
        },
        metrics,
    )?;
    let deadline = Instant::now() + Duration::from_secs(600);
    while counter_sum(&registry, "noe_controller_pods_checked_total") < options.pods as u64 {
        if Instant::now() > deadline {
            bail!("initial sync not done after 600 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut requests = api.subscribe_requests();
    let mut to_event = Vec::with_capacity(options.samples);
    let mut to_eviction = Vec::with_capacity(options.samples);
    for i in 0..options.samples {
        let name = format!("wrong-{i:05}");
        let node = arm_node(i % (options.nodes / 2).max(1));
        let pod = PodFixture::new("latency", &name, &node, &[AMD_ONLY]).json();
        let eviction_path = format!("/api/v1/namespaces/latency/pods/{name}/eviction");
        let appeared = Instant::now();
        api.put_pod(pod);
        let (mut event, mut eviction) = (None, None);
        while event.is_none() || eviction.is_none() {
            let request = tokio::time::timeout(Duration::from_secs(30), requests.recv())
                .await
                .with_context(|| format!("no Event/eviction for {name} within 30 s"))??;
            if request.method != "POST" {
                continue;
            }
            if request.path.ends_with("/events")
                && request.body["regarding"]["name"] == name.as_str()
            {
                event = Some(appeared.elapsed());
            } else if request.path == eviction_path {
                eviction = Some(appeared.elapsed());
            }
        }
        to_event.extend(event);
        to_eviction.extend(eviction);
    }
    running.shutdown().await;
    to_event.sort();
    to_eviction.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("## Controllers: wrong-arch pod to Event and eviction");
    println!();
    println!(
        "{} wrong-arch pods added one at a time to a cluster of {} nodes and {} pods (remediation `evict`, lookups answered from memory); time from the pod's write to the request arriving at the API server.",
        options.samples, options.nodes, options.pods
    );
    println!();
    println!("| request | median ms | p99 ms | max ms |");
    println!("|---|---:|---:|---:|");
    for (name, samples) in [
        ("Event (`POST events`)", &to_event),
        ("eviction (`POST pods/NAME/eviction`)", &to_eviction),
    ] {
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} |",
            ms(percentile(samples, 0.5)),
            ms(percentile(samples, 0.99)),
            ms(samples.last().copied().unwrap_or_default())
        );
    }
    println!();
    Ok(())
}
