//! One huge `NodeFeature` (a million flags and a million attributes, about 38 MB of JSON) listed
//! by the `NodeFeature` reflector from the scripted API server: bounded while it is
//! deserialized (the features past the bounds are named as truncated), never a JSON tree of the
//! whole `spec.features` (which peaked at 2.26 GB). The growth of the process's peak resident
//! memory is checked (the test is alone in its binary; debug build, for direction:
//! `cargo test -p noe-controller --test node_feature_memory -- --nocapture` prints it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use noe_test_support::node_feature_json;
use serde_json::Value;

/// This process's peak resident memory, bytes (`VmHWM`).
fn peak() -> isize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: isize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

#[test]
fn one_huge_node_feature_is_bounded_while_it_is_read() {
    use noe_controller::{Config, Controllers, Deps, Metrics};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let api = noe_test_support::KubeApi::start().await.unwrap();
        // A million flags of one feature, and a million attributes of another.
        let mut json = String::from("{\"flags\":{\"cpu.cpuid\":{\"elements\":{");
        for i in 0..1_000_000 {
            json.push_str(&format!(
                "{}\"FLAG_{i:07}\":{{}}",
                if i == 0 { "" } else { "," }
            ));
        }
        json.push_str("}}},\"attributes\":{\"kernel.config\":{\"elements\":{");
        for i in 0..1_000_000 {
            json.push_str(&format!(
                "{}\"CONFIG_{i:07}\":\"y\"",
                if i == 0 { "" } else { "," }
            ));
        }
        json.push_str("}},\"kernel.version\":{\"elements\":{\"major\":\"6\"}}}}");
        let features: Value = serde_json::from_str(&json).unwrap();
        drop(json);
        api.put_node_feature(node_feature_json("huge", features));
        let registry = prometheus::Registry::new();
        let mut running = Controllers::start(
            api.client().unwrap(),
            Config::default(),
            Deps::default(),
            Metrics::new(&registry, 10).unwrap(),
        )
        .unwrap();
        let before = peak();
        let view = running.start_node_features();
        for _ in 0..3000 {
            if view.is_ready() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(view.is_ready(), "listed");
        let grown = peak() - before;
        let huge = view.features("huge").unwrap();
        assert!(huge.is_truncated("cpu.cpuid") && huge.is_truncated("kernel.config"));
        assert_eq!(
            huge.get("kernel.version").unwrap().attribute("major"),
            Some("6")
        );
        println!(
            "one NodeFeature of 2,000,000 elements: peak +{} MiB",
            grown >> 20
        );
        // The list's bytes pass through the scripted server and the client (about 80 MB each
        // way); a JSON tree of the features was 2.26 GB.
        assert!(grown < 512 << 20, "peak grew by {} MiB", grown >> 20);
        running.shutdown().await;
    });
}
