//! The warm path with every pod new (`warm --every-pod-new`): each request a pod no earlier
//! request of the run had (a label of its own), so neither the decision memo nor anything else
//! can answer it from memory; beside `noe` sent the same pod again (answered from the memo), and
//! the floors (`--floor parse,read`), all in the same alternating rounds. The body is written in
//! the apiserver's order (the request's `uid` first), so the read floor's byte search finds the
//! request's uid. Every client builds its body in wrk's Lua `request` function, the repeated one
//! included, so the client does the same work for every server.

use anyhow::{bail, Context as _};
use noe_test_support::{deployment_pod_review, pod_review, push_standard_fixtures, Registry};

use crate::noe::{admit_bytes, start_floor_working, start_noe, Process, Tls};
use crate::wrk::{self, Report, Spread};
use crate::Options;

/// The label value each request replaces.
pub const MARKER: &str = "@POD@";
const UID: &str = "7f0c4a1e-3b52-4c1f-9d1a-2f6c1c3b9e10";

/// The review body, `uid` first in `request` as the apiserver writes it, with a label whose
/// value is [`MARKER`].
pub fn body(deployment_pod: bool, image: String) -> anyhow::Result<String> {
    let make = if deployment_pod {
        deployment_pod_review
    } else {
        pod_review
    };
    let mut review = make(UID, &[image]);
    review["request"]["object"]["metadata"]["labels"]["noe-bench/pod"] = MARKER.into();
    let request = review["request"]
        .as_object_mut()
        .context("the review has no request")?;
    request.remove("uid");
    let text = serde_json::to_string(&review)?;
    let uid_first = format!("\"request\":{{\"uid\":{},", serde_json::to_string(UID)?);
    if text.matches("\"request\":{").count() != 1 {
        bail!("the review's request cannot be found in its text");
    }
    Ok(text.replacen("\"request\":{", &uid_first, 1))
}

/// One server of the rounds.
struct Server<'a> {
    name: String,
    process: &'a Process,
    script: std::path::PathBuf,
    reports: Vec<Report>,
}

pub async fn run(options: &Options) -> anyhow::Result<()> {
    let registry = Registry::start().await?;
    let fixtures = push_standard_fixtures(&registry).await?;
    let tls = Tls::new()?;
    let flags = [format!("--insecure-registries={}", registry.host())];
    let noe = start_noe(&options.noe, &tls, &flags).await?;
    let baseline = match &options.baseline {
        Some(bin) => Some(start_noe(bin, &tls, &flags).await?),
        None => None,
    };
    let body = body(options.deployment_pod, fixtures.oci_index.reference())?;
    let client = tls.client()?;
    let mut answer = None;
    for server in std::iter::once(&noe).chain(&baseline) {
        let warm = admit_bytes(&client, server.addr, &body.replace(MARKER, "warm-up")).await?;
        let parsed: serde_json::Value = serde_json::from_slice(&warm)?;
        if parsed["response"]["patch"].is_null() || parsed["response"]["uid"] != UID {
            bail!("the warm-up admission did not patch the pod: {parsed}");
        }
        answer.get_or_insert(warm);
    }
    let answer_file = tls.dir.path().join("fresh-answer.json");
    std::fs::write(&answer_file, answer.context("no answer")?)?;
    let mut floors = Vec::new();
    for work in &options.floor {
        floors.push((
            *work,
            start_floor_working(&tls, Some(&answer_file), *work).await?,
        ));
    }
    let headers = [("Content-Type", "application/json")];
    let script = |name: &str, vary: bool| {
        wrk::script_each(
            tls.dir.path(),
            name,
            "/mutate",
            &headers,
            &body,
            MARKER,
            vary,
        )
    };
    let new_pods = script("every-pod-new", true)?;
    let same_pod = script("same-pod", false)?;

    let mut servers: Vec<Server> = floors
        .iter()
        .map(|(work, process)| Server {
            name: format!("floor ({})", work.name()),
            process,
            script: new_pods.clone(),
            reports: Vec::new(),
        })
        .collect();
    servers.push(Server {
        name: "noe, every pod new".to_owned(),
        process: &noe,
        script: new_pods.clone(),
        reports: Vec::new(),
    });
    if let Some(baseline) = &baseline {
        servers.push(Server {
            name: "baseline, every pod new".to_owned(),
            process: baseline,
            script: new_pods.clone(),
            reports: Vec::new(),
        });
    }
    servers.push(Server {
        name: "noe, the same pod".to_owned(),
        process: &noe,
        script: same_pod,
        reports: Vec::new(),
    });
    let hits_before = memo_hits(&noe).await?;
    let mut hits_new = 0.0;
    for _ in 0..options.rounds {
        for server in &mut servers {
            let cpu = server.process.cpu_seconds()?;
            let hits = memo_hits(server.process).await.unwrap_or(0.0);
            let mut report = wrk::run(
                server.process.addr,
                &server.script,
                options.threads,
                options.connections,
                options.duration,
            )
            .await
            .with_context(|| server.name.clone())?;
            report.server_cpu_us =
                (server.process.cpu_seconds()? - cpu) * 1e6 / report.requests.max(1) as f64;
            if server.name == "noe, every pod new" {
                hits_new += memo_hits(server.process).await? - hits;
            }
            server.reports.push(report);
        }
    }
    let hits_all = memo_hits(&noe).await? - hits_before;
    print(options, &body, &servers, hits_new, hits_all);
    Ok(())
}

/// `noe_admission_decision_memo_total{result="hit"}` (0 for a server without it).
async fn memo_hits(process: &Process) -> anyhow::Result<f64> {
    if process.metrics.is_none() {
        return Ok(0.0);
    }
    Ok(process
        .metric("noe_admission_decision_memo_total{result=\"hit\"}")
        .await
        .unwrap_or(0.0))
}

fn print(options: &Options, body: &str, servers: &[Server], hits_new: f64, hits_all: f64) {
    println!("## Warm path, every pod new");
    println!();
    println!(
        "wrk -t{} -c{} -d{}s --latency, POST of a {}-byte {} pod AdmissionReview (platforms cached), each request a pod with a label of its own (nothing can be remembered) but the rows \"the same pod\"; {} alternating rounds. The floors answer noe's own answer byte for byte: `parse` parses the body into a JSON value, `read` reads it and parses nothing (the uid cut out by a byte search and written into the answer).",
        options.threads,
        options.connections,
        options.duration.as_secs(),
        body.len(),
        if options.deployment_pod { "Deployment's (field-manager entries, env, probes, status)" } else { "minimal" },
        options.rounds,
    );
    println!();
    println!("| round | server | requests/s | p50 ms | p99 ms | errors | server CPU µs/request |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for round in 0..options.rounds as usize {
        for server in servers {
            if let Some(r) = server.reports.get(round) {
                println!(
                    "| {} | {} | {:.0} | {:.3} | {:.3} | {} | {:.1} |",
                    round + 1,
                    server.name,
                    r.requests_per_second,
                    r.p50_ms,
                    r.p99_ms,
                    r.errors,
                    r.server_cpu_us
                );
            }
        }
    }
    println!();
    println!("Ratios per round to each floor of the same round: median (least–greatest).");
    println!();
    println!("| server | vs floor | requests/s | p99 | server CPU per request |");
    println!("|---|---|---:|---:|---:|");
    let floors = servers.iter().filter(|s| s.name.starts_with("floor"));
    for floor in floors {
        for server in servers.iter().filter(|s| !s.name.starts_with("floor")) {
            let ratio = |f: fn(&Report) -> f64| {
                Spread::of(
                    server
                        .reports
                        .iter()
                        .zip(&floor.reports)
                        .map(|(ours, theirs)| f(ours) / f(theirs)),
                )
                .show(2)
            };
            println!(
                "| {} | {} | {} | {} | {} |",
                server.name,
                floor.name,
                ratio(|r| r.requests_per_second),
                ratio(|r| r.p99_ms),
                ratio(|r| r.server_cpu_us),
            );
        }
    }
    println!();
    println!("Decision memo hits: {hits_new} during the rounds of every pod new, {hits_all} in all (the same pod's).");
    println!();
}
