//! What the node reflector's records hold in memory at 5,000 nodes: a `NodeRecord` with the
//! labels image selection reads (a node labelled by nfd-worker), and a `NodeFeatureRecord`
//! (`--watch-node-features`) of a typical x86 node. The growth of the process's resident memory
//! while 5,000 records are built and kept (the test is alone in its binary); the bounds fail the
//! test when a record grows past them. Debug build, system allocator: figures for direction only
//! (`cargo test -p noe-controller --test node_memory -- --nocapture` prints them).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use noe_controller::objects::{NodeFeatureRecord, NodeRecord};
use noe_test_support::{node_feature_json, node_json};
use serde_json::{json, Value};

/// This process's resident memory, bytes (`VmRSS` of `/proc/self/status`).
fn rss() -> isize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: isize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

/// The cluster size the figures are for.
const NODES: usize = 5_000;
/// Records built and measured (the figures are scaled to [`NODES`]; a debug build is slow).
const SAMPLE: usize = 500;

/// A node as nfd-worker labels a typical x86 node (about 60 labels beside the kubelet's).
fn labelled_node(i: usize) -> Value {
    let name = format!("ip-10-0-{}-{}.eu-west-1.compute.internal", i / 256, i % 256);
    let mut node = node_json(&name, "amd64", "linux");
    let labels = node["metadata"]["labels"].as_object_mut().unwrap();
    let p = "feature.node.kubernetes.io/";
    for flag in [
        "ADX",
        "AESNI",
        "AVX",
        "AVX2",
        "AVX512BW",
        "AVX512CD",
        "AVX512DQ",
        "AVX512F",
        "AVX512VL",
        "AVX512VNNI",
        "FMA3",
        "GFNI",
        "IBPB",
        "MOVBE",
        "MPX",
        "OSXSAVE",
        "SHA",
        "STIBP",
        "VAES",
        "VMX",
        "VPCLMULQDQ",
        "WBNOINVD",
        "XSAVE",
        "XSAVEC",
        "XSAVEOPT",
        "XSAVES",
    ] {
        labels.insert(format!("{p}cpu-cpuid.{flag}"), json!("true"));
    }
    for (k, v) in [
        ("cpu-hardware_multithreading", "true"),
        ("cpu-model.family", "6"),
        ("cpu-model.id", "106"),
        ("cpu-model.vendor_id", "Intel"),
        ("cpu-pstate.status", "active"),
        ("cpu-pstate.turbo", "true"),
        ("kernel-config.NO_HZ", "true"),
        ("kernel-config.NO_HZ_IDLE", "true"),
        ("kernel-version.full", "6.1.0-13-amd64"),
        ("kernel-version.major", "6"),
        ("kernel-version.minor", "1"),
        ("kernel-version.revision", "0"),
        ("memory-numa", "true"),
        ("pci-1d0f.present", "true"),
        ("storage-nonrotationaldisk", "true"),
        ("system-os_release.ID", "debian"),
        ("system-os_release.VERSION_ID", "12"),
        ("system-os_release.VERSION_ID.major", "12"),
    ] {
        labels.insert(format!("{p}{k}"), json!(v));
    }
    labels.insert(
        "nfd.node.kubernetes.io/extended-resources".into(),
        json!(""),
    );
    labels.insert(
        "node.kubernetes.io/instance-type".into(),
        json!(if i.is_multiple_of(2) {
            "m6i.xlarge"
        } else {
            "c6i.2xlarge"
        }),
    );
    labels.insert(
        "topology.ebs.csi.aws.com/zone".into(),
        json!(format!("eu-west-1{}", ["a", "b", "c"][i % 3])),
    );
    node
}

/// A typical x86 node's `NodeFeature`: cpuid flags, loaded modules, kernel config, PCI devices.
fn node_feature(i: usize) -> Value {
    let name = format!("ip-10-0-{}-{}.eu-west-1.compute.internal", i / 256, i % 256);
    let flags = |n: usize, stem: &str| -> Value {
        let elements: serde_json::Map<String, Value> =
            (0..n).map(|j| (format!("{stem}{j}"), json!({}))).collect();
        json!({ "elements": elements })
    };
    let config: serde_json::Map<String, Value> = (0..1500usize)
        .map(|j| {
            (
                format!("CONFIG_OPTION_{j}"),
                json!(if j.is_multiple_of(3) { "m" } else { "y" }),
            )
        })
        .collect();
    let devices: Vec<Value> = (0..12)
        .map(|j| {
            json!({"attributes": {"class": "0200", "vendor": "1d0f", "device": format!("ec{j:02}"),
            "subsystem_vendor": "1d0f", "subsystem_device": "ec20", "sriov_totalvfs": "0"}})
        })
        .collect();
    node_feature_json(
        &name,
        json!({
            "flags": {"cpu.cpuid": flags(120, "FLAG"), "kernel.loadedmodule": flags(90, "mod_"),
                      "kernel.enabledmodule": flags(90, "mod_")},
            "attributes": {"kernel.config": {"elements": config},
                           "kernel.version": {"elements": {"full": "6.1.0-13-amd64", "major": "6", "minor": "1", "revision": "0"}},
                           "system.osrelease": {"elements": {"ID": "debian", "VERSION_ID": "12"}}},
            "instances": {"pci.device": {"elements": devices}},
        }),
    )
}

/// Resident bytes `build` leaves behind, per item.
fn bytes_per<T>(build: impl Fn(usize) -> T) -> (Vec<T>, isize) {
    let before = rss();
    let kept: Vec<T> = (0..SAMPLE).map(build).collect();
    let after = rss();
    let per = (after - before) / SAMPLE as isize;
    (kept, per)
}

#[test]
fn node_records_per_node_and_at_5000_nodes() {
    let (records, per_node) = bytes_per(|i| {
        let raw = serde_json::to_vec(&labelled_node(i)).unwrap();
        serde_json::from_slice::<NodeRecord>(&raw).unwrap()
    });
    assert!(records.iter().all(|r| r.labels.len() > 50));
    let (features, per_feature) = bytes_per(|i| {
        let raw = serde_json::to_vec(&node_feature(i)).unwrap();
        serde_json::from_slice::<NodeFeatureRecord>(&raw).unwrap()
    });
    assert!(features.iter().all(|f| f.node.is_some()));
    println!(
        "NodeRecord: {per_node} B per node, {} MiB at {NODES} nodes",
        per_node * NODES as isize / (1 << 20)
    );
    println!(
        "NodeFeatureRecord: {per_feature} B per node, {} MiB at {NODES} nodes",
        per_feature * NODES as isize / (1 << 20)
    );
    // Bounds for direction: a record must not grow past them unnoticed.
    assert!(per_node < 16 * 1024, "{per_node} B per NodeRecord");
    assert!(
        per_feature < 512 * 1024,
        "{per_feature} B per NodeFeatureRecord"
    );
}
