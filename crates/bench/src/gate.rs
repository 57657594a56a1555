//! `noe-bench gate`: the lookup modes side by side in one run (docs/benchmarks.md, "Gate and
//! hybrid modes"). The real registry (behind a delaying proxy where a slow registry is wanted),
//! the scripted Kubernetes API of noe-test-support (behind a delaying proxy adding the API's
//! round trip), and `noe` processes in `inline`, `gate` and `hybrid` mode:
//!
//! 1. admission latency: gate mode against a registry 2 s away (every pod a new image)
//!    alternating with inline admissions of a warm image;
//! 2. creation → release: each gated pod stored in the scripted API (5 ms round trip), timed
//!    until the API receives the write that removes its gate, split into noe's parts
//!    (`noe_gate_stage_seconds`: lookup, queue, write), beside inline cold admissions of the
//!    same kind of image (the lookup time);
//! 3. hybrid on warm images: the API writes counted (there should be none);
//! 4. a storm of pods over fewer cold images: index GETs in the registry's log, release writes
//!    per pod, pods left gated, resident memory above idle.
//!
//! Counting parts (3, 4) are counts, not timings: a debug build checks them.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use base64::Engine as _;
use futures::StreamExt as _;
use noe_test_support::{pod_review, DelayProxy, KubeApi, Registry, Resource, NOE_GATE};
use serde_json::{json, Value};

use crate::images::{references, tags, Children, Counted};
use crate::noe::{admit, start_noe, Process, Tls};
use crate::Options;

/// The slow registry's round trip.
const SLOW_REGISTRY: Duration = Duration::from_secs(2);
/// The scripted API's round trip.
const API_RTT: Duration = Duration::from_millis(5);
/// Pods per timed part.
const PODS: usize = 200;
/// The storm: pods, and the images they share.
const STORM_PODS: usize = 2000;
const STORM_IMAGES: usize = 200;
/// Admissions in flight during the storm.
const STORM_CONCURRENCY: usize = 32;
/// How long the storm may take to drain at most.
const STORM_DEADLINE: Duration = Duration::from_secs(300);

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Median and p99 (nearest rank) in milliseconds.
pub fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| {
        let rank = ((samples.len() as f64) * q).ceil() as usize;
        samples
            .get(rank.saturating_sub(1).min(samples.len().saturating_sub(1)))
            .copied()
            .map_or(0.0, ms)
    };
    (at(0.5), at(0.99))
}

/// The pod of `review` as the apiserver stores it after our admission: the patch applied,
/// named, `Pending`, created now.
fn stored(review: &Value, answer: &Value, name: &str) -> anyhow::Result<Value> {
    let mut pod = review["request"]["object"].clone();
    if let Some(encoded) = answer["response"]["patch"].as_str() {
        let bytes = base64::engine::general_purpose::STANDARD.decode(encoded)?;
        let ops: json_patch::Patch = serde_json::from_slice(&bytes)?;
        json_patch::patch(&mut pod, &ops)?;
    }
    pod["metadata"]["name"] = json!(name);
    pod["metadata"]["namespace"] = json!("bench");
    pod["metadata"]["uid"] = json!(format!("uid-{name}"));
    pod["metadata"]["creationTimestamp"] = json!(k8s_now());
    pod["status"] = json!({"phase": "Pending"});
    Ok(pod)
}

fn k8s_now() -> String {
    // RFC 3339 in UTC, seconds (what the apiserver writes).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let (days, rest) = (now / 86_400, now % 86_400);
    let (h, m, s) = (rest / 3600, rest % 3600 / 60, rest % 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{d:02}T{h:02}:{m:02}:{s:02}Z")
}

fn is_gated(answer: &Value) -> bool {
    answer["response"]["patch"].as_str().is_some_and(|encoded| {
        base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            // (our gate's name is also the platforms annotation's: look for the gates' path)
            .is_some_and(|text| text.contains("/spec/schedulingGates"))
    })
}

fn gated_left(api: &KubeApi, names: &[String]) -> usize {
    names
        .iter()
        .filter(|name| {
            api.get(Resource::Pods, "bench", name).is_some_and(|pod| {
                pod["spec"]["schedulingGates"]
                    .as_array()
                    .is_some_and(|gates| gates.iter().any(|g| g["name"] == NOE_GATE))
            })
        })
        .count()
}

/// When the scripted API received the write that removed `name`'s gate (exact, from its
/// request log; `now` if the log lagged behind).
async fn release_received(
    api: &KubeApi,
    requests: &mut tokio::sync::broadcast::Receiver<noe_test_support::RecordedRequest>,
    name: &str,
    started: Instant,
) -> anyhow::Result<Instant> {
    let deadline = started + Duration::from_secs(60);
    let path = format!("/pods/{name}");
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(remaining, requests.recv()).await {
            Err(_) => bail!("{name} still gated after 60 s"),
            Ok(Ok(request)) => {
                let ours = request.method == "PATCH" && request.path.ends_with(&path);
                if ours && request.status == 200 && gated_left(api, &[name.to_owned()]) == 0 {
                    return Ok(request.received);
                }
            }
            Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => {
                if gated_left(api, &[name.to_owned()]) == 0 {
                    return Ok(Instant::now());
                }
            }
            Ok(Err(tokio::sync::broadcast::error::RecvError::Closed)) => {
                bail!("the scripted API's request log closed")
            }
        }
    }
}

/// The sums and counts of noe's `noe_gate_stage_seconds{stage}` (lookup, queue, write).
#[derive(Clone, Copy, Debug, Default)]
struct Stages {
    sums: [f64; 3],
    counts: [f64; 3],
}

const STAGES: [&str; 3] = ["lookup", "queue", "write"];

impl Stages {
    async fn read(noe: &Process) -> anyhow::Result<Self> {
        let addr = noe.metrics.context("no metrics address")?;
        let text = reqwest::get(format!("http://{addr}/metrics"))
            .await?
            .text()
            .await?;
        let mut stages = Self::default();
        for (i, stage) in STAGES.iter().enumerate() {
            let value = |suffix: &str| -> f64 {
                let prefix = format!("noe_gate_stage_seconds_{suffix}{{stage=\"{stage}\"}} ");
                text.lines()
                    .find_map(|line| line.strip_prefix(&prefix))
                    .and_then(|value| value.trim().parse().ok())
                    .unwrap_or(0.0)
            };
            stages.sums[i] = value("sum");
            stages.counts[i] = value("count");
        }
        Ok(stages)
    }

    /// The next reading with one more write observed (at most 2 s of polling). Called when
    /// the API has received the write: its answer is half a round trip away, so the first
    /// reading waits that long (each reading makes noe render its metrics while the answer
    /// is on its way, which would slow the `write` it measures).
    async fn next(&self, noe: &Process) -> anyhow::Result<Self> {
        tokio::time::sleep(API_RTT).await;
        for _ in 0..1000 {
            let now = Self::read(noe).await?;
            if now.counts[2] > self.counts[2] {
                return Ok(now);
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        bail!("noe never counted its release write")
    }
}

/// One release, its total and noe's parts of it.
#[derive(Clone, Copy, Debug)]
struct Parts {
    total: Duration,
    lookup: Duration,
    queue: Duration,
    write: Duration,
}

impl Parts {
    fn of(total: Duration, before: &Stages, after: &Stages) -> Self {
        let part = |i: usize| {
            let seconds = after.sums[i] - before.sums[i];
            Duration::try_from_secs_f64(seconds.max(0.0)).unwrap_or_default()
        };
        Self {
            total,
            lookup: part(0),
            queue: part(1),
            write: part(2),
        }
    }

    fn beyond_lookup(&self) -> Duration {
        self.total.saturating_sub(self.lookup)
    }
}

/// A kubeconfig for `noe` reaching the scripted API at `host` (a proxy, or the API itself).
fn kubeconfig(dir: &Path, api: &KubeApi, host: &str, name: &str) -> anyhow::Result<String> {
    let yaml = api
        .kubeconfig_yaml()
        .replace(&api.url(), &format!("http://{host}"));
    let path = dir.join(name);
    std::fs::write(&path, yaml)?;
    Ok(format!("--kubeconfig={}", path.display()))
}

async fn noe(options: &Options, tls: &Tls, flags: &[String]) -> anyhow::Result<Process> {
    start_noe(&options.noe, tls, flags).await
}

pub async fn run(options: &Options) -> anyhow::Result<()> {
    let registry = Registry::start().await?;
    let children = Children::push(&registry).await?;
    let slow = DelayProxy::start(registry.addr(), SLOW_REGISTRY).await?;
    let api = KubeApi::start().await?;
    let api_addr = api
        .url()
        .trim_start_matches("http://")
        .parse()
        .context("the scripted API's address")?;
    let api_proxy = DelayProxy::start(api_addr, API_RTT).await?;
    let tls = Tls::new()?;
    let client = tls.client()?;
    let base = vec![
        format!("--insecure-registries={},{}", registry.host(), slow.host()),
        "--registry-qps=0".to_owned(),
        "--log-level=warn".to_owned(),
    ];
    let with = |extra: &[String]| -> Vec<String> { [base.clone(), extra.to_vec()].concat() };
    let far_api = kubeconfig(tls.dir.path(), &api, &api_proxy.host(), "far")?;
    let near_api = kubeconfig(tls.dir.path(), &api, &api_addr.to_string(), "near")?;
    let inline = noe(options, &tls, &base).await?;
    let gate = noe(
        options,
        &tls,
        &with(&["--lookup-mode=gate".into(), far_api]),
    )
    .await?;

    // 1. Admission latency.
    let warm = tags("gate-warm", 1);
    children.tag(&registry, 2, &warm).await?;
    let warm_review = pod_review("warm", &references(&registry.host(), &warm));
    admit(&client, inline.addr, &warm_review).await?;
    let cold = tags("gate-cold", PODS);
    children.tag(&registry, 2, &cold).await?;
    let cold_images = references(&slow.host(), &cold);
    let (mut inline_warm, mut gated) = (Vec::new(), Vec::new());
    for (i, image) in cold_images.iter().enumerate() {
        let started = Instant::now();
        admit(&client, inline.addr, &warm_review).await?;
        inline_warm.push(started.elapsed());
        let review = pod_review(&format!("cold-{i}"), std::slice::from_ref(image));
        let started = Instant::now();
        let answer = admit(&client, gate.addr, &review).await?;
        gated.push(started.elapsed());
        if !is_gated(&answer) {
            bail!("gate mode did not gate: {answer}");
        }
    }
    let (warm_p50, warm_p99) = percentiles(inline_warm);
    let (gate_p50, gate_p99) = percentiles(gated);
    println!("## Gate and hybrid modes");
    println!();
    println!("The real registry, directly or behind a proxy adding {} s; the scripted Kubernetes API behind a proxy adding {} ms; `noe` processes in inline, gate and hybrid mode on the same cores. {PODS} pods per timed row, one at a time.", SLOW_REGISTRY.as_secs(), API_RTT.as_millis());
    println!();
    println!("| admission | pods | p50 ms | p99 ms | p99 / warm inline p99 |");
    println!("|---|---:|---:|---:|---:|");
    println!("| inline, warm image | {PODS} | {warm_p50:.2} | {warm_p99:.2} | 1.00 |");
    println!(
        "| gate, new image on a registry {} s away | {PODS} | {gate_p50:.2} | {gate_p99:.2} | {:.2} |",
        SLOW_REGISTRY.as_secs(),
        gate_p99 / warm_p99.max(f64::MIN_POSITIVE)
    );
    println!();

    // 2. Creation → release, beside the lookup time (inline cold admissions).
    let lookups = tags("gate-lookup", PODS);
    children.tag(&registry, 2, &lookups).await?;
    let mut lookup = Vec::new();
    for (i, image) in references(&registry.host(), &lookups).iter().enumerate() {
        let review = pod_review(&format!("lookup-{i}"), std::slice::from_ref(image));
        let started = Instant::now();
        admit(&client, inline.addr, &review).await?;
        lookup.push(started.elapsed());
    }
    // The API's round trip as it is (the proxy's hold and the scripted API's answer): a pod
    // read through the proxy on one kept-alive connection, what the figures are measured in.
    let probe = pod_review("rtt-probe", &references(&registry.host(), &warm));
    let mut probe_pod = probe["request"]["object"].clone();
    probe_pod["metadata"]["name"] = json!("rtt-probe");
    probe_pod["metadata"]["namespace"] = json!("bench");
    api.put_pod(probe_pod);
    let http = reqwest::Client::new();
    let probe_url = format!(
        "http://{}/api/v1/namespaces/bench/pods/rtt-probe",
        api_proxy.host()
    );
    let mut round_trips = Vec::new();
    for _ in 0..PODS {
        let started = Instant::now();
        http.get(&probe_url).send().await?.bytes().await?;
        round_trips.push(started.elapsed());
    }
    let released = tags("gate-release", PODS);
    children.tag(&registry, 2, &released).await?;
    let mut requests = api.subscribe_requests();
    let mut stages = Stages::read(&gate).await?;
    let mut release = Vec::new();
    for (i, image) in references(&registry.host(), &released).iter().enumerate() {
        let name = format!("release-{i}");
        let review = pod_review(&name, std::slice::from_ref(image));
        let answer = admit(&client, gate.addr, &review).await?;
        let pod = stored(&review, &answer, &name)?;
        let started = Instant::now();
        api.put_pod(pod);
        let written = release_received(&api, &mut requests, &name, started).await?;
        let total = written.saturating_duration_since(started);
        // noe observes its write when the answer is back: wait for it.
        let after = stages.next(&gate).await?;
        release.push(Parts::of(total, &stages, &after));
        stages = after;
    }
    let (lookup_p50, lookup_p99) = percentiles(lookup);
    let rtt = ms(API_RTT);
    println!("| creation → release, per pod | pods | median ms | p99 ms | median / p99 in API round trips |");
    println!("|---|---:|---:|---:|---:|");
    let row = |what: &str, samples: Vec<Duration>| {
        let (p50, p99) = percentiles(samples);
        println!(
            "| {what} | {PODS} | {p50:.2} | {p99:.2} | {:.2} / {:.2} |",
            p50 / rtt,
            p99 / rtt
        );
    };
    row(
        "the API's round trip as measured (a pod GET through the proxy), for reference",
        round_trips,
    );
    row(
        "gated pod stored → release write received (**total**)",
        release.iter().map(|p| p.total).collect(),
    );
    row(
        "noe: lookup (what the admission's early lookup left to wait, and the decision)",
        release.iter().map(|p| p.lookup).collect(),
    );
    row(
        "noe: queue (watch event → worker)",
        release.iter().map(|p| p.queue).collect(),
    );
    row(
        "noe: write (the release's round trip, answer included)",
        release.iter().map(|p| p.write).collect(),
    );
    row(
        "total − noe's lookup (**target ≤ 2 round trips**)",
        release.iter().map(Parts::beyond_lookup).collect(),
    );
    row(
        "total − noe's lookup − queue (the watch event's and the write's ways)",
        release
            .iter()
            .map(|p| p.beyond_lookup().saturating_sub(p.queue))
            .collect(),
    );
    println!(
        "| lookup of a new image (inline cold admission, same registry), for comparison | {PODS} | {lookup_p50:.2} | {lookup_p99:.2} | |"
    );
    println!();
    let mut slowest = release.clone();
    slowest.sort_by_key(|p| std::cmp::Reverse(p.total));
    let slowest: Vec<String> = slowest
        .iter()
        .take(3)
        .map(|p| {
            format!(
                "{:.1} ms (lookup {:.1}, queue {:.1}, write {:.1})",
                ms(p.total),
                ms(p.lookup),
                ms(p.queue),
                ms(p.write)
            )
        })
        .collect();
    println!("The three slowest releases: {}.", slowest.join("; "));
    println!();
    drop(gate);
    drop(inline);

    // 3. Hybrid on warm images: no API write.
    let hybrid = noe(
        options,
        &tls,
        &with(&["--lookup-mode=hybrid".into(), near_api.clone()]),
    )
    .await?;
    let warm_review = pod_review("hybrid-warm", &references(&registry.host(), &warm));
    let mut ready = false;
    for _ in 0..200 {
        if !is_gated(&admit(&client, hybrid.addr, &warm_review).await?) {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if !ready {
        bail!("hybrid: the warm image never answered inline");
    }
    let writes = api.writes().len();
    let mut hybrid_gated = 0;
    for i in 0..PODS {
        let review = pod_review(&format!("hybrid-{i}"), &references(&registry.host(), &warm));
        if is_gated(&admit(&client, hybrid.addr, &review).await?) {
            hybrid_gated += 1;
        }
    }
    let hybrid_writes = api.writes().len().saturating_sub(writes);
    drop(hybrid);

    // 4. The storm.
    let storm = noe(
        options,
        &tls,
        &with(&["--lookup-mode=gate".into(), near_api]),
    )
    .await?;
    let images = references(&registry.host(), &tags("gate-storm", STORM_IMAGES));
    children
        .tag(&registry, 2, &tags("gate-storm", STORM_IMAGES))
        .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (idle_kib, _) = storm.rss_kib()?;
    registry.reset_requests();
    api.reset_requests();
    let names: Vec<String> = (0..STORM_PODS).map(|i| format!("storm-{i:04}")).collect();
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(names.iter().enumerate())
        .map(|(i, name)| {
            let (client, api, addr) = (&client, &api, storm.addr);
            let image = images.get(i % STORM_IMAGES).cloned().unwrap_or_default();
            async move {
                let review = pod_review(name, &[image]);
                let answer = admit(client, addr, &review).await?;
                api.put_pod(stored(&review, &answer, name)?);
                Ok(())
            }
        })
        .buffer_unordered(STORM_CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    let started = Instant::now();
    let mut left = gated_left(&api, &names);
    while left > 0 && started.elapsed() < STORM_DEADLINE {
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = gated_left(&api, &names);
    }
    let (_, peak_kib) = storm.rss_kib()?;
    let counted = Counted::of(&registry);
    let releases = api
        .writes()
        .iter()
        .filter(|w| w.method == "PATCH" && w.path.contains("/pods/"))
        .count();
    println!("| counted | result |");
    println!("|---|---:|");
    println!("| hybrid, {PODS} pods of a warm image: API writes | {hybrid_writes} |");
    println!("| hybrid, {PODS} pods of a warm image: gated | {hybrid_gated} |");
    println!(
        "| storm, {STORM_PODS} pods over {STORM_IMAGES} cold images: manifest GETs (index) | {} |",
        counted.manifest_gets
    );
    println!(
        "| storm: manifest HEADs, other registry requests | {}, {} |",
        counted.manifest_heads, counted.other
    );
    println!(
        "| storm: pod PATCHes per pod | {:.2} |",
        releases as f64 / STORM_PODS as f64
    );
    println!("| storm: pods left gated | {left} |");
    println!(
        "| storm: peak RSS above idle (MiB) | {:.1} |",
        (peak_kib.saturating_sub(idle_kib)) as f64 / 1024.0
    );
    println!();
    Ok(())
}
