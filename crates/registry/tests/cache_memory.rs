//! The memory target (docs/benchmarks.md, "Targets"): 100k cached images in under 64 MiB RSS. Its own test binary so the process
//! holds nothing else.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use noe_core::Platform;
use noe_registry::cache::{Answered, Loaded, PlatformCache, Scope};
use noe_registry::metrics::Metrics;
use noe_registry::{Config, Resolution};

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[tokio::test]
async fn hundred_thousand_cached_images_fit_in_64_mib() {
    let config = Config {
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    };
    let metrics = Metrics::new(&prometheus::Registry::new(), &config).unwrap();
    let cache = PlatformCache::new(&config, metrics);
    let before = rss_bytes();
    for i in 0..100_000u32 {
        let image = format!(
            "registry.example.com/team-{}/service-{i}:v1.{}.3",
            i % 97,
            i % 13
        );
        let scope = (i % 7 == 0).then(|| Scope::of(&(i % 5)));
        let resolution = Resolution {
            image: image.clone(),
            resolved: image.clone(),
            digest: format!("sha256:{:064x}", u128::from(i) * 0x9e37_79b9_7f4a_7c15),
            media_type: "application/vnd.oci.image.index.v1+json".into(),
            credential_source: (i % 3 == 0).then(|| "pull-secret:default/regcred".to_owned()),
            platforms: vec![
                Platform::new("linux", "amd64", None),
                Platform::new("linux", "arm64", None),
                Platform::new("linux", "arm", Some("v7")),
            ],
            answered_by: Answered::Get,
        };
        let entry = cache.compact(resolution, &image);
        cache
            .get_or_load(&image, scope, false, |_| async move {
                Ok(Loaded {
                    entry,
                    scoped: scope.is_some(),
                    answered: Answered::Get,
                    fresh_for: None,
                })
            })
            .await
            .unwrap();
    }
    // The bound is per shard, so a full cache holds slightly fewer than the flag's value.
    let entries = cache.entries();
    assert!((99_000..=100_000).contains(&entries), "{entries} entries");
    let grown = rss_bytes().saturating_sub(before);
    println!(
        "100k cached images: RSS grew by {:.1} MiB (total {:.1} MiB)",
        grown as f64 / 1048576.0,
        rss_bytes() as f64 / 1048576.0
    );
    assert!(grown < 64 * 1024 * 1024, "RSS grew by {grown} bytes");
}
