//! `--watch-node-features` at cluster scale: the real `noe` binary with `--watch-nodes
//! --image-selection`, with and without `--watch-node-features`, over N nodes in G node groups,
//! each with the `NodeFeature` a typical x86 nfd-worker writes (120 cpuid flags, 90 loaded and 90
//! enabled modules, 1,500 kernel config options, 12 PCI devices, kernel and OS release): the
//! nodes of one group share every feature but their `system.name` (the node's name). Both
//! processes run in the same round against the same scripted API server, in alternating order;
//! the figure is the RSS of the one with `--watch-node-features` above the one without, once
//! both listed what they watch.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use noe_bench::cluster::node_name;
use noe_bench::noe::{start_noe, Process, Tls};
use noe_test_support::{node_feature_json, node_json, KubeApi};
use serde_json::{json, Map, Value};

/// `nodefeatures` options.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// The `noe` binary to measure (a release build).
    #[arg(long, default_value = "target/release/noe")]
    pub noe: PathBuf,
    /// Nodes, each with its `NodeFeature`.
    #[arg(long, default_value_t = 1000)]
    pub nodes: usize,
    /// Node groups (nodes of one group have the same features but their name).
    #[arg(long, default_value_t = 4)]
    pub groups: usize,
    /// Rounds (each runs both processes).
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
}

fn flags(names: impl Iterator<Item = String>) -> Value {
    let elements: Map<String, Value> = names.map(|n| (n, json!({}))).collect();
    json!({ "elements": elements })
}

/// The `spec.features` nfd-worker writes for node `i` of group `group`.
pub fn features(node: &str, group: usize) -> Value {
    // Most of a group's features are the fleet's; some differ by group.
    let cpuid = (0..100)
        .map(|j| format!("CPUID_FLAG_{j:03}"))
        .chain((0..20).map(|j| format!("GROUP{group}_FLAG_{j:02}")));
    let modules = |kind: &'static str| {
        (0..80)
            .map(move |j| format!("{kind}_module_{j:02}"))
            .chain((0..10).map(move |j| format!("group{group}_{kind}_{j}")))
    };
    let config: Map<String, Value> = (0..1500usize)
        .map(|j| {
            let value = if (j + group).is_multiple_of(7) {
                "m"
            } else {
                "y"
            };
            (format!("CONFIG_KERNEL_OPTION_{j:04}"), json!(value))
        })
        .collect();
    let devices: Vec<Value> = (0..12)
        .map(|j| {
            json!({"attributes": {"class": if j < 2 { "0300" } else { "0200" }, "vendor": "1d0f",
                "device": format!("ec{:02}", j + group), "subsystem_vendor": "1d0f",
                "subsystem_device": "ec20", "sriov_totalvfs": "0"}})
        })
        .collect();
    json!({
        "flags": {
            "cpu.cpuid": flags(cpuid),
            "kernel.loadedmodule": flags(modules("loaded")),
            "kernel.enabledmodule": flags(modules("enabled")),
        },
        "attributes": {
            "kernel.config": {"elements": config},
            "kernel.version": {"elements": {"full": format!("6.1.0-{}-amd64", 13 + group),
                "major": "6", "minor": "1", "revision": "0"}},
            "system.osrelease": {"elements": {"ID": "debian", "VERSION_ID": "12",
                "VERSION_ID.major": "12"}},
            "cpu.model": {"elements": {"vendor_id": "Intel", "family": "6",
                "id": format!("{}", 106 + group)}},
            "system.name": {"elements": {"nodename": node}},
        },
        "instances": {"pci.device": {"elements": devices}},
    })
}

/// Waits until the API server saw a watch of `path` (the list before it is done) after `since`.
async fn watched(api: &KubeApi, path: &str, since: Instant) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let seen = api
            .requests()
            .iter()
            .any(|r| r.path == path && r.query.contains("watch=true") && r.received >= since);
        if seen {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("no watch of {path} within 600 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// RSS (KiB) of `noe` with `extra`, once it listed what it watches and settled 3 s.
async fn measure(
    options: &Options,
    api: &KubeApi,
    tls: &Tls,
    base: &[String],
    features: bool,
) -> anyhow::Result<(u64, Duration)> {
    let mut args = base.to_vec();
    if features {
        args.push("--watch-node-features".to_owned());
    }
    let started = Instant::now();
    let noe: Process = start_noe(&options.noe, tls, &args).await?;
    watched(api, "/api/v1/nodes", started).await?;
    if features {
        watched(api, "/apis/nfd.k8s-sigs.io/v1alpha1/nodefeatures", started).await?;
    }
    let synced = started.elapsed();
    // Let the allocator return what the lists' pages freed.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (rss, _) = noe.rss_kib()?;
    drop(noe);
    Ok((rss, synced))
}

fn median(sorted: &[f64]) -> f64 {
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

pub async fn run(options: &Options) -> anyhow::Result<()> {
    if options.groups == 0 || options.rounds == 0 {
        bail!("--groups and --rounds must be at least 1");
    }
    let api = KubeApi::start().await?;
    let started = Instant::now();
    for i in 0..options.nodes {
        let name = node_name(i);
        api.put_node(node_json(&name, "amd64", "linux"));
        api.put_node_feature(node_feature_json(
            &name,
            features(&name, i % options.groups),
        ));
    }
    let object_bytes = serde_json::to_vec(&node_feature_json(
        &node_name(0),
        features(&node_name(0), 0),
    ))
    .context("an object")?
    .len();
    eprintln!(
        "populated {} nodes and their NodeFeature objects in {:.1} s",
        options.nodes,
        started.elapsed().as_secs_f64()
    );
    let tls = Tls::new()?;
    let kubeconfig = tls.dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, api.kubeconfig_yaml())?;
    let base = vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        "--watch-nodes".to_owned(),
        "--image-selection".to_owned(),
    ];
    let mut without = Vec::new();
    let mut with = Vec::new();
    let mut above = Vec::new();
    let mut synced = Vec::new();
    for round in 0..options.rounds {
        // Alternate which runs first.
        let (a, b) = if round.is_multiple_of(2) {
            let a = measure(options, &api, &tls, &base, false).await?;
            (a, measure(options, &api, &tls, &base, true).await?)
        } else {
            let b = measure(options, &api, &tls, &base, true).await?;
            (measure(options, &api, &tls, &base, false).await?, b)
        };
        let mib = |kib: u64| kib as f64 / 1024.0;
        eprintln!(
            "round {round}: without {:.1} MiB, with {:.1} MiB, above {:.1} MiB",
            mib(a.0),
            mib(b.0),
            mib(b.0) - mib(a.0)
        );
        without.push(mib(a.0));
        with.push(mib(b.0));
        above.push(mib(b.0) - mib(a.0));
        synced.push(b.1.as_secs_f64());
    }
    for v in [&mut without, &mut with, &mut above, &mut synced] {
        v.sort_by(f64::total_cmp);
    }
    let spread = |v: &[f64]| {
        format!(
            "{:.1}–{:.1}",
            v.first().copied().unwrap_or_default(),
            v.last().copied().unwrap_or_default()
        )
    };
    println!("## Controllers: NodeFeature objects (`--watch-node-features`)");
    println!();
    println!(
        "`noe --kubeconfig ... --watch-nodes --image-selection` with and without `--watch-node-features`, {} nodes in {} node groups, one nfd-worker `NodeFeature` each ({object_bytes} bytes of JSON: 120 cpuid flags, 90 + 90 modules, 1,500 kernel config options, 12 PCI devices; nodes of a group differ in `system.name`), served by the scripted API server; {} rounds, alternating which runs first; RSS once both listed and 3 s passed.",
        options.nodes, options.groups, options.rounds
    );
    println!();
    println!("| RSS MiB | median | spread |");
    println!("|---|---:|---|");
    println!(
        "| without `--watch-node-features` | {:.1} | {} |",
        median(&without),
        spread(&without)
    );
    println!("| with | {:.1} | {} |", median(&with), spread(&with));
    println!(
        "| **above** | **{:.1}** | {} |",
        median(&above),
        spread(&above)
    );
    println!(
        "| with: listed in s | {:.1} | {} |",
        median(&synced),
        spread(&synced)
    );
    println!();
    Ok(())
}
