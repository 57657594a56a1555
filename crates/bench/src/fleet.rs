//! A fleet: the same admissions spread over 3 `noe` processes, without and with a shared cache
//! (a real `redis-server` on loopback), against one process alone; then the shared cache is
//! killed half-way through a run and every admission must still be answered within the
//! deadline, the metrics showing the fall-through. Registry requests are counted in the real
//! registry's access log.

use std::time::{Duration, Instant};

use crate::images::{references, tags, Children, Counted};
use crate::noe::{admit, start_noe, Process, Tls};
use crate::Options;
use noe_test_support::{pod_review, RedisServer, Registry};

/// Distinct images (OCI indexes) admitted.
const IMAGES: usize = 30;
/// Rounds: every image is admitted once per round, on replica `(image + round) % replicas`.
const ROUNDS: usize = 6;
/// The admission deadline `noe` runs with (its default).
const DEADLINE: Duration = Duration::from_secs(8);

struct Run {
    requests: Counted,
    admissions: usize,
    patched: usize,
    slowest: Duration,
    /// `noe_registry_shared_cache_{reads,writes}_total` by result, summed over the replicas.
    shared: Vec<(String, f64)>,
}

pub async fn run(options: &Options) -> anyhow::Result<()> {
    let registry = Registry::start().await?;
    let children = Children::push(&registry).await?;
    let tls = Tls::new()?;
    let key = tls.dir.path().join("hmac-key");
    std::fs::write(&key, "noe-bench fleet install key, 32B")?;
    println!("## Fleet: replicas sharing a cache");
    println!();
    println!(
        "{IMAGES} distinct images (OCI indexes), each admitted once per round for {ROUNDS} rounds (a pod per image), round-robin over the replicas; registry requests counted in the real registry's access log; `--shared-cache-timeout={}`.",
        options.shared_cache_timeout
    );
    println!();
    println!("| replicas | shared cache | admissions | patched | registry requests | manifest GETs | manifest HEADs | slowest admission ms | shared cache reads / writes |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---|");
    let cases: [(usize, bool, bool, &str); 4] = [
        (1, false, false, "one"),
        (3, false, false, "three"),
        (3, true, false, "shared"),
        (3, true, true, "killed"),
    ];
    for (replicas, shared, kill, prefix) in cases {
        let names = tags(prefix, IMAGES);
        children.tag(&registry, 2, &names).await?;
        let images = references(&registry.host(), &names);
        // After the kill, new images: what the replicas had cached in-process is no test.
        let after_kill = tags(&format!("{prefix}-after"), IMAGES);
        children.tag(&registry, 2, &after_kill).await?;
        let after_kill = references(&registry.host(), &after_kill);
        let mut redis = if shared {
            Some(RedisServer::start()?)
        } else {
            None
        };
        let mut flags = vec![format!("--insecure-registries={}", registry.host())];
        if let Some(redis) = &redis {
            flags.push(format!("--shared-cache={}", redis.url()));
            flags.push(format!("--shared-cache-key-file={}", key.display()));
            flags.push(format!(
                "--shared-cache-timeout={}",
                options.shared_cache_timeout
            ));
        }
        let mut fleet = Vec::new();
        for _ in 0..replicas {
            fleet.push(start_noe(&options.noe, &tls, &flags).await?);
        }
        registry.reset_requests();
        let mut run = admit_rounds(&tls, &fleet, |round| {
            if kill && round >= ROUNDS / 2 {
                if round == ROUNDS / 2 {
                    if let Some(redis) = redis.as_mut() {
                        redis.kill();
                    }
                }
                &after_kill
            } else {
                &images
            }
        })
        .await?;
        run.requests = Counted::of(&registry);
        let shared_counts = if shared {
            run.shared
                .iter()
                .map(|(result, n)| format!("{result} {n:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        } else {
            "—".to_owned()
        };
        let label = match (shared, kill) {
            (false, _) => "no".to_owned(),
            (true, false) => "yes".to_owned(),
            (true, true) => format!(
                "killed after round {}, then {IMAGES} new images",
                ROUNDS / 2
            ),
        };
        println!(
            "| {replicas} | {label} | {} | {} | {} | {} | {} | {:.1} | {shared_counts} |",
            run.admissions,
            run.patched,
            run.requests.total(),
            run.requests.manifest_gets,
            run.requests.manifest_heads,
            run.slowest.as_secs_f64() * 1000.0,
        );
        if run.slowest >= DEADLINE {
            println!("(an admission took longer than the {DEADLINE:?} deadline)");
        }
    }
    println!();
    Ok(())
}

/// Admits `images_of(round)` round after round; `images_of` may act before a round (kill Redis).
async fn admit_rounds<'a>(
    tls: &Tls,
    fleet: &[Process],
    mut images_of: impl FnMut(usize) -> &'a Vec<String>,
) -> anyhow::Result<Run> {
    let client = tls.client()?;
    let mut run = Run {
        requests: Counted::default(),
        admissions: 0,
        patched: 0,
        slowest: Duration::ZERO,
        shared: Vec::new(),
    };
    for round in 0..ROUNDS {
        let images = images_of(round);
        for (i, image) in images.iter().enumerate() {
            let replica = &fleet[(i + round) % fleet.len()];
            let review = pod_review(&format!("fleet-{round}-{i}"), std::slice::from_ref(image));
            let started = Instant::now();
            let answer = admit(&client, replica.addr, &review).await?;
            run.slowest = run.slowest.max(started.elapsed());
            run.admissions += 1;
            if answer["response"]["patch"].is_string() {
                run.patched += 1;
            }
        }
    }
    for (metric, results) in [
        (
            "noe_registry_shared_cache_reads_total",
            &["hit", "miss", "error", "bypassed"][..],
        ),
        (
            "noe_registry_shared_cache_writes_total",
            &["ok", "error", "bypassed", "dropped"][..],
        ),
    ] {
        let kind = if metric.contains("reads") {
            "read"
        } else {
            "write"
        };
        for result in results {
            let mut sum = 0.0;
            for replica in fleet {
                sum += replica
                    .metric(&format!("{metric}{{result=\"{result}\"}}"))
                    .await
                    .unwrap_or(0.0);
            }
            if sum > 0.0 {
                run.shared.push((format!("{kind} {result}"), sum));
            }
        }
    }
    Ok(run)
}
