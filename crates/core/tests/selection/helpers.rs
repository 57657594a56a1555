//! Nodes and specs for the compat tables.

use std::collections::BTreeMap;

use noe_core::selection::{NodeFacts, NodeFeatures};
use serde_json::{json, Value};

/// A schedulable node with `labels`.
pub fn node(name: &str, labels: &[(&str, &str)]) -> NodeFacts {
    NodeFacts {
        name: name.to_owned(),
        labels: std::sync::Arc::new(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        ),
        features: None,
        schedulable: true,
    }
}

/// A node with NFD's raw features (`NodeFeature.spec.features`).
pub fn featured(name: &str, labels: &[(&str, &str)], features: Value) -> NodeFacts {
    NodeFacts {
        features: Some(std::sync::Arc::new(NodeFeatures::from_spec_features(
            &features,
        ))),
        ..node(name, labels)
    }
}

/// The features of a typical x86 node, as nfd-worker reports them.
pub fn x86_features() -> Value {
    json!({
        "flags": {
            "cpu.cpuid": {"elements": {"AVX": {}, "AVX2": {}, "SSE4.2": {}}},
            "kernel.loadedmodule": {"elements": {"kvm": {}, "nvidia": {}}}
        },
        "attributes": {
            "kernel.version": {"elements": {"full": "6.1.0-13-amd64", "major": "6", "minor": "1", "revision": "0"}},
            "system.osrelease": {"elements": {"ID": "debian", "VERSION_ID": "12", "VERSION_ID.major": "12"}},
            "kernel.config": {"elements": {"NO_HZ": "y", "KVM": "m"}},
            "cpu.model": {"elements": {"vendor_id": "Intel", "family": "6"}}
        },
        "instances": {
            "pci.device": {"elements": [
                {"attributes": {"class": "0300", "vendor": "10de", "device": "1eb8"}},
                {"attributes": {"class": "0200", "vendor": "8086", "device": "1521"}}
            ]}
        }
    })
}

/// A pod with one container `image` and `extra` merged into its spec.
pub fn pod(image: &str, spec: Value) -> Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": image}]}
    });
    if let (Some(s), Some(extra)) = (pod["spec"].as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            s.insert(k.clone(), v.clone());
        }
    }
    pod
}
