//! `noe-bench verify`: verification of platforms by their own programs (docs/benchmarks.md,
//! "Verification"), measured on `noe` processes serving with `--verify-binaries=background`
//! against the real registry, with images this bench writes (synthetic ELF headers in gzip
//! layers of incompressible bytes):
//!
//! 1. bytes read: `noe_verification_bytes_total` of one image whose program sits at the end of
//!    its top layer (the whole top layer read), at its start, and in the bottom layer, beside
//!    the layers' compressed sizes;
//! 2. memory: peak RSS above idle while 100 images are verified (`--verify-concurrency` 100,
//!    and the default 2), beside the same admissions with `--verify-binaries=off`;
//! 3. admission latency during a burst: pods of a warm image admitted while 200 cold images
//!    are verified, `off` and `background` side by side in alternating rounds.
//!
//! Every image of a measurement has its own manifest digest (a seed in its config), so each is
//! verified once; the layers are shared (pushed once), so pushing stays cheap.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use futures::StreamExt as _;
use noe_test_support::{
    elf_program, pod_review, Compression, Flavor, LayerBlob, LayerEntry, Pusher, Registry,
    RunnableImage,
};
use serde_json::json;

use crate::gate::percentiles;
use crate::noe::{admit, start_noe, Process, Tls};
use crate::Options;

const REPOSITORY: &str = "bench/verify";
/// Images verified at once for the memory measurement.
const MEMORY_IMAGES: usize = 100;
/// Images of the burst.
const BURST_IMAGES: usize = 200;
/// Images per admitted pod (the burst is admitted as pods of this many images).
const IMAGES_PER_POD: usize = 50;
/// Warm admissions in flight during the burst.
const WARM_CONCURRENCY: usize = 4;
/// How long one verification measurement may wait for its verdicts.
const VERDICTS_DEADLINE: Duration = Duration::from_secs(120);

/// `n` bytes no compressor shrinks (xorshift, seeded).
fn incompressible(n: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    let mut bytes = Vec::with_capacity(n + 8);
    while bytes.len() < n {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.extend_from_slice(&state.to_le_bytes());
    }
    bytes.truncate(n);
    bytes
}

/// A gzip layer of `filler` incompressible bytes, with the amd64 program `app` before or after
/// them (or absent).
fn layer(filler: usize, seed: u64, app: Option<Place>) -> anyhow::Result<LayerBlob> {
    let mut entries = vec![LayerEntry::data(
        &format!("usr/share/filler-{seed}"),
        &incompressible(filler, seed),
    )];
    match app {
        Some(Place::First) => entries.insert(0, LayerEntry::program("app", elf_program("amd64")?)),
        Some(Place::Last) => entries.push(LayerEntry::program("app", elf_program("amd64")?)),
        None => {}
    }
    LayerBlob::new(&entries, Compression::Gzip)
}

#[derive(Clone, Copy)]
enum Place {
    First,
    Last,
}

/// Pushes `layers` once.
async fn push_layers(pusher: &Pusher, layers: &[LayerBlob]) -> anyhow::Result<()> {
    for layer in layers {
        pusher.push_blob(REPOSITORY, &layer.bytes).await?;
    }
    Ok(())
}

/// Pushes `tags.len()` linux/amd64 images of `layers` (already pushed), running `/app`, each
/// with its own config (so its own manifest digest); their references.
async fn push_images(
    registry: &Registry,
    pusher: &Pusher,
    layers: &[LayerBlob],
    tags: &[String],
) -> anyhow::Result<Vec<String>> {
    let pushed = futures::stream::iter(tags)
        .map(|tag| async move {
            let run = json!({"Entrypoint": ["/app"], "Env": [format!("BENCH_SEED={tag}")]});
            let image = RunnableImage::new("linux/amd64", run, layers.to_vec(), Flavor::Oci)?;
            pusher.push_blob(REPOSITORY, &image.config).await?;
            pusher
                .push_manifest(
                    REPOSITORY,
                    tag,
                    &image.descriptor.media_type,
                    &image.manifest,
                )
                .await?;
            anyhow::Ok(registry.reference(REPOSITORY, tag))
        })
        .buffered(8)
        .collect::<Vec<_>>()
        .await;
    pushed.into_iter().collect()
}

fn tags(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// Platforms verified so far, every verdict.
async fn verified(noe: &Process) -> anyhow::Result<f64> {
    let mut total = 0.0;
    for verdict in ["verified", "mismatch", "unverifiable"] {
        total += noe
            .metric(&format!("noe_verifications_total{{verdict=\"{verdict}\"}}"))
            .await?;
    }
    Ok(total)
}

/// Admits `images` as pods of [`IMAGES_PER_POD`], each answered with a patch.
async fn admit_all(
    client: &reqwest::Client,
    noe: &Process,
    name: &str,
    images: &[String],
) -> anyhow::Result<()> {
    for (i, pod) in images.chunks(IMAGES_PER_POD).enumerate() {
        let answer = admit(client, noe.addr, &pod_review(&format!("{name}-{i}"), pod)).await?;
        if !answer["response"]["patch"].is_string() {
            bail!("{name}-{i}: not patched: {answer}");
        }
    }
    Ok(())
}

/// Waits until `noe` has verified `n` platforms; the peak RSS (KiB) sampled meanwhile.
async fn until_verified(noe: &Process, n: f64) -> anyhow::Result<u64> {
    let started = Instant::now();
    let mut peak = 0;
    loop {
        peak = peak.max(noe.rss_kib()?.0);
        if verified(noe).await? >= n {
            return Ok(peak.max(noe.rss_kib()?.1));
        }
        if started.elapsed() > VERDICTS_DEADLINE {
            bail!("{n} verifications not done after {VERDICTS_DEADLINE:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn noe_args(registry: &Registry, mode: &str, concurrency: usize) -> Vec<String> {
    vec![
        format!("--insecure-registries={}", registry.host()),
        // Hundreds of lookups and layer reads at once to one host: no client-side rate limit.
        "--registry-qps=0".to_owned(),
        format!("--verify-binaries={mode}"),
        format!("--verify-concurrency={concurrency}"),
    ]
}

/// Bytes read per verification (part 1), against the layers' compressed sizes.
async fn bytes_read(options: &Options, registry: &Registry, tls: &Tls) -> anyhow::Result<()> {
    let pusher = registry.pusher()?;
    let client = tls.client()?;
    let bottom = layer(8 << 20, 11, None)?;
    let middle = layer(4 << 20, 12, None)?;
    let cases = [
        (
            "program at the end of the top layer",
            vec![
                bottom.clone(),
                middle.clone(),
                layer(2 << 20, 13, Some(Place::Last))?,
            ],
        ),
        (
            "program at the start of the top layer",
            vec![
                bottom.clone(),
                middle.clone(),
                layer(2 << 20, 14, Some(Place::First))?,
            ],
        ),
        (
            "program at the end of the bottom layer",
            vec![
                layer(8 << 20, 15, Some(Place::Last))?,
                middle,
                layer(2 << 20, 16, None)?,
            ],
        ),
    ];
    println!("## Verification: bytes read");
    println!();
    println!("One linux/amd64 image per row: three gzip layers of incompressible bytes (8, 4 and 2 MiB, bottom first) and the program `/app` (a 64-byte ELF header) where the row says; `noe` serving with `--verify-binaries=background` admits a pod of it and verifies it. Bytes read: `noe_verification_bytes_total` (compressed layer bytes).");
    println!();
    println!("| program | top layer KiB | all layers KiB | read KiB | read / top layer | target |");
    println!("|---|---:|---:|---:|---:|---|");
    for (i, (what, layers)) in cases.into_iter().enumerate() {
        push_layers(&pusher, &layers).await?;
        let images = push_images(registry, &pusher, &layers, &[format!("bytes-{i}")]).await?;
        let noe = start_noe(&options.noe, tls, &noe_args(registry, "background", 2)).await?;
        admit_all(&client, &noe, "bytes", &images).await?;
        until_verified(&noe, 1.0).await?;
        let read = noe.metric("noe_verification_bytes_total").await?;
        let top = layers.last().map_or(0, |l| l.bytes.len()) as f64;
        let all: f64 = layers.iter().map(|l| l.bytes.len() as f64).sum();
        let target = if i == 0 { "≤ 1.10" } else { "" };
        println!(
            "| {what} | {:.0} | {:.0} | {:.0} | {:.3} | {target} |",
            top / 1024.0,
            all / 1024.0,
            read / 1024.0,
            read / top
        );
    }
    println!();
    Ok(())
}

/// Peak RSS above idle while [`MEMORY_IMAGES`] images are verified (part 2).
async fn memory(options: &Options, registry: &Registry, tls: &Tls) -> anyhow::Result<()> {
    let pusher = registry.pusher()?;
    let client = tls.client()?;
    // The program at the end of an 8 MiB layer: each verification reads and inflates it all;
    // at its start: each reads the first chunks only (what a verification holds at least).
    let last = vec![layer(8 << 20, 21, Some(Place::Last))?];
    let first = vec![layer(8 << 20, 22, Some(Place::First))?];
    push_layers(&pusher, &last).await?;
    push_layers(&pusher, &first).await?;
    println!("## Verification: memory");
    println!();
    println!("{MEMORY_IMAGES} linux/amd64 images (each its own digest; one 8 MiB gzip layer of incompressible bytes with `/app` at its end, so each verification reads and inflates all of it, or at its start) admitted as pods of {IMAGES_PER_POD} images by a fresh `noe`; RSS sampled every 10 ms until every image is verified (`off`: 2 s after the admissions). Above idle: the peak minus the RSS after start.");
    println!();
    println!("| `--verify-binaries` | `--verify-concurrency` | `/app` at the layer's | RSS idle MiB | peak RSS MiB | peak above idle MiB | seconds to verify all | target |");
    println!("|---|---:|---|---:|---:|---:|---:|---|");
    let rows = [
        ("off", 2, &last, "end"),
        ("background", 2, &last, "end"),
        ("background", 100, &last, "end"),
        ("background", 100, &first, "start"),
    ];
    for (round, (mode, concurrency, layers, place)) in rows.into_iter().enumerate() {
        let images = push_images(
            registry,
            &pusher,
            layers,
            &tags(&format!("memory-{round}"), MEMORY_IMAGES),
        )
        .await?;
        let noe = start_noe(&options.noe, tls, &noe_args(registry, mode, concurrency)).await?;
        let (idle, _) = noe.rss_kib()?;
        let started = Instant::now();
        admit_all(&client, &noe, "memory", &images).await?;
        let peak = if mode == "off" {
            tokio::time::sleep(Duration::from_secs(2)).await;
            noe.rss_kib()?.1
        } else {
            until_verified(&noe, MEMORY_IMAGES as f64).await?
        };
        let took = started.elapsed().as_secs_f64();
        let target = if concurrency == 100 { "≤ 64 MiB" } else { "" };
        println!(
            "| {mode} | {concurrency} | {place} | {:.1} | {:.1} | {:.1} | {took:.1} | {target} |",
            idle as f64 / 1024.0,
            peak as f64 / 1024.0,
            peak.saturating_sub(idle) as f64 / 1024.0,
        );
    }
    println!();
    Ok(())
}

/// Warm admissions of `pod` for `window`, [`WARM_CONCURRENCY`] in flight; their latencies.
async fn warm_admissions(
    client: &reqwest::Client,
    noe: &Process,
    pod: &serde_json::Value,
    window: Duration,
) -> anyhow::Result<Vec<Duration>> {
    let started = Instant::now();
    let workers = (0..WARM_CONCURRENCY).map(|_| async {
        let mut latencies = Vec::new();
        while started.elapsed() < window {
            let sent = Instant::now();
            admit(client, noe.addr, pod).await?;
            latencies.push(sent.elapsed());
        }
        anyhow::Ok(latencies)
    });
    let mut all = Vec::new();
    for latencies in futures::future::join_all(workers).await {
        all.extend(latencies?);
    }
    Ok(all)
}

/// Admission latency during a burst of [`BURST_IMAGES`] verifications (part 3), `off`
/// beside `background`.
async fn burst(options: &Options, registry: &Registry, tls: &Tls) -> anyhow::Result<()> {
    let pusher = registry.pusher()?;
    let client = tls.client()?;
    let layers = vec![layer(2 << 20, 31, Some(Place::Last))?];
    push_layers(&pusher, &layers).await?;
    let warm = push_images(registry, &pusher, &layers, &["warm".to_owned()]).await?;
    let pod = pod_review("warm", &warm);
    let window = options.duration;
    let mut processes = Vec::new();
    for mode in ["off", "background"] {
        let noe = start_noe(&options.noe, tls, &noe_args(registry, mode, 2)).await?;
        // The warm image is cached (and verified) before anything is measured.
        admit(&client, noe.addr, &pod).await?;
        if mode == "background" {
            until_verified(&noe, 1.0).await?;
        }
        processes.push((mode, noe, Vec::new(), 0.0));
    }
    for round in 0..options.rounds.max(1) {
        for (mode, noe, latencies, done) in &mut processes {
            let images = push_images(
                registry,
                &pusher,
                &layers,
                &tags(&format!("burst-{mode}-{round}"), BURST_IMAGES),
            )
            .await?;
            let before = verified(noe).await?;
            // The burst: its images looked up cold (and, in background, queued).
            admit_all(&client, noe, &format!("burst-{round}"), &images).await?;
            latencies.extend(warm_admissions(&client, noe, &pod, window).await?);
            *done += verified(noe).await? - before;
            // The next round starts with an empty queue.
            let started = Instant::now();
            while noe
                .metric("noe_verification_queue_depth")
                .await
                .unwrap_or(0.0)
                > 0.0
            {
                if started.elapsed() > VERDICTS_DEADLINE {
                    bail!("the verification queue did not drain");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    println!("## Verification: admission latency during a burst");
    println!();
    println!(
        "Two `noe` processes side by side, `--verify-binaries=off` and `background` (`--verify-concurrency=2`), in {} alternating rounds: each round admits pods holding {BURST_IMAGES} new images (each its own digest; one 2 MiB gzip layer with `/app` at its end), then for {} s admits a pod of one warm image, {WARM_CONCURRENCY} in flight. Latency measured by the client.",
        options.rounds.max(1),
        window.as_secs()
    );
    println!();
    println!("| `--verify-binaries` | admissions | median ms | p99 ms | p99 / p99 of `off` | verified during the windows | target |");
    println!("|---|---:|---:|---:|---:|---:|---|");
    let mut off_p99 = None;
    for (mode, _, latencies, done) in processes {
        let count = latencies.len();
        let (median, p99) = percentiles(latencies);
        let base = *off_p99.get_or_insert(p99);
        let target = if mode == "background" { "≤ 1.2" } else { "" };
        println!(
            "| {mode} | {count} | {median:.2} | {p99:.2} | {:.2} | {done:.0} | {target} |",
            p99 / base
        );
    }
    println!();
    Ok(())
}

pub async fn run(options: &Options) -> anyhow::Result<()> {
    let registry = Registry::start().await.context("starting the registry")?;
    let tls = Tls::new()?;
    let part = options.verify_part.as_deref();
    let runs = |name: &str| part.is_none_or(|p| p == name);
    if runs("bytes") {
        bytes_read(options, &registry, &tls).await?;
    }
    if runs("memory") {
        memory(options, &registry, &tls).await?;
    }
    if runs("burst") {
        burst(options, &registry, &tls).await?;
    }
    Ok(())
}
