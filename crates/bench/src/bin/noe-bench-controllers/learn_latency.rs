//! Time from a crash's status update to its learned entry: the controllers with
//! `--detect-exec-format-errors` (in this process) talk to the scripted API server through a
//! proxy adding a fixed round trip to every exchange; pods on an arm64 node turn, one at a time,
//! from running to crash-looping with `exec /app: exec format error` in their previous log. For
//! each: when the previous-log read and the learned store's apply arrive at the API server, and
//! every request made on the way.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use noe_controller::{Config, Controllers, Deps, DetectConfig, LearnedConfig, Metrics};
use noe_test_support::{
    crash_loop, node_json, Crash, DelayProxy, KubeApi, PodFixture, PodLog, RecordedRequest,
};

use crate::latency::percentile;
use crate::learned::{put_store, NAMESPACE};

/// `learn-latency` options.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// The round trip the proxy adds to every request/answer exchange, in milliseconds.
    #[arg(long, default_value_t = 5)]
    pub rtt_ms: u64,
    /// Pods turned crash-looping, one at a time.
    #[arg(long, default_value_t = 100)]
    pub samples: usize,
}

const IMAGE: &str = "registry.example.com/shop/web:1";

fn digest(i: usize) -> String {
    format!("sha256:{i:064x}")
}

/// Whether `request` is a write of the learned store holding the entry for pod `name`.
fn stores(request: &RecordedRequest, name: &str) -> bool {
    request.method == "PATCH"
        && request.path.contains("/configmaps/")
        && request.body.to_string().contains(name)
}

pub async fn run(options: &Options) -> anyhow::Result<()> {
    let rtt = Duration::from_millis(options.rtt_ms);
    let api = KubeApi::start().await?;
    api.put_node(node_json("amd-1", "amd64", "linux"));
    api.put_node(node_json("arm-1", "arm64", "linux"));
    put_store(&api, NAMESPACE, &[]);
    let target: std::net::SocketAddr = api
        .url()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .context("the scripted API's address")?;
    let proxy = DelayProxy::start(target, rtt).await?;
    let mut config = api.config()?;
    config.cluster_url = format!("http://{}", proxy.host()).parse()?;
    let client = kube::Client::try_from(config)?;
    let registry = prometheus::Registry::new();
    let metrics = Metrics::new(&registry, 1000)?;
    let config = Config {
        detect: Some(DetectConfig {
            log_reads_per_second: 100,
            ..DetectConfig::default()
        }),
        learned: Some(LearnedConfig {
            namespace: NAMESPACE.to_owned(),
            name: noe_controller::learned::DEFAULT_NAME.to_owned(),
            max_entries: noe_controller::learned::MAX_ENTRIES,
        }),
        ..Config::default()
    };
    let running = Controllers::start(client, config, Deps { platforms: None }, metrics)?;
    let view = running.learned_view().context("no learned view")?;
    // Synced: the pod watch is open.
    let started = Instant::now();
    while !api
        .requests()
        .iter()
        .any(|r| r.path == "/api/v1/pods" && r.query.contains("watch=true"))
    {
        if started.elapsed() > Duration::from_secs(60) {
            bail!("the pod watch did not start within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut requests = api.subscribe_requests();
    let (mut to_log, mut to_entry, mut on_the_way) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..options.samples {
        let name = format!("web-{i:05}");
        let running_pod = PodFixture::new("shop", &name, "arm-1", &[IMAGE]).json();
        api.set_log(
            "shop",
            &name,
            "c0",
            true,
            PodLog::Text(b"exec /app: exec format error\n".to_vec()),
        );
        api.put_pod(running_pod.clone());
        // Let the running pod's watch event pass.
        tokio::time::sleep(rtt.saturating_mul(4)).await;
        while requests.try_recv().is_ok() {}
        let mut crashed = running_pod;
        crash_loop(
            &mut crashed,
            0,
            &Crash::new(&format!("registry.example.com/shop/web@{}", digest(i)), 1),
        );
        let updated = Instant::now();
        api.put_pod(crashed);
        let (mut log, mut made) = (None, 0_usize);
        loop {
            let request = tokio::time::timeout(Duration::from_secs(30), requests.recv())
                .await
                .with_context(|| format!("no learned entry for {name} within 30 s"))??;
            if request.query.contains("watch=true") {
                continue;
            }
            made += 1;
            if request.method == "GET" && request.path.ends_with(&format!("/{name}/log")) {
                log = Some(request.received.saturating_duration_since(updated));
            }
            if stores(&request, &name) {
                to_entry.push(request.received.saturating_duration_since(updated));
                break;
            }
        }
        to_log.push(log.context("the entry was written without reading the log")?);
        on_the_way.push(made);
    }
    // The last entry reaches the view through its watch.
    let settled = Instant::now();
    while view.snapshot().len() < options.samples && settled.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let entries = view.snapshot().len();
    running.shutdown().await;
    drop(proxy);
    to_log.sort();
    to_entry.sort();
    on_the_way.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("## Controllers: a crash's status update to its learned entry");
    println!();
    println!(
        "{} pods on an arm64 node turned crash-looping one at a time (`exec /app: exec format error` in the previous log); the API server behind a proxy adding {} ms to every round trip; times from the status write to the request's arrival at the API server. {entries} entries learned.",
        options.samples, options.rtt_ms
    );
    println!();
    println!("| request | median ms | p99 ms | max ms | in round trips (median) |");
    println!("|---|---:|---:|---:|---:|");
    for (what, samples) in [
        ("previous log read (`GET pods/NAME/log`)", &to_log),
        ("learned entry applied (`PATCH configmaps/NAME`)", &to_entry),
    ] {
        let median = percentile(samples, 0.5);
        println!(
            "| {what} | {:.2} | {:.2} | {:.2} | {:.2} |",
            ms(median),
            ms(percentile(samples, 0.99)),
            ms(samples.last().copied().unwrap_or_default()),
            median.as_secs_f64() / rtt.as_secs_f64().max(f64::EPSILON)
        );
    }
    println!();
    println!(
        "Requests on the way (status update to entry, watches aside): median {}, max {}. Target: the entry within 2 round trips plus one log read ({} ms at this round trip, the watch event's delivery included).",
        on_the_way.get(on_the_way.len() / 2).copied().unwrap_or_default(),
        on_the_way.last().copied().unwrap_or_default(),
        3 * options.rtt_ms
    );
    println!();
    Ok(())
}
