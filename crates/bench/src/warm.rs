//! The warm path: `noe` with the image's platforms cached against the floor, driven by wrk side
//! by side (alternating rounds in one run), same request body, same client settings.

use anyhow::{bail, Context as _};
use base64::Engine as _;
use noe_test_support::{namespace_json, push_standard_fixtures, KubeApi, Registry, Resource};

use crate::noe::{admit, start_floor, start_noe, Tls};
use crate::wrk::{self, Report};
use crate::Options;
use noe_test_support::pod_review;

pub async fn run(options: &Options) -> anyhow::Result<()> {
    let registry = Registry::start().await?;
    let fixtures = push_standard_fixtures(&registry).await?;
    let tls = Tls::new()?;
    let mut noe_flags = vec![format!("--insecure-registries={}", registry.host())];
    // Kept alive for the whole run: the namespace label is read through it.
    let mut _api = None;
    if options.namespace_preference {
        let api = KubeApi::start().await?;
        api.put(
            Resource::Namespaces,
            "",
            namespace_json("bench", &[("arch.noe.adevinta.com/preferred", "arm64")]),
        );
        let kubeconfig = tls.dir.path().join("kubeconfig.yaml");
        std::fs::write(&kubeconfig, api.kubeconfig_yaml())?;
        noe_flags.push(format!("--kubeconfig={}", kubeconfig.display()));
        noe_flags.push("--namespace-preference".to_owned());
        _api = Some(api);
    }
    let noe = start_noe(&options.noe, &tls, &noe_flags).await?;
    let baseline = match &options.baseline {
        Some(bin) => Some(
            start_noe(
                bin,
                &tls,
                &[format!("--insecure-registries={}", registry.host())],
            )
            .await?,
        ),
        None => None,
    };
    let floor = start_floor(&tls).await?;
    let review = pod_review(
        "7f0c4a1e-3b52-4c1f-9d1a-2f6c1c3b9e10",
        &[fixtures.oci_index.reference()],
    );
    let client = tls.client()?;
    for server in std::iter::once(&noe).chain(&baseline) {
        let warm = admit(&client, server.addr, &review).await?;
        if warm["response"]["patch"].is_null() {
            bail!("the warm-up admission did not patch the pod: {warm}");
        }
        if options.namespace_preference && server.addr == noe.addr {
            let patch = warm["response"]["patch"].as_str().unwrap_or_default();
            let decoded = base64::engine::general_purpose::STANDARD.decode(patch)?;
            let ops: serde_json::Value = serde_json::from_slice(&decoded)?;
            let pinned = ops.as_array().into_iter().flatten().any(|op| {
                op["path"] == "/spec/nodeSelector"
                    && op["value"] == serde_json::json!({"kubernetes.io/arch": "arm64"})
            });
            if !pinned {
                bail!("the namespace's preferred arch (arm64) was not used: {warm}");
            }
        }
    }
    let body = serde_json::to_string(&review)?;
    let script = wrk::script(tls.dir.path(), &body)?;
    registry.reset_requests();

    let mut floors = Vec::new();
    let mut ours = Vec::new();
    let mut baselines = Vec::new();
    for _ in 0..options.rounds {
        let mut servers = vec![(&floor, &mut floors, "floor"), (&noe, &mut ours, "noe")];
        if let Some(baseline) = &baseline {
            servers.push((baseline, &mut baselines, "baseline"));
        }
        for (server, out, name) in servers {
            let cpu = server.cpu_seconds()?;
            let mut report = wrk::run(
                server.addr,
                &script,
                options.threads,
                options.connections,
                options.duration,
            )
            .await
            .context(name)?;
            report.server_cpu_us =
                (server.cpu_seconds()? - cpu) * 1e6 / report.requests.max(1) as f64;
            out.push(report);
        }
    }
    let upstream = registry.request_count();
    println!("## Warm path");
    println!();
    if options.namespace_preference {
        println!("noe runs with --namespace-preference (the namespace's label read through a scripted API server, cached).");
        println!();
    }
    println!(
        "wrk -t{} -c{} -d{}s --latency, POST of a {}-byte pod AdmissionReview (platforms cached); {} alternating rounds.",
        options.threads,
        options.connections,
        options.duration.as_secs(),
        body.len(),
        options.rounds
    );
    println!();
    println!("| round | server | requests/s | p50 ms | p99 ms | errors | server CPU µs/request |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for (round, (f, o)) in floors.iter().zip(&ours).enumerate() {
        row(round + 1, "floor", f);
        row(round + 1, "noe", o);
        if let Some(b) = baselines.get(round) {
            row(round + 1, "baseline", b);
        }
    }
    let floor_mean = mean(&floors);
    let ours_mean = mean(&ours);
    println!();
    println!("| | floor | noe | noe/floor | target |");
    println!("|---|---:|---:|---:|---|");
    println!(
        "| requests/s (mean) | {:.0} | {:.0} | {:.2} | ≥ 0.90 |",
        floor_mean.requests_per_second,
        ours_mean.requests_per_second,
        ours_mean.requests_per_second / floor_mean.requests_per_second
    );
    println!(
        "| p50 ms (mean) | {:.3} | {:.3} | {:.2} | |",
        floor_mean.p50_ms,
        ours_mean.p50_ms,
        ours_mean.p50_ms / floor_mean.p50_ms
    );
    println!(
        "| p99 ms (mean) | {:.3} | {:.3} | {:.2} | ≤ 1.20 |",
        floor_mean.p99_ms,
        ours_mean.p99_ms,
        ours_mean.p99_ms / floor_mean.p99_ms
    );
    println!(
        "| server CPU µs per request (mean) | {:.1} | {:.1} | {:.2} | |",
        floor_mean.server_cpu_us,
        ours_mean.server_cpu_us,
        ours_mean.server_cpu_us / floor_mean.server_cpu_us
    );
    if !baselines.is_empty() {
        let base = mean(&baselines);
        println!();
        println!(
            "Baseline `{}` in the same rounds: {:.0} req/s ({:.2}× the floor; noe/baseline {:.2}), p99 {:.3} ms ({:.2}× the floor's), {:.1} server CPU µs per request (noe/baseline {:.2}).",
            options.baseline.as_deref().map(|p| p.display().to_string()).unwrap_or_default(),
            base.requests_per_second,
            base.requests_per_second / floor_mean.requests_per_second,
            ours_mean.requests_per_second / base.requests_per_second,
            base.p99_ms,
            base.p99_ms / floor_mean.p99_ms,
            base.server_cpu_us,
            ours_mean.server_cpu_us / base.server_cpu_us,
        );
    }
    println!();
    println!("Registry requests during the load: {upstream} (the platforms came from the cache).");
    println!();
    Ok(())
}

fn row(round: usize, server: &str, r: &Report) {
    println!(
        "| {round} | {server} | {:.0} | {:.3} | {:.3} | {} | {:.1} |",
        r.requests_per_second, r.p50_ms, r.p99_ms, r.errors, r.server_cpu_us
    );
}

fn mean(reports: &[Report]) -> Report {
    let n = reports.len().max(1) as f64;
    Report {
        requests_per_second: reports.iter().map(|r| r.requests_per_second).sum::<f64>() / n,
        p50_ms: reports.iter().map(|r| r.p50_ms).sum::<f64>() / n,
        p99_ms: reports.iter().map(|r| r.p99_ms).sum::<f64>() / n,
        requests: reports.iter().map(|r| r.requests).sum(),
        errors: reports.iter().map(|r| r.errors).sum(),
        server_cpu_us: reports.iter().map(|r| r.server_cpu_us).sum::<f64>() / n,
    }
}
