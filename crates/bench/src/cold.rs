//! The cold path with a realistic round trip: a delaying TCP proxy on loopback (noe-test-support's
//! `DelayProxy`) adds `--rtt` to every exchange with the real registry, and pods with K distinct
//! uncached images (public OCI indexes) are admitted. The floor is the round trips that cannot be
//! avoided times the RTT: one for all K index GETs sent in parallel.

use std::time::{Duration, Instant};

use anyhow::bail;

use crate::images::{references, tags, Children};
use crate::noe::{admit, start_noe, Tls};
use crate::Options;
use noe_test_support::{pod_review, DelayProxy, Registry};

/// Images per pod.
const SIZES: [usize; 3] = [1, 5, 20];

pub async fn run(options: &Options) -> anyhow::Result<()> {
    let rtt = options.rtt;
    let samples = options.samples.max(1);
    let registry = Registry::start().await?;
    let children = Children::push(&registry).await?;
    let proxy = DelayProxy::start(registry.addr(), rtt).await?;
    let tls = Tls::new()?;
    let client = tls.client()?;
    let noe = start_noe(
        &options.noe,
        &tls,
        &[format!("--insecure-registries={}", proxy.host())],
    )
    .await?;
    // Warm-up: the first admission of the process (connection pools, allocator) is not cold in
    // the sense measured here.
    let warm = tags("warm", 1);
    children.tag(&registry, 2, &warm).await?;
    admit(
        &client,
        noe.addr,
        &pod_review("warm-up", &references(&proxy.host(), &warm)),
    )
    .await?;

    println!("## Cold path with a {} ms round trip", rtt.as_millis());
    println!();
    println!(
        "A delaying proxy adds {} ms to every exchange with the real registry; each pod holds K distinct uncached public images (OCI indexes, one GET each); {samples} pods per K, each with new images. Admission latency measured by the client; the floor is one round trip (all K index GETs in parallel).",
        rtt.as_millis()
    );
    println!();
    println!("| K images | pods | median ms | max ms | floor ms | median / floor | max / floor | target |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---|");
    for k in SIZES {
        let mut latencies = Vec::new();
        for sample in 0..samples {
            let names = tags(&format!("cold-{k}-{sample}"), k);
            children.tag(&registry, 2, &names).await?;
            let images = references(&proxy.host(), &names);
            let review = pod_review(&format!("cold-{k}-{sample}"), &images);
            let started = Instant::now();
            let answer = admit(&client, noe.addr, &review).await?;
            latencies.push(started.elapsed());
            if !answer["response"]["patch"].is_string() {
                bail!("K={k}: not patched: {answer}");
            }
        }
        latencies.sort();
        let median = latencies[latencies.len() / 2];
        let max = latencies[latencies.len() - 1];
        let floor = rtt;
        let ratio = |d: Duration| d.as_secs_f64() / floor.as_secs_f64();
        println!(
            "| {k} | {samples} | {:.1} | {:.1} | {:.0} | {:.2} | {:.2} | ≤ 1.15 |",
            median.as_secs_f64() * 1000.0,
            max.as_secs_f64() * 1000.0,
            floor.as_secs_f64() * 1000.0,
            ratio(median),
            ratio(max),
        );
    }
    let delayed = noe
        .metric("noe_registry_throttled_total{reason=\"delayed\"")
        .await
        .unwrap_or(0.0);
    println!();
    println!("Requests the client-side rate limit delayed (`noe_registry_throttled_total{{reason=\"delayed\"}}`): {delayed:.0}.");
    println!();
    println!(
        "noe's request pattern on paper (HEAD, then GET of the index, then a GET of every child, each step waiting for the previous one): at least 3 round trips per image, {} ms for any K.",
        3 * rtt.as_millis()
    );
    println!();
    Ok(())
}
