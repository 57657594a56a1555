//! The lookup endpoint's warm path: `noe --lookup-addr` answering Gatekeeper `ProviderRequest`s
//! of 1 and of 64 keys (every image cached) against the floor on the same TLS stack, driven by
//! wrk side by side (alternating rounds in one run), each server sent the same body; the floor
//! answers noe's own answer to it, read once, as a constant (the same bytes on the wire). wrk has no
//! client certificates, so callers present a Bearer token (the scripted API's TokenReview; the
//! verdict is cached, so the rounds measure the cache, as a steady Kyverno would).
//!
//! With `--unique-bodies`, 64 keys only: every request holds the same cached keys in an order
//! no other request of the run has (shuffled by wrk's Lua `request` function), so no answer can
//! be remembered by its body; beside the same body sent again (remembered), built by the same
//! function, and the floor sent the shuffled bodies, in the same rounds.

use anyhow::{bail, Context as _};
use noe_test_support::{KubeApi, Registry};

use crate::images::{references, tags, Children};
use crate::noe::{start_floor_answering, start_noe, Process, Tls};
use crate::wrk::{self, Report, Spread};
use crate::Options;

const AUDIENCE: &str = "noe-bench";
/// A projected service account token for [`AUDIENCE`] (its shape is checked before any
/// TokenReview), the same for the whole run.
fn token() -> &'static str {
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN.get_or_init(|| {
        noe_test_support::fresh_token("system:serviceaccount:kyverno:kyverno", &[AUDIENCE])
    })
}
const PATH: &str = "/gatekeeper/v1/platforms";

/// The wrk script POSTing `body` to the Gatekeeper route with the token (wrk.path overrides the
/// URL's `/mutate`; the floor answers any path).
fn script(dir: &std::path::Path, name: &str, body: &str) -> anyhow::Result<std::path::PathBuf> {
    if body.contains("]==]") {
        bail!("body cannot be embedded in a Lua long string");
    }
    let path = dir.join(format!("{name}.lua"));
    std::fs::write(
        &path,
        format!(
            "wrk.method = \"POST\"\nwrk.path = \"{PATH}\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.headers[\"Authorization\"] = \"Bearer {}\"\nwrk.body = [==[{body}]==]\n",
            token()
        ),
    )?;
    Ok(path)
}

fn provider_request(keys: &[String]) -> String {
    serde_json::json!({
        "apiVersion": "externaldata.gatekeeper.sh/v1beta1",
        "kind": "ProviderRequest",
        "request": {"keys": keys},
    })
    .to_string()
}

/// Asks the lookup endpoint once (warming the cache and the token verdict); every key must
/// come back with platforms. The answer's bytes, for the floor to send.
async fn warm_up(
    client: &reqwest::Client,
    lookup: &str,
    keys: &[String],
) -> anyhow::Result<bytes::Bytes> {
    let body = client
        .post(format!("{lookup}{PATH}"))
        .bearer_auth(token())
        .header("content-type", "application/json")
        .body(provider_request(keys))
        .send()
        .await?
        .error_for_status()?
        .bytes()
        .await?;
    let answer: serde_json::Value = serde_json::from_slice(&body)?;
    let items = answer["response"]["items"]
        .as_array()
        .context("no items in the ProviderResponse")?;
    if items.len() != keys.len() || items.iter().any(|item| item["value"].is_null()) {
        bail!("the warm-up lookup did not answer every key: {answer}");
    }
    Ok(body)
}

pub async fn run(options: &Options) -> anyhow::Result<()> {
    let registry = Registry::start().await?;
    let children = Children::push(&registry).await?;
    let tags = tags("lookup", 64);
    children.tag(&registry, 2, &tags).await?;
    let images = references(&registry.host(), &tags);
    let tls = Tls::new()?;
    let api = KubeApi::start().await?;
    api.accept_token(
        token(),
        "system:serviceaccount:kyverno:kyverno",
        &[AUDIENCE],
    );
    let kubeconfig = tls.dir.path().join("lookup-kubeconfig.yaml");
    std::fs::write(&kubeconfig, api.kubeconfig_yaml())?;
    let lookup_addr = crate::noe::free_addr()?;
    let noe = start_noe(
        &options.noe,
        &tls,
        &[
            format!("--insecure-registries={}", registry.host()),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--lookup-addr={lookup_addr}"),
            format!("--lookup-token-audience={AUDIENCE}"),
        ],
    )
    .await?;
    let client = tls.client()?;
    let lookup_url = format!("https://localhost:{}", lookup_addr.port());
    warm_up(&client, &lookup_url, &images).await?;

    println!("## Lookup endpoint (warm)");
    println!();
    println!(
        "wrk -t{} -c{} -d{}s --latency, POST of a Gatekeeper ProviderRequest to {PATH} with a Bearer token (TokenReview verdict cached), every image cached; the floor, on the same TLS stack, is sent the same body, parses it as JSON and answers a constant body: noe's own answer to that request, byte for byte (so both write as much, and the ratio measures noe's work, not the answer's size); {} alternating rounds.",
        options.threads,
        options.connections,
        options.duration.as_secs(),
        options.rounds
    );
    println!();
    let target = Lookup {
        addr: lookup_addr,
        process: &noe,
    };
    if options.unique_bodies {
        unique_bodies(options, &tls, &client, &lookup_url, &target, &images).await?;
    }
    for keys in [1usize, 64].into_iter().filter(|_| !options.unique_bodies) {
        let asked = images.get(..keys).unwrap_or_default();
        let body = provider_request(asked);
        let script = script(tls.dir.path(), &format!("lookup-{keys}"), &body)?;
        let answer = warm_up(&client, &lookup_url, asked).await?;
        let answer_file = tls.dir.path().join(format!("lookup-{keys}-answer.json"));
        std::fs::write(&answer_file, &answer)?;
        let floor = start_floor_answering(&tls, Some(&answer_file)).await?;
        let (floors, ours) = rounds(options, &floor, &target, &script).await?;
        table(keys, body.len(), answer.len(), &floors, &ours);
    }
    let reviews = api
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/tokenreviews"))
        .count();
    println!("TokenReviews during the run: {reviews} (verdicts are cached 60 s).");
    println!();
    Ok(())
}

/// 64 keys, every body new, beside the same body again and the floor, in the same rounds.
async fn unique_bodies(
    options: &Options,
    tls: &Tls,
    client: &reqwest::Client,
    lookup_url: &str,
    target: &Lookup<'_>,
    images: &[String],
) -> anyhow::Result<()> {
    let asked = images.get(..64).unwrap_or_default();
    let body = provider_request(asked);
    let answer = warm_up(client, lookup_url, asked).await?;
    let answer_file = tls.dir.path().join("lookup-unique-answer.json");
    std::fs::write(&answer_file, &answer)?;
    let floor = start_floor_answering(tls, Some(&answer_file)).await?;
    let keys = asked
        .iter()
        .map(serde_json::to_string)
        .collect::<Result<Vec<_>, _>>()?;
    let joined = keys.join(",");
    let Some((head, tail)) = body.split_once(&joined) else {
        bail!("the keys are not in the request's text");
    };
    let auth = format!("Bearer {}", token());
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", &auth),
    ];
    let script = |name: &str, shuffle: bool| {
        wrk::script_shuffled(
            tls.dir.path(),
            name,
            PATH,
            &headers,
            (head, &keys, tail),
            shuffle,
        )
    };
    let unique = script("lookup-unique", true)?;
    let same = script("lookup-same", false)?;
    let mut rows: [(&str, &Process, &std::path::Path, Vec<Report>); 3] = [
        ("floor", &floor, &unique, Vec::new()),
        (
            "noe lookup, every body new",
            target.process,
            &unique,
            Vec::new(),
        ),
        (
            "noe lookup, the same body",
            target.process,
            &same,
            Vec::new(),
        ),
    ];
    for _ in 0..options.rounds {
        for (name, process, script, out) in &mut rows {
            let addr = if process.addr == target.process.addr {
                target.addr
            } else {
                process.addr
            };
            let cpu = process.cpu_seconds()?;
            let mut report = wrk::run(
                addr,
                script,
                options.threads,
                options.connections,
                options.duration,
            )
            .await
            .context(*name)?;
            report.server_cpu_us =
                (process.cpu_seconds()? - cpu) * 1e6 / report.requests.max(1) as f64;
            out.push(report);
        }
    }
    println!(
        "### 64 keys, every body new ({}-byte request, {}-byte answer from both)",
        body.len(),
        answer.len()
    );
    println!();
    println!("| round | server | requests/s | p50 ms | p99 ms | errors | server CPU µs/request |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for round in 0..options.rounds as usize {
        for (name, _, _, reports) in &rows {
            if let Some(r) = reports.get(round) {
                println!(
                    "| {} | {name} | {:.0} | {:.3} | {:.3} | {} | {:.1} |",
                    round + 1,
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
    println!("Ratios per round to the floor of the same round: median (least–greatest).");
    println!();
    println!("| server | requests/s | p99 | server CPU per request |");
    println!("|---|---:|---:|---:|");
    let floors = &rows[0].3;
    for (name, _, _, reports) in rows.iter().skip(1) {
        let ratio = |f: fn(&Report) -> f64| {
            Spread::of(reports.iter().zip(floors).map(|(o, t)| f(o) / f(t))).show(2)
        };
        println!(
            "| {name} | {} | {} | {} |",
            ratio(|r| r.requests_per_second),
            ratio(|r| r.p99_ms),
            ratio(|r| r.server_cpu_us)
        );
    }
    println!();
    Ok(())
}

/// The lookup listener of a `noe` process.
struct Lookup<'a> {
    addr: std::net::SocketAddr,
    process: &'a Process,
}

async fn rounds(
    options: &Options,
    floor: &Process,
    lookup: &Lookup<'_>,
    script: &std::path::Path,
) -> anyhow::Result<(Vec<Report>, Vec<Report>)> {
    let mut floors = Vec::new();
    let mut ours = Vec::new();
    for _ in 0..options.rounds {
        for (addr, process, out, name) in [
            (floor.addr, floor, &mut floors, "floor"),
            (lookup.addr, lookup.process, &mut ours, "noe lookup"),
        ] {
            let cpu = process.cpu_seconds()?;
            let mut report = wrk::run(
                addr,
                script,
                options.threads,
                options.connections,
                options.duration,
            )
            .await
            .context(name)?;
            report.server_cpu_us =
                (process.cpu_seconds()? - cpu) * 1e6 / report.requests.max(1) as f64;
            out.push(report);
        }
    }
    Ok((floors, ours))
}

fn table(keys: usize, bytes: usize, answer: usize, floors: &[Report], ours: &[Report]) {
    println!("### {keys} key(s) ({bytes}-byte request, {answer}-byte answer from both)");
    println!();
    println!("| round | server | requests/s | p50 ms | p99 ms | errors | server CPU µs/request |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for (round, (f, o)) in floors.iter().zip(ours).enumerate() {
        for (name, r) in [("floor", f), ("noe lookup", o)] {
            println!(
                "| {} | {name} | {:.0} | {:.3} | {:.3} | {} | {:.1} |",
                round + 1,
                r.requests_per_second,
                r.p50_ms,
                r.p99_ms,
                r.errors,
                r.server_cpu_us
            );
        }
    }
    let (f, o) = (mean(floors), mean(ours));
    println!();
    println!("| | floor | noe lookup | noe/floor | target |");
    println!("|---|---:|---:|---:|---|");
    println!(
        "| requests/s (mean) | {:.0} | {:.0} | {:.2} | ≥ 0.90 |",
        f.requests_per_second,
        o.requests_per_second,
        o.requests_per_second / f.requests_per_second
    );
    println!(
        "| p99 ms (mean) | {:.3} | {:.3} | {:.2} | ≤ 1.20 |",
        f.p99_ms,
        o.p99_ms,
        o.p99_ms / f.p99_ms
    );
    println!(
        "| server CPU µs per request (mean) | {:.1} | {:.1} | {:.2} | |",
        f.server_cpu_us,
        o.server_cpu_us,
        o.server_cpu_us / f.server_cpu_us
    );
    println!();
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
