//! `noe report` with its upgrade paths, beside the same report without them, and its HTML page in
//! a browser (`noe-bench report-upgrades`).
//!
//! [`WORKLOADS`] Deployments over [`IMAGES`] images on the real registry behind a delaying proxy
//! adding `--rtt` to every exchange: [`BLOCKED`] of them are amd64-only and block arm64, each the
//! lowest version of a repository of [`TAGS`] tags (`1.0.0` to `1.9.99`, arm64 from
//! [`ARM64_FROM`] on); the others run on arm64 already. Measured, in rounds alternating
//! `--upgrades=false` and `--upgrades=true`: the wall time of each, the registry requests of each
//! blocked repository against the budget (its own lookup, the tag pages, ⌈log2(tags)⌉ + 3
//! versions), and that every path found is the right one. Then the report as `-o html`: its size,
//! and how long headless Chromium takes to load and lay it out.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context as _};
use futures::StreamExt as _;
use noe_test_support::{push_versions, Browser, DelayProxy, Registry};

use super::{noe_report, workloads_file};
use crate::images::{references, tags, Children};
use crate::Options;

/// Workloads in the file.
pub const WORKLOADS: usize = 10_000;
/// Distinct images they name.
pub const IMAGES: usize = 1_000;
/// Of them, those that block arm64 (every tenth image).
pub const BLOCKED: usize = 100;
/// Tags of each blocked image's repository.
pub const TAGS: usize = 1_000;
/// The first version of each blocked repository that runs on arm64 (its position in the track).
pub const ARM64_FROM: usize = 613;
/// Rounds of (without, with) upgrade paths.
const ROUNDS: usize = 2;
/// Loads of the HTML page.
const LOADS: usize = 3;
/// Repositories pushed at the same time.
const PUSHING: usize = 8;

/// The version at `position` of a blocked repository's track.
fn version(position: usize) -> String {
    format!("1.{}.{}", position / 100, position % 100)
}

/// The repository of blocked image `k`.
fn repository(k: usize) -> String {
    format!("bench/legacy-{k}")
}

/// ⌈log2(n)⌉.
fn log2_ceil(n: usize) -> usize {
    n.max(1)
        .next_power_of_two()
        .trailing_zeros()
        .try_into()
        .unwrap_or(usize::MAX)
}

/// Spread of a few figures: `min–max`.
fn spread(values: &[f64], digits: usize) -> String {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{min:.digits$}–{max:.digits$}")
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

/// Checks the JSON report: every workload reported, the blocked ones blocked, each blocked
/// image's path `first` [`ARM64_FROM`], `newest` the last tag (which runs).
fn check_json(report: &serde_json::Value, upgrades: bool) -> anyhow::Result<()> {
    let items = report["items"].as_array().map_or(0, Vec::len);
    let summary = &report["summary"]["arm64"];
    let blocked = summary["workloads"]["blocked"].as_u64().unwrap_or_default();
    let expected = u64::try_from(WORKLOADS / (IMAGES / BLOCKED))?;
    if items != WORKLOADS || blocked != expected {
        bail!("{items} workloads reported, {blocked} blocked (expected {WORKLOADS}, {expected})");
    }
    let ranked = summary["blockingImages"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    if ranked.len() != BLOCKED {
        bail!("{} blocking images (expected {BLOCKED})", ranked.len());
    }
    if !upgrades {
        return Ok(());
    }
    let first = version(ARM64_FROM);
    let newest = version(TAGS - 1);
    for image in ranked {
        let path = &image["upgrade"];
        if path["first"] != first.as_str()
            || path["newest"] != newest.as_str()
            || path["newestSupports"] != true
        {
            bail!(
                "{}: path {path} (expected first {first}, newest {newest})",
                image["image"]
            );
        }
    }
    Ok(())
}

pub async fn run(options: &Options) -> anyhow::Result<()> {
    let registry = Registry::start().await?;
    let children = Children::push(&registry).await?;
    let ready = tags("ready", IMAGES - BLOCKED);
    children.tag(&registry, 2, &ready).await?;
    let track: Vec<(String, bool)> = (0..TAGS).map(|i| (version(i), i >= ARM64_FROM)).collect();
    let track: Vec<(&str, bool)> = track.iter().map(|(t, a)| (t.as_str(), *a)).collect();
    let pusher = registry.pusher()?;
    let pushed: Vec<anyhow::Result<()>> = futures::stream::iter(0..BLOCKED)
        .map(|k| {
            let (pusher, track) = (&pusher, &track);
            async move { push_versions(pusher, &repository(k), track).await }
        })
        .buffer_unordered(PUSHING)
        .collect()
        .await;
    pushed.into_iter().collect::<anyhow::Result<Vec<()>>>()?;

    let proxy = DelayProxy::start(registry.addr(), options.rtt).await?;
    let host = proxy.host();
    let mut ready = references(&host, &ready).into_iter();
    // Every tenth image blocks.
    let images: Vec<String> = (0..IMAGES)
        .map(|i| {
            if i % (IMAGES / BLOCKED) == 0 {
                Some(format!(
                    "{host}/{}:{}",
                    repository(i / (IMAGES / BLOCKED)),
                    version(0)
                ))
            } else {
                ready.next()
            }
        })
        .collect::<Option<_>>()
        .context("not enough ready images")?;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("workloads.yaml");
    std::fs::write(&file, workloads_file(&images, WORKLOADS))?;
    let absent = dir.path().join("absent");
    let args = |output: &str, upgrades: bool| {
        vec![
            format!("--file={}", file.display()),
            format!("--output={output}"),
            format!("--upgrades={upgrades}"),
            format!("--insecure-registries={host}"),
            format!(
                "--allow-registry-cidrs={}",
                noe_test_support::LOOPBACK_CIDRS
            ),
            // The lookup path is measured, not the client-side rate limit (every image is on
            // one host).
            "--registry-qps=0".to_owned(),
            format!("--docker-config-path={}", absent.display()),
            format!("--containerd-config-path={}", absent.display()),
        ]
    };

    // Alternating rounds, each a fresh process (nothing remembered between them).
    let (mut without, mut with) = (Vec::new(), Vec::new());
    let mut per_repository: Vec<usize> = Vec::new();
    let mut tag_pages = 0usize;
    let out = dir.path().join("report.json");
    for round in 0..ROUNDS * 2 {
        let upgrades = round % 2 == 1;
        registry.reset_requests();
        let (elapsed, _) = noe_report(&options.noe, &args("json", upgrades), &out).await?;
        let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out)?)?;
        check_json(&report, upgrades)?;
        if upgrades {
            with.push(elapsed.as_secs_f64());
            per_repository.clear();
            tag_pages = 0;
            for k in 0..BLOCKED {
                let (pages, manifests) = registry.repository_requests(&repository(k));
                tag_pages = tag_pages.max(pages);
                per_repository.push(pages + manifests);
            }
        } else {
            without.push(elapsed.as_secs_f64());
        }
    }
    // The image's own lookup, the tag pages, then ⌈log2(track)⌉ + 3 versions.
    let budget = 1 + tag_pages + log2_ceil(TAGS) + 3;
    let most = per_repository.iter().copied().max().unwrap_or_default();
    let total: usize = per_repository.iter().sum();
    if most > budget {
        bail!("a blocked image cost {most} requests (budget {budget})");
    }
    let ratio = mean(&with) / mean(&without);

    // The HTML page, with the paths.
    let page = dir.path().join("report.html");
    noe_report(&options.noe, &args("html", true), &page).await?;
    let bytes = std::fs::metadata(&page)?.len();
    let loads = match Browser::find() {
        Some(binary) => {
            let url = format!("file://{}", page.display());
            let loads = tokio::task::spawn_blocking(move || render(&binary, &url)).await??;
            Some(loads)
        }
        None => None,
    };

    println!("## `noe report` with upgrade paths: {WORKLOADS} workloads, {BLOCKED} blocked images of {TAGS} tags");
    println!();
    println!(
        "{WORKLOADS} Deployments over {IMAGES} images behind a delaying proxy adding {} ms to every exchange; every tenth image is amd64-only, the lowest version of a repository of {TAGS} tags (`{}` to `{}`, arm64 from `{}`). `noe report -o json` with the default `--concurrency` (16) and `--registry-qps=0`, a fresh process per run, {ROUNDS} rounds alternating `--upgrades=false` and `--upgrades=true`; every path found checked (`first` `{}`, `newest` `{}`).",
        options.rtt.as_millis(),
        version(0),
        version(TAGS - 1),
        version(ARM64_FROM),
        version(ARM64_FROM),
        version(TAGS - 1),
    );
    println!();
    println!("| `--upgrades` | wall s (per round) | mean | with / without |");
    println!("|---|---|---:|---:|");
    println!(
        "| `false` | {} | {:.2} | |",
        spread(&without, 2),
        mean(&without)
    );
    println!(
        "| `true` | {} | {:.2} | **{ratio:.2}×** |",
        spread(&with, 2),
        mean(&with)
    );
    println!();
    println!(
        "Registry requests per blocked repository with `--upgrades=true` (its own lookup, {tag_pages} tag page(s), the versions looked up): most **{most}**, {:.1} on average; budget {budget} (1 + {tag_pages} + ⌈log2 {TAGS}⌉ + 3).",
        total as f64 / BLOCKED as f64
    );
    println!();
    println!("### The HTML page of the same report");
    println!();
    println!(
        "`noe report -o html --upgrades=true` of the same {WORKLOADS} workloads: **{:.2} MiB**.",
        bytes as f64 / (1024.0 * 1024.0)
    );
    match loads {
        Some(loads) => println!(
            "Headless Chromium (DevTools protocol, 1280×900, a fresh profile), from navigation to the `load` event and two frames after it, {LOADS} loads: **{} s** (all {WORKLOADS} rows in the DOM).",
            spread(&loads, 2)
        ),
        None => println!("No `chromium` on PATH (or `NOE_TEST_CHROMIUM`): the page was not loaded."),
    }
    println!();
    Ok(())
}

/// Loads `url` [`LOADS`] times in one headless Chromium; the seconds of each load. Each load
/// must lay out every workload's row.
fn render(binary: &Path, url: &str) -> anyhow::Result<Vec<f64>> {
    let mut browser = Browser::start(binary, 1280, 900)?;
    let mut loads = Vec::with_capacity(LOADS);
    for _ in 0..LOADS {
        browser.open("about:blank")?;
        let took: Duration = browser.open(url)?;
        let rows = browser.eval("document.querySelectorAll('#workloads tbody tr').length")?;
        if rows.as_u64() != u64::try_from(WORKLOADS).ok() {
            bail!("{rows} rows in the page (expected {WORKLOADS})");
        }
        loads.push(took.as_secs_f64());
    }
    Ok(loads)
}
