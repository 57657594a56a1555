//! The simulated cluster: nodes (half amd64, half arm64) and pods with images from a pool, and
//! the image platforms the controllers' lookup answers from memory (the resolver's warm cache
//! stands in; registry time is not what is measured).

use std::collections::HashMap;
use std::sync::Arc;

use noe_controller::{Platform, PodPlatforms, Support};
use noe_test_support::{node_json, KubeApi, PodFixture};

/// Distinct images the pods draw from.
pub const IMAGE_POOL: usize = 300;
/// Images (containers) per pod.
pub const IMAGES_PER_POD: usize = 3;
/// The image only amd64 supports (wrong-arch pods use it on arm64 nodes).
pub const AMD_ONLY: &str = "registry.example.com/legacy/amd-only:1.0";

pub fn node_name(i: usize) -> String {
    format!("node-{i:05}")
}

fn arch_of(i: usize) -> &'static str {
    if i.is_multiple_of(2) {
        "amd64"
    } else {
        "arm64"
    }
}

/// An arm64 node's name.
pub fn arm_node(i: usize) -> String {
    node_name(i.saturating_mul(2).saturating_add(1))
}

fn pool_image(i: usize) -> String {
    format!("registry.example.com/team{}/service{i}:v1.{i}.0", i % 40)
}

/// Puts `nodes` nodes and `pods` pods (all fitting their node) into the API server.
pub fn populate(api: &KubeApi, nodes: usize, pods: usize) {
    let pool: Vec<String> = (0..IMAGE_POOL).map(pool_image).collect();
    populate_with(api, nodes, pods, &pool);
}

/// Puts `nodes` nodes and `pods` pods into the API server, each pod with [`IMAGES_PER_POD`]
/// images drawn from `pool` (which must support amd64 and arm64 for the pods to fit).
pub fn populate_with(api: &KubeApi, nodes: usize, pods: usize, pool: &[String]) {
    for i in 0..nodes {
        api.put_node(node_json(&node_name(i), arch_of(i), "linux"));
    }
    for p in 0..pods {
        let images: Vec<&str> = (0..IMAGES_PER_POD)
            .filter_map(|c| {
                let index = p.wrapping_mul(7).wrapping_add(c) % pool.len().max(1);
                pool.get(index).map(String::as_str)
            })
            .collect();
        let node = node_name(p % nodes.max(1));
        let mut pod = PodFixture::new(
            &format!("team-{}", p % 50),
            &format!("svc-{p:06}"),
            &node,
            &images,
        );
        pod.pull_secrets = vec!["regcred".to_owned()];
        api.put_pod(pod.json());
    }
}

/// What the controllers' lookup answers: every pool image multi-arch, [`AMD_ONLY`] amd64 only.
pub fn platforms() -> Arc<dyn PodPlatforms> {
    let both = Support::Only(
        [
            Platform::new("linux", "amd64", None),
            Platform::new("linux", "arm64", None),
        ]
        .into(),
    );
    let mut known: HashMap<String, Support> = (0..IMAGE_POOL)
        .map(|i| (pool_image(i), both.clone()))
        .collect();
    known.insert(
        AMD_ONLY.to_owned(),
        Support::Only([Platform::new("linux", "amd64", None)].into()),
    );
    Arc::new(known)
}

/// Sum of a counter family in `registry`.
pub fn counter_sum(registry: &prometheus::Registry, name: &str) -> u64 {
    registry
        .gather()
        .iter()
        .filter(|family| family.name() == name)
        .flat_map(|family| {
            family
                .get_metric()
                .iter()
                .map(|m| m.get_counter().get_value())
        })
        .sum::<f64>() as u64
}
