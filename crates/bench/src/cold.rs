//! The cold path with a realistic round trip: a delaying TCP proxy on loopback (noe-test-support's
//! `DelayProxy`) adds `--rtt` to every exchange with the real registry, and pods with K distinct
//! uncached images (public OCI indexes) are admitted. The floor is the round trips that cannot be
//! avoided times the RTT: one for all K index GETs sent in parallel.
//!
//! The registry runs on the same two cores as `noe`, the proxy and the client, and its own CPU
//! time per GET is not a round trip: each pod is also admitted through a proxy adding nothing
//! (fresh images too), alternating, so the table shows what the round trip itself costs.

use std::time::{Duration, Instant};

use anyhow::bail;

use crate::images::{references, tags, Children};
use crate::noe::{admit, cpu_seconds, start_noe, Tls};
use crate::Options;
use noe_test_support::{pod_review, DelayProxy, Registry};

/// Images per pod.
const SIZES: [usize; 3] = [1, 5, 20];

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let median = samples.get(samples.len() / 2).copied().unwrap_or_default();
    let max = samples.last().copied().unwrap_or_default();
    (median, max)
}

pub async fn run(options: &Options) -> anyhow::Result<()> {
    let rtt = options.rtt;
    let samples = options.samples.max(1);
    let registry = Registry::start().await?;
    let children = Children::push(&registry).await?;
    let far = DelayProxy::start(registry.addr(), rtt).await?;
    let near = DelayProxy::start(registry.addr(), Duration::ZERO).await?;
    let tls = Tls::new()?;
    let client = tls.client()?;
    // No client-side rate limit: back-to-back cold pods of 20 images are more than the default
    // 50 requests per second per host, and what is measured here is the lookup path.
    let noe = start_noe(
        &options.noe,
        &tls,
        &[
            format!("--insecure-registries={},{}", far.host(), near.host()),
            "--registry-qps=0".to_owned(),
        ],
    )
    .await?;
    // Warm-up: the first admission of the process (connection pools, allocator) is not cold in
    // the sense measured here.
    for (i, proxy) in [&far, &near].into_iter().enumerate() {
        let warm = tags(&format!("warm-{i}"), 1);
        children.tag(&registry, 2, &warm).await?;
        let review = pod_review("warm-up", &references(&proxy.host(), &warm));
        admit(&client, noe.addr, &review).await?;
    }

    println!("## Cold path with a {} ms round trip", rtt.as_millis());
    println!();
    println!(
        "A delaying proxy adds {} ms to every exchange with the real registry; each pod holds K distinct uncached public images (OCI indexes, one GET each, `--registry-qps=0`); {samples} pods per K, each with new images, alternating with the same pods through a proxy adding nothing (the registry, the proxy, noe and the client share the machine's cores). Latency measured by the client; the floor is one round trip (all K index GETs in parallel). CPU time from /proc (10 ms ticks), per pod.",
        rtt.as_millis()
    );
    println!();
    println!("| K images | pods | median ms (+{} ms RTT) | max ms | median / floor | median ms (+0 ms) | (median − median at +0) / floor | noe CPU ms per pod | registry CPU ms per pod |", rtt.as_millis());
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for k in SIZES {
        let (mut slow, mut fast) = (Vec::new(), Vec::new());
        let cpu = || -> anyhow::Result<(f64, f64)> {
            Ok((noe.cpu_seconds()?, cpu_seconds(registry.pid())?))
        };
        let (noe_before, registry_before) = cpu()?;
        for sample in 0..samples {
            for (proxy, latencies, label) in [(&far, &mut slow, "far"), (&near, &mut fast, "near")]
            {
                let names = tags(&format!("cold-{label}-{k}-{sample}"), k);
                children.tag(&registry, 2, &names).await?;
                let images = references(&proxy.host(), &names);
                let review = pod_review(&format!("cold-{label}-{k}-{sample}"), &images);
                let started = Instant::now();
                let answer = admit(&client, noe.addr, &review).await?;
                latencies.push(started.elapsed());
                if !answer["response"]["patch"].is_string() {
                    bail!("K={k}: not patched: {answer}");
                }
            }
        }
        let (noe_after, registry_after) = cpu()?;
        let pods = 2.0 * samples as f64;
        let per_pod = |before: f64, after: f64| (after - before) * 1000.0 / pods;
        let (slow_median, slow_max) = median(slow);
        let (fast_median, _) = median(fast);
        let floor = ms(rtt);
        println!(
            "| {k} | {samples} | {:.1} | {:.1} | {:.2} | {:.1} | {:.2} | {:.1} | {:.1} |",
            ms(slow_median),
            ms(slow_max),
            ms(slow_median) / floor,
            ms(fast_median),
            (ms(slow_median) - ms(fast_median)) / floor,
            per_pod(noe_before, noe_after),
            per_pod(registry_before, registry_after),
        );
    }
    println!();
    println!(
        "noe's request pattern on paper (HEAD, then GET of the index, then a GET of every child, each step waiting for the previous one): at least 3 round trips per image, {} ms for any K.",
        3 * rtt.as_millis()
    );
    println!();
    Ok(())
}
