//! The warm path: `noe` with the image's platforms cached against the floor, driven by wrk side
//! by side (alternating rounds in one run), same request body, same client settings. With
//! `--controllers`, a third server in the same rounds: `noe` running its controllers
//! (`--watch-nodes --remediate=report`) over a simulated cluster of the scripted API server,
//! measured once its reflectors listed everything and remediation checked every pod.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use base64::Engine as _;
use noe_test_support::{
    namespace_json, push_standard_fixtures, Fixtures, KubeApi, Registry, Resource,
};

use crate::cluster::populate_with;
use crate::noe::{admit, admit_bytes, start_floor, start_floor_answering, start_noe, Process, Tls};
use crate::wrk::{self, Report};
use crate::{FloorAnswer, Options};
use noe_test_support::{deployment_pod_review, pod_review};

/// The simulated cluster and the `noe` that runs controllers over it.
struct Cluster {
    _api: KubeApi,
    noe: Process,
    synced: Duration,
}

/// Sum of every sample of a counter family in `noe`'s `/metrics`.
async fn counter_sum(process: &Process, name: &str) -> anyhow::Result<f64> {
    let addr = process.metrics.context("no metrics address")?;
    let text = reqwest::get(format!("http://{addr}/metrics"))
        .await?
        .text()
        .await?;
    Ok(text
        .lines()
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// Starts the API server with the cluster (pods drawing from fixture images that run on both
/// arches) and `noe` with its controllers; waits until every pod was checked.
async fn start_cluster(
    options: &Options,
    registry: &Registry,
    fixtures: &Fixtures,
    tls: &Tls,
) -> anyhow::Result<Cluster> {
    let api = KubeApi::start().await?;
    let pool = [
        fixtures.oci_index.reference(),
        fixtures.docker_list.reference(),
        fixtures.nested_index.reference(),
    ];
    populate_with(&api, options.cluster_nodes, options.cluster_pods, &pool);
    let kubeconfig = tls.dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, api.kubeconfig_yaml())?;
    let started = Instant::now();
    let noe = start_noe(
        &options.noe,
        tls,
        &[
            format!("--insecure-registries={}", registry.host()),
            format!("--kubeconfig={}", kubeconfig.display()),
            "--watch-nodes".to_owned(),
            "--remediate=report".to_owned(),
        ],
    )
    .await?;
    let deadline = started + Duration::from_secs(600);
    let pods = options.cluster_pods as f64;
    while counter_sum(&noe, "noe_controller_pods_checked_total").await? < pods {
        if Instant::now() > deadline {
            bail!("the controllers did not check every pod within 600 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(Cluster {
        _api: api,
        noe,
        synced: started.elapsed(),
    })
}

pub async fn run(options: &Options) -> anyhow::Result<()> {
    if options.every_pod_new {
        return crate::fresh::run(options).await;
    }
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
    let cluster = if options.controllers {
        Some(start_cluster(options, &registry, &fixtures, &tls).await?)
    } else {
        None
    };
    let review = if options.deployment_pod {
        deployment_pod_review
    } else {
        pod_review
    }(
        "7f0c4a1e-3b52-4c1f-9d1a-2f6c1c3b9e10",
        &[fixtures.oci_index.reference()],
    );
    let client = tls.client()?;
    let with_controllers = cluster.as_ref().map(|c| &c.noe);
    for server in std::iter::once(&noe)
        .chain(&baseline)
        .chain(with_controllers)
    {
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
    let floor = match options.floor_answer {
        FloorAnswer::Constant => start_floor(&tls).await?,
        FloorAnswer::Noe => {
            let answer = admit_bytes(&client, noe.addr, &body).await?;
            let parsed: serde_json::Value = serde_json::from_slice(&answer)?;
            if parsed["response"]["patch"].is_null() {
                bail!("noe's answer for the floor holds no patch: {parsed}");
            }
            let answer_file = tls.dir.path().join("warm-answer.json");
            std::fs::write(&answer_file, &answer)?;
            start_floor_answering(&tls, Some(&answer_file)).await?
        }
    };
    let script = wrk::script(tls.dir.path(), &body)?;
    registry.reset_requests();

    let mut floors = Vec::new();
    let mut ours = Vec::new();
    let mut baselines = Vec::new();
    let mut controlled = Vec::new();
    for _ in 0..options.rounds {
        let mut servers = vec![(&floor, &mut floors, "floor"), (&noe, &mut ours, "noe")];
        if let Some(baseline) = &baseline {
            servers.push((baseline, &mut baselines, "baseline"));
        }
        if let Some(cluster) = &cluster {
            servers.push((&cluster.noe, &mut controlled, "noe+controllers"));
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
    if options.deployment_pod {
        println!("The pod is a Deployment's as the apiserver sends it (`noe_test_support::deployment_pod_review`).");
        println!();
    }
    println!(
        "wrk -t{} -c{} -d{}s --latency, POST of a {}-byte pod AdmissionReview (platforms cached); {} alternating rounds. {}",
        options.threads,
        options.connections,
        options.duration.as_secs(),
        body.len(),
        options.rounds,
        match options.floor_answer {
            FloorAnswer::Noe => "The floor, on the same TLS stack, parses the body as JSON and answers a constant body: noe's own answer to that review, byte for byte (so both write as much; `--floor-answer constant` answers a 134-byte AdmissionReview without a patch instead).",
            FloorAnswer::Constant => "The floor, on the same TLS stack, parses the body as JSON and answers a constant 134-byte AdmissionReview without a patch (`--floor-answer noe` answers noe's own bytes instead).",
        }
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
        if let Some(c) = controlled.get(round) {
            row(round + 1, "noe+controllers", c);
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
    if let Some(cluster) = &cluster {
        let with = mean(&controlled);
        println!();
        println!(
            "`noe --watch-nodes --remediate=report` over {} nodes and {} pods (synced in {:.1} s, before the rounds) in the same rounds: {:.0} req/s ({:.2}× the floor; {:.2}× noe without controllers), p50 {:.3} ms ({:.2}× noe's), p99 {:.3} ms ({:.2}× the floor's; {:.2}× noe's), {:.1} server CPU µs per request ({:.2}× noe's).",
            options.cluster_nodes,
            options.cluster_pods,
            cluster.synced.as_secs_f64(),
            with.requests_per_second,
            with.requests_per_second / floor_mean.requests_per_second,
            with.requests_per_second / ours_mean.requests_per_second,
            with.p50_ms,
            with.p50_ms / ours_mean.p50_ms,
            with.p99_ms,
            with.p99_ms / floor_mean.p99_ms,
            with.p99_ms / ours_mean.p99_ms,
            with.server_cpu_us,
            with.server_cpu_us / ours_mean.server_cpu_us,
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
