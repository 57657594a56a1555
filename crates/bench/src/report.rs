//! `noe report` over a large file: [`WORKLOADS`] Deployments over [`IMAGES`] distinct uncached
//! public images (two-platform OCI indexes on the real registry), reached through a delaying
//! proxy adding `--rtt` to every exchange; `noe report` runs as a process with its default
//! `--concurrency`. Measured: wall time, peak RSS (`VmHWM`, polled), registry requests per
//! image (each image must be asked once), and that every workload was reported.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::images::{references, tags, Children, Counted};
use crate::Options;
use noe_test_support::{DelayProxy, Registry};

pub mod upgrades;

/// Workloads in the file.
pub const WORKLOADS: usize = 10_000;
/// Distinct images they name.
pub const IMAGES: usize = 1_000;
/// The run is stopped after this long.
const LIMIT: Duration = Duration::from_secs(300);

/// The workloads file: Deployment `i` runs image `i % images`.
pub(crate) fn workloads_file(images: &[String], workloads: usize) -> String {
    let mut out = String::with_capacity(workloads.saturating_mul(400));
    for i in 0..workloads {
        let image = images
            .get(i % images.len().max(1))
            .map_or("", String::as_str);
        let deployment = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": format!("app-{i}"), "namespace": format!("team-{}", i % 50)},
            "spec": {"replicas": 1 + i % 3, "template": {"spec": {"containers": [{
                "name": "app", "image": image,
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}
            }]}}}
        });
        out.push_str("---\n");
        out.push_str(&deployment.to_string());
        out.push('\n');
    }
    out
}

/// `VmHWM` of a process in KiB, if it still runs.
fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Runs `noe report ARGS` as a process writing its output to `out`; returns its wall time and
/// peak RSS in KiB (`VmHWM`, polled every 5 ms). An exit status other than 0 is an error.
pub(crate) async fn noe_report(
    noe: &Path,
    args: &[String],
    out: &Path,
) -> anyhow::Result<(Duration, u64)> {
    let started = Instant::now();
    let mut child = tokio::process::Command::new(noe)
        .arg("report")
        .args(args)
        .env("NOE_LOG_LEVEL", "error")
        .env_remove("RUST_LOG")
        .stdout(Stdio::from(std::fs::File::create(out)?))
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting noe report")?;
    let pid = child.id().context("noe report exited at once")?;
    let mut peak = 0u64;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status?,
            () = tokio::time::sleep(Duration::from_millis(5)) => {
                peak = peak.max(peak_kib(pid).unwrap_or_default());
                if started.elapsed() > LIMIT {
                    child.start_kill()?;
                    bail!("noe report ran more than {LIMIT:?}");
                }
            }
        }
    };
    let elapsed = started.elapsed();
    if status.code() != Some(0) {
        let output = child.wait_with_output().await?;
        bail!(
            "noe report exited with {status}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok((elapsed, peak))
}

pub async fn run(options: &Options) -> anyhow::Result<()> {
    let registry = Registry::start().await?;
    let children = Children::push(&registry).await?;
    let names = tags("report", IMAGES);
    children.tag(&registry, 2, &names).await?;
    let proxy = DelayProxy::start(registry.addr(), options.rtt).await?;
    let images = references(&proxy.host(), &names);
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("workloads.yaml");
    std::fs::write(&file, workloads_file(&images, WORKLOADS))?;
    let out = dir.path().join("report.json");
    let absent = dir.path().join("absent");
    registry.reset_requests();

    let args = [
        format!("--file={}", file.display()),
        "--output=json".to_owned(),
        format!("--insecure-registries={}", proxy.host()),
        format!(
            "--allow-registry-cidrs={}",
            noe_test_support::LOOPBACK_CIDRS
        ),
        // What is measured is the lookup path, not the client-side rate limit (default 50
        // requests per second per host: every image here is on one host).
        "--registry-qps=0".to_owned(),
        format!("--docker-config-path={}", absent.display()),
        format!("--containerd-config-path={}", absent.display()),
    ];
    let (elapsed, peak) = noe_report(&options.noe, &args, &out).await?;
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out)?)?;
    let items = report["items"].as_array().map_or(0, Vec::len);
    let ready = &report["summary"]["arm64"]["workloads"]["ready"];
    if items != WORKLOADS || ready.as_u64() != u64::try_from(WORKLOADS).ok() {
        bail!("{items} workloads reported, {ready} ready (expected {WORKLOADS})");
    }
    let counted = Counted::of(&registry);
    let mut per_image: HashMap<String, usize> = HashMap::new();
    for request in registry.requests() {
        if request.path.contains("/manifests/") {
            *per_image.entry(request.path).or_default() += 1;
        }
    }
    let most = per_image.values().copied().max().unwrap_or_default();

    println!("## `noe report`: {WORKLOADS} workloads over {IMAGES} images");
    println!();
    println!(
        "A file of {WORKLOADS} Deployments naming {IMAGES} distinct uncached public images (two-platform OCI indexes on the real registry) behind a delaying proxy adding {} ms to every exchange; `noe report -o json` with the default `--concurrency` (16) and `--registry-qps=0` (every image is on one host). Peak RSS is `VmHWM`, polled every 5 ms.",
        options.rtt.as_millis()
    );
    println!();
    println!("| workloads | images | wall s | peak RSS MiB | manifest GETs | manifest HEADs | other requests | most requests for one image |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {WORKLOADS} | {IMAGES} | {:.2} | {:.1} | {} | {} | {} | {most} |",
        elapsed.as_secs_f64(),
        peak as f64 / 1024.0,
        counted.manifest_gets,
        counted.manifest_heads,
        counted.other,
    );
    println!();
    println!(
        "kubearchinspect on paper (one image at a time, a round trip or more each): {IMAGES} × {} ms ≥ {:.0} s.",
        options.rtt.as_millis(),
        IMAGES as f64 * options.rtt.as_secs_f64()
    );
    println!();
    Ok(())
}
