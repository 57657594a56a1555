//! Counted pulls over a simulated day: admissions of a fixed image set with `--cache-ttl 1h`,
//! the hour scaled down to `--hour` of real time, one tag moved at noon. Docker Hub counts a
//! manifest GET as a pull and a HEAD as none: counted in the real registry's access log, per
//! binary (`--baseline`, e.g. a build without HEAD revalidation, runs the same day after it).

use std::time::{Duration, Instant};

use anyhow::bail;

use crate::images::{references, tags, Children, Counted};
use crate::noe::{admit, start_noe, Tls};
use crate::Options;
use noe_test_support::{pod_review, Registry};

/// Images admitted every hour (each an index).
const IMAGES: usize = 5;

pub async fn run(options: &Options) -> anyhow::Result<()> {
    let hours = options.hours.max(2);
    let hour = options.hour;
    println!("## Counted pulls over a simulated day");
    println!();
    println!(
        "{IMAGES} images (OCI indexes), {} admissions of a pod holding all of them every hour for {hours} hours; `--cache-ttl` is one hour, scaled to {} ms of real time; at hour {} one tag is moved to another index. Requests counted in the real registry's access log (manifest GETs are what Docker Hub counts as pulls).",
        options.per_hour,
        hour.as_millis(),
        hours / 2
    );
    println!();
    println!("| binary | admissions | manifest GETs (counted pulls) | manifest HEADs | other requests | all patched | target |");
    println!("|---|---:|---:|---:|---:|---|---|");
    let mut binaries = vec![("noe", options.noe.clone())];
    if let Some(baseline) = &options.baseline {
        binaries.push(("baseline", baseline.clone()));
    }
    for (name, binary) in binaries {
        let registry = Registry::start().await?;
        let children = Children::push(&registry).await?;
        let names = tags("day", IMAGES);
        children.tag(&registry, 2, &names).await?;
        let images = references(&registry.host(), &names);
        let tls = Tls::new()?;
        let client = tls.client()?;
        let noe = start_noe(
            &binary,
            &tls,
            &[
                format!("--insecure-registries={}", registry.host()),
                format!("--cache-ttl={}ms", hour.as_millis()),
            ],
        )
        .await?;
        registry.reset_requests();
        let mut admissions = 0usize;
        let mut patched = 0usize;
        for h in 0..hours {
            let started = Instant::now();
            if h == hours / 2 {
                // Noon: the first tag moves to an index with one more platform.
                children.tag(&registry, 3, &names[..1]).await?;
            }
            for a in 0..options.per_hour {
                let review = pod_review(&format!("day-{h}-{a}"), &images);
                let answer = admit(&client, noe.addr, &review).await?;
                admissions += 1;
                if answer["response"]["patch"].is_string() {
                    patched += 1;
                }
            }
            // The rest of the hour: every entry expires before the next one.
            let left = (hour + Duration::from_millis(20)).saturating_sub(started.elapsed());
            tokio::time::sleep(left).await;
        }
        let counted = Counted::of(&registry);
        if patched != admissions {
            bail!("{name}: {patched} of {admissions} admissions patched");
        }
        println!(
            "| {name} (`{}`) | {admissions} | {} | {} | {} | yes | one GET per image per digest change ({}) |",
            binary.display(),
            counted.manifest_gets,
            counted.manifest_heads,
            counted.other,
            IMAGES + 1
        );
    }
    println!();
    Ok(())
}
