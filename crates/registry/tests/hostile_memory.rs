//! Memory after hostile lookups (docs/benchmarks.md, Fault matrix): indexes whose platform
//! carries a ~4 MB architecture string must not stay in memory. Its own test binary: RSS is per
//! process, and another test's allocations would blur it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use noe_registry::{Config, Resolver};
use noe_test_support::{Behavior, FakeRegistry};

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// Issue 10, defect 3: entries whose index carried a ~4 MB architecture string stayed in memory
/// (docs/benchmarks.md, Memory after 100 hostile lookups). Platform fields are validated, so
/// each lookup fails cleanly and keeps nothing of the string.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_hostile_lookups_leave_memory_where_it_was() {
    const LOOKUPS: u64 = 100;
    const STRING_LEN: usize = 4_000_000;
    let fake = FakeRegistry::start().await.unwrap();
    for i in 0..LOOKUPS {
        for tag in [1, 2] {
            fake.route(
                &format!("/v2/hostile/app{i}/manifests/{tag}"),
                Behavior::huge_platform_index("architecture", STRING_LEN, i * 2 + tag),
            );
        }
    }
    fake.route(
        "/v2/warm/app/manifests/1",
        Behavior::huge_platform_index("architecture", 8, 0),
    );
    let config = Config {
        insecure_registries: vec![fake.host()],
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    };
    let resolver = Resolver::new(config, &prometheus::Registry::new()).unwrap();
    // Warm up the client, its connection and the allocator's arenas with a small lookup.
    resolver
        .resolve(&format!("{}/warm/app:1", fake.host()), &[])
        .await
        .unwrap();
    // Two rounds: the first shows where memory settles (the allocator keeps some of the freed
    // 4 MiB buffers for reuse), the second that nothing accumulates per lookup.
    let start = rss_bytes();
    let mut after = [0u64; 2];
    for (round, after) in after.iter_mut().enumerate() {
        for i in 0..LOOKUPS {
            let error = resolver
                .resolve(
                    &format!("{}/hostile/app{i}:{}", fake.host(), round + 1),
                    &[],
                )
                .await
                .unwrap_err();
            assert_eq!(error.kind(), "invalid_content", "{error}");
            assert!(
                error.to_string().len() < 512,
                "{} bytes",
                error.to_string().len()
            );
        }
        *after = rss_bytes();
    }
    let mib = |bytes: u64| bytes as f64 / 1048576.0;
    println!(
        "{LOOKUPS} hostile lookups ({STRING_LEN}-byte architecture strings): RSS {:.1} MiB -> {:.1} MiB, {:.1} MiB after {} more",
        mib(start),
        mib(after[0]),
        mib(after[1]),
        LOOKUPS
    );
    assert_eq!(
        resolver.cache_entries(),
        1,
        "only the warm-up image is cached"
    );
    // The chart's limit is 256 MiB. What remains is the system allocator keeping freed buffers
    // for reuse, which moves from run to run (docs/benchmarks.md has the figures).
    let grown = after[0].saturating_sub(start);
    assert!(grown < 96 * 1024 * 1024, "RSS grew by {grown} bytes");
    let again = after[1].saturating_sub(after[0]);
    assert!(
        again < 32 * 1024 * 1024,
        "RSS grew by {again} more bytes in the second round"
    );
}
