//! Start-to-ready: from spawning `noe` to `/readyz` answering 200 (TLS loaded, serving).

use std::time::Duration;

use crate::noe::{start_noe, Tls};
use crate::Options;

pub async fn run(options: &Options) -> anyhow::Result<()> {
    let tls = Tls::new()?;
    let mut samples = Vec::new();
    for _ in 0..options.starts.max(1) {
        let noe = start_noe(&options.noe, &tls, &[]).await?;
        samples.push(noe.ready_after);
        drop(noe);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    samples.sort();
    let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
    let median = samples[samples.len() / 2];
    let (min, max) = (samples[0], samples[samples.len() - 1]);
    println!("## Start to ready");
    println!();
    println!(
        "`noe --cert-dir=...` spawned {} times; time until `/readyz` answers 200 (polled every 0.5 ms).",
        samples.len()
    );
    println!();
    println!("| min ms | median ms | max ms | target |");
    println!("|---:|---:|---:|---|");
    println!(
        "| {:.1} | {:.1} | {:.1} | < 100 ms |",
        ms(&min),
        ms(&median),
        ms(&max)
    );
    println!();
    Ok(())
}
