//! Hostile NFD image-compatibility artifacts, each inside every byte bound (256 KiB): what one
//! pod whose image carries one costs the real `noe` binary. The artifacts are attached to the
//! standard fixtures in the real registry (as `oras attach` lays them out), and `noe explain -f
//! POD --nodes NODES` decides the pod as `--image-selection` would (discovered selection),
//! measured by `/usr/bin/time -v`: CPU seconds (user + system), peak RSS, wall time, and what
//! the pod's selection said. With `--baseline`, the same cases run with that binary too (the
//! pod with every hostile image at once only with `--noe`: it costs gigabytes without the
//! bounds).

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context as _};
use noe_test_support::{
    attach, compat_artifact, nfd_nested_spec, nfd_regex_spec, node_json, push_standard_fixtures,
    Registry, NFD_ARTIFACT_TYPE, NFD_SPEC_TYPE,
};
use serde_json::{json, Value};

use crate::Options;

/// The cases: (name, spec).
fn cases() -> Vec<(&'static str, String)> {
    vec![
        (
            "100,000 nested flow sequences (200 KB)",
            nfd_nested_spec(100_000, false),
        ),
        (
            "100,000 nested sequences inside a `value`",
            nfd_nested_spec(100_000, true),
        ),
        (
            "512 `InRegexp` × 64 values of `\\w` (32,768 regexes)",
            nfd_regex_spec(|_| "\\w".to_owned()),
        ),
        (
            "512 `InRegexp` × 64 values of 26 distinct `\\wX`",
            nfd_regex_spec(|i| format!("\\w{}", char::from(b'a' + (i % 26) as u8))),
        ),
    ]
}

/// What `/usr/bin/time -v` says of one run.
struct Measured {
    cpu: f64,
    wall: String,
    peak_kib: u64,
    said: String,
}

fn field<'a>(report: &'a str, name: &str) -> Option<&'a str> {
    report
        .lines()
        .find_map(|l| l.trim().strip_prefix(name))
        .map(|v| v.trim_start_matches(':').trim())
}

async fn explain(noe: &Path, pod: &Path, nodes: &Path, registry: &str) -> anyhow::Result<Measured> {
    let absent = pod.with_file_name("absent");
    let output = tokio::process::Command::new("/usr/bin/time")
        .arg("-v")
        .arg(noe)
        .args(["explain", "-f"])
        .arg(pod)
        .arg(format!("--nodes={}", nodes.display()))
        .args(["--output=json", "--allow-lookup-errors"])
        .arg(format!("--insecure-registries={registry}"))
        .arg(format!(
            "--allow-registry-cidrs={}",
            noe_test_support::LOOPBACK_CIDRS
        ))
        .arg(format!("--docker-config-path={}", absent.display()))
        .arg(format!("--containerd-config-path={}", absent.display()))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("KUBECONFIG", "/nonexistent")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(600), output)
        .await
        .context("noe explain ran 600 s")??;
    let report = String::from_utf8_lossy(&output.stderr);
    let seconds = |name: &str| -> anyhow::Result<f64> {
        field(&report, name)
            .with_context(|| format!("{name} missing from: {report}"))?
            .parse::<f64>()
            .with_context(|| format!("bad {name}"))
    };
    let explained: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    let said = explained["warnings"]
        .as_array()
        .and_then(|w| w.first())
        .and_then(Value::as_str)
        .map(|w| w.rsplit(": ").nth(1).unwrap_or(w).to_owned())
        .or_else(|| explained["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("exit {:?}", output.status.code()));
    Ok(Measured {
        cpu: seconds("User time (seconds)")? + seconds("System time (seconds)")?,
        wall: field(&report, "Elapsed (wall clock) time (h:mm:ss or m:ss)")
            .unwrap_or("?")
            .to_owned(),
        peak_kib: field(&report, "Maximum resident set size (kbytes)")
            .context("no peak RSS")?
            .parse()?,
        said: said.chars().take(90).collect(),
    })
}

pub async fn run(options: &Options) -> anyhow::Result<()> {
    if !Path::new("/usr/bin/time").exists() {
        bail!("/usr/bin/time is missing (apt-get install time)");
    }
    let registry = Registry::start().await?;
    let f = push_standard_fixtures(&registry).await?;
    let pusher = registry.pusher()?;
    let images = [&f.oci_index, &f.docker_list, &f.nested_index, &f.oci_single];
    let cases = cases();
    for (image, (_, spec)) in images.iter().zip(&cases) {
        let subject = (image.media_type.as_str(), image.digest.as_str(), 0usize);
        let artifact = compat_artifact(
            NFD_ARTIFACT_TYPE,
            NFD_SPEC_TYPE,
            spec.as_bytes(),
            Some(subject),
            None,
        );
        attach(&pusher, &image.repository, &image.digest, &artifact, &[]).await?;
    }
    let dir = tempfile::tempdir()?;
    let nodes = dir.path().join("nodes.json");
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        node_json("n1", "amd64", "linux"), node_json("n2", "arm64", "linux")]});
    std::fs::write(&nodes, list.to_string())?;
    let pod_file = |name: &str, images: &[String]| -> anyhow::Result<std::path::PathBuf> {
        let containers: Vec<Value> = images
            .iter()
            .enumerate()
            .map(|(i, image)| json!({"name": format!("c{i}"), "image": image}))
            .collect();
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": containers}});
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, pod.to_string())?;
        Ok(path)
    };
    let mut runs: Vec<(String, std::path::PathBuf, bool)> = Vec::new();
    for (i, (image, (name, _))) in images.iter().zip(&cases).enumerate() {
        runs.push((
            (*name).to_owned(),
            pod_file(&format!("pod{i}"), &[image.reference()])?,
            true,
        ));
    }
    let every: Vec<String> = images.iter().map(|i| i.reference()).collect();
    runs.push((
        "one pod with all four images".to_owned(),
        pod_file("every", &every)?,
        false,
    ));
    let mut binaries = vec![("noe", options.noe.clone())];
    if let Some(baseline) = &options.baseline {
        binaries.push(("baseline", baseline.clone()));
    }
    println!("## Image selection: hostile NFD artifacts");
    println!();
    println!("`noe explain -f POD --nodes NODES` (2 nodes) of one pod whose image carries the artifact, from the real registry, under `/usr/bin/time -v`.");
    println!();
    println!("| artifact | binary | CPU s | wall | peak RSS MiB | the pod's selection |");
    println!("|---|---|---:|---:|---:|---|");
    for (name, pod, for_baseline) in &runs {
        for (label, binary) in &binaries {
            if *label == "baseline" && !for_baseline {
                continue;
            }
            let m = explain(binary, pod, &nodes, &registry.host()).await?;
            println!(
                "| {name} | {label} | {:.2} | {} | {:.0} | {} |",
                m.cpu,
                m.wall,
                m.peak_kib as f64 / 1024.0,
                m.said.replace('|', "\\|")
            );
        }
    }
    println!();
    Ok(())
}
