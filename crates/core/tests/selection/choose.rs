//! The choice and its patch: ocifit-k8s's README walk-through (flavor vanilla → debian,
//! chocolate → ubuntu, strawberry → rockylinux), candidate nodes from the pod's own constraints
//! (all of them), the KEP-3838 append-only writer, pinning by name, discovered constraints.

use noe_core::selection::choose::{already_selected, discovered_patch, explicit_patch};
use noe_core::selection::{
    candidates, choose, constrain, NodeFacts, Pinning, SelectionError, Spec,
};
use serde_json::{json, Value};

use super::helpers::{featured, node, pod, x86_features};

const FLAVOR: &str = "feature.node.ocifit-k8s.flavor";

/// The spec of ocifit-k8s's walk-through, written out here.
fn walkthrough() -> Spec {
    let set = |tag: &str, flavor: &str| {
        json!({"tag": tag, "description": format!("flavor {flavor}"), "rules": [{"matchFeatures": [
            {"matchExpressions": [{"op": "In", "key": FLAVOR, "value": [flavor]}]}]}]})
    };
    let spec = json!({"version": "v1alpha1", "compatibilities": [
        set("debian:11", "vanilla"), set("ubuntu:24.04", "chocolate"), set("rockylinux:9", "strawberry")]});
    Spec::parse_ocifit(spec.to_string().as_bytes()).unwrap()
}

fn apply(pod: &Value, ops: &[noe_core::patch::Op]) -> Value {
    let mut out = pod.clone();
    json_patch::patch(&mut out, ops).unwrap();
    out
}

fn select(pod: &Value, nodes: &[NodeFacts]) -> Result<Value, SelectionError> {
    let spec = walkthrough();
    let candidates = candidates(pod, nodes);
    let choice = choose(pod, &spec, &candidates)?;
    let ops = explicit_patch(pod, &choice, "placeholder:latest", "sha256:abc")?;
    Ok(apply(pod, &ops))
}

#[test]
fn readme_walkthrough_on_a_homogeneous_cluster() {
    for (flavor, image) in [
        ("vanilla", "debian:11"),
        ("chocolate", "ubuntu:24.04"),
        ("strawberry", "rockylinux:9"),
    ] {
        let nodes = [
            node("w1", &[(FLAVOR, flavor)]),
            node("w2", &[(FLAVOR, flavor)]),
        ];
        let p = pod("placeholder:latest", json!({}));
        let out = select(&p, &nodes).unwrap();
        assert_eq!(out["spec"]["containers"][0]["image"], image);
        // Every candidate fits: no affinity, as ocifit-k8s writes none.
        assert!(out["spec"].get("affinity").is_none(), "{out}");
        assert_eq!(
            out["metadata"]["annotations"],
            json!({"arch.noe.adevinta.com/compatibility-artifact": "sha256:abc",
                   "arch.noe.adevinta.com/compatibility-tag": image})
        );
        assert!(already_selected(&out));
    }
}

#[test]
fn heterogeneous_cluster_is_constrained_to_the_chosen_flavor() {
    let nodes = [
        node("w1", &[(FLAVOR, "chocolate")]),
        node("w2", &[(FLAVOR, "strawberry")]),
        NodeFacts {
            schedulable: false,
            ..node("cordoned", &[(FLAVOR, "vanilla")])
        },
    ];
    let p = json!({"metadata": {"name": "p", "annotations": {"keep": "me"}}, "spec": {
        "initContainers": [{"name": "init", "image": "placeholder:latest"}],
        "containers": [{"name": "a", "image": "placeholder:latest"}, {"name": "b", "image": "sidecar:1"}]}});
    let out = select(&p, &nodes).unwrap();
    assert_eq!(out["spec"]["containers"][0]["image"], "ubuntu:24.04");
    assert_eq!(out["spec"]["containers"][1]["image"], "sidecar:1");
    assert_eq!(out["spec"]["initContainers"][0]["image"], "ubuntu:24.04");
    assert_eq!(
        out["spec"]["affinity"],
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": FLAVOR, "operator": "In", "values": ["chocolate"]}]}]}}})
    );
    assert_eq!(out["metadata"]["annotations"]["keep"], "me");
}

#[test]
fn candidates_are_what_the_pods_own_constraints_admit() {
    let nodes = [
        node("w1", &[(FLAVOR, "vanilla"), ("pool", "a")]),
        node("w2", &[(FLAVOR, "strawberry"), ("pool", "b")]),
        node("w3", &[(FLAVOR, "strawberry"), ("pool", "c")]),
    ];
    // nodeSelector: only w2 (ocifit-k8s would read nodes[0] of the selector's list).
    let p = pod("placeholder:latest", json!({"nodeSelector": {"pool": "b"}}));
    let out = select(&p, &nodes).unwrap();
    assert_eq!(out["spec"]["containers"][0]["image"], "rockylinux:9");
    assert!(out["spec"].get("affinity").is_none());
    // Required affinity over pools b and a: vanilla fits w1 only, appended to each term.
    let terms = json!([
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["b"]}]},
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]},
        {}
    ]);
    let p = pod(
        "placeholder:latest",
        json!({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}),
    );
    let out = select(&p, &nodes).unwrap();
    assert_eq!(out["spec"]["containers"][0]["image"], "debian:11");
    let flavor = json!({"key": FLAVOR, "operator": "In", "values": ["vanilla"]});
    assert_eq!(
        out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"],
        json!([
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["b"]}, flavor]},
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}, flavor]},
            {}
        ])
    );
    // The patch passes the gated path's KEP-3838 check.
    let ops = {
        let spec = walkthrough();
        let c = candidates(&p, &nodes);
        explicit_patch(
            &p,
            &choose(&p, &spec, &c).unwrap(),
            "placeholder:latest",
            "sha256:abc",
        )
        .unwrap()
    };
    noe_core::patch::release(&p, &ops, &Default::default()).unwrap();
    // Nothing admitted.
    let p = pod("placeholder:latest", json!({"nodeSelector": {"pool": "z"}}));
    assert_eq!(
        select(&p, &nodes).unwrap_err(),
        SelectionError::NoCandidates
    );
}

#[test]
fn failures_name_the_cause() {
    let nodes = [node("w1", &[(FLAVOR, "mint")])];
    let p = pod("placeholder:latest", json!({}));
    assert_eq!(
        select(&p, &nodes).unwrap_err(),
        SelectionError::NoMatch { candidates: 1 }
    );
    let nodes = [node("w1", &[(FLAVOR, "vanilla")])];
    let p = pod("nginx:1", json!({}));
    let err = select(&p, &nodes).unwrap_err();
    assert_eq!(err, SelectionError::NoTarget("placeholder:latest".into()));
    assert_eq!(
        err.to_string(),
        "no container or init container has the image \"placeholder:latest\""
    );
}

fn nfd(yaml: &str) -> Spec {
    Spec::parse_nfd(yaml.as_bytes()).unwrap()
}

#[test]
fn features_that_are_no_labels_pin_node_names() {
    let needs_kvm = nfd(
        "version: v1alpha1\ncompatibilities:\n- rules:\n  - name: kvm\n    matchFeatures:\n    - feature: kernel.loadedmodule\n      matchExpressions:\n        kvm: {op: Exists}\n",
    );
    let mut nodes: Vec<NodeFacts> = vec![
        featured("kvm1", &[], x86_features()),
        featured(
            "plain",
            &[],
            json!({"flags": {"kernel.loadedmodule": {"elements": {"ext4": {}}}}}),
        ),
        node("unknown", &[]),
    ];
    let p = pod("app:1", json!({}));
    let c = candidates(&p, &nodes);
    let constraint = constrain(&p, &[&needs_kvm], &c).unwrap();
    assert_eq!(constraint.fitting, vec!["kvm1"]);
    assert_eq!(constraint.pinning, Pinning::Names(vec!["kvm1".into()]));
    let out = apply(&p, &discovered_patch(&p, &constraint, &["sha256:art"]));
    assert_eq!(
        out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"],
        json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["kvm1"]}]}])
    );
    assert!(
        out["metadata"]["annotations"]["arch.noe.adevinta.com/compatibility-pinned"].is_string()
    );
    // More than 100 fitting nodes cannot be pinned.
    for i in 0..101 {
        nodes.push(featured(&format!("kvm-{i}"), &[], x86_features()));
    }
    let c = candidates(&p, &nodes);
    assert_eq!(
        constrain(&p, &[&needs_kvm], &c).unwrap_err(),
        SelectionError::TooManyToPin {
            nodes: 102,
            limit: 100
        }
    );
}

#[test]
fn discovered_constraint_requires_a_set_of_each_image_and_prefers_heavier_ones() {
    let gpu = nfd(r#"
version: v1alpha1
compatibilities:
- weight: 500
  tag: avx512
  rules:
  - name: avx512
    matchFeatures:
    - feature: cpu.cpuid
      matchExpressions: {AVX512F: {op: Exists}}
- weight: 10
  tag: avx2
  rules:
  - name: avx2
    matchFeatures:
    - feature: cpu.cpuid
      matchExpressions: {AVX2: {op: Exists}}
"#);
    let os = nfd(r#"
version: v1alpha1
compatibilities:
- rules:
  - name: debian
    matchFeatures:
    - feature: system.osrelease
      matchExpressions: {ID: {op: In, value: [debian]}}
"#);
    let p = "feature.node.kubernetes.io/";
    let (avx512, avx2, id) = (
        format!("{p}cpu-cpuid.AVX512F"),
        format!("{p}cpu-cpuid.AVX2"),
        format!("{p}system-os_release.ID"),
    );
    let nodes = [
        node("a", &[(&avx512, "true"), (&avx2, "true"), (&id, "debian")]),
        node("b", &[(&avx2, "true"), (&id, "debian")]),
        node("c", &[(&avx2, "true"), (&id, "ubuntu")]),
        node("d", &[(&id, "debian")]),
    ];
    let pod = pod("app:1", json!({}));
    let c = candidates(&pod, &nodes);
    let constraint = constrain(&pod, &[&gpu, &os], &c).unwrap();
    assert_eq!(constraint.fitting, vec!["a", "b"]);
    let out = apply(
        &pod,
        &discovered_patch(&pod, &constraint, &["sha256:1", "sha256:2"]),
    );
    let e = |k: &str, op: &str, v: &[&str]| {
        if v.is_empty() {
            json!({"key": k, "operator": op})
        } else {
            json!({"key": k, "operator": op, "values": v})
        }
    };
    assert_eq!(
        out["spec"]["affinity"]["nodeAffinity"],
        json!({
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [e(&avx512, "Exists", &[]), e(&id, "In", &["debian"])]},
                {"matchExpressions": [e(&avx2, "Exists", &[]), e(&id, "In", &["debian"])]}
            ]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": {"matchExpressions": [e(&avx512, "Exists", &[])]}},
                {"weight": 10, "preference": {"matchExpressions": [e(&avx2, "Exists", &[])]}}
            ]
        })
    );
    assert_eq!(
        out["metadata"]["annotations"]["arch.noe.adevinta.com/compatibility-artifact"],
        "sha256:1,sha256:2"
    );
    // With required terms of its own, two conjunctions cannot be appended: pinned by name.
    let own = pod_with_terms();
    let c = candidates(&own, &nodes);
    let constraint = constrain(&own, &[&gpu, &os], &c).unwrap();
    assert_eq!(
        constraint.pinning,
        Pinning::Names(vec!["a".into(), "b".into()])
    );
    let ops = discovered_patch(&own, &constraint, &["sha256:1"]);
    noe_core::patch::release(&own, &ops, &Default::default()).unwrap();
}

fn pod_with_terms() -> Value {
    pod(
        "app:1",
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/os", "operator": "NotIn", "values": ["windows"]}]}]}}}}),
    )
}

#[test]
fn regexes_expand_to_observed_values_and_big_forms_are_refused() {
    let spec = Spec::parse_ocifit(
        json!({"compatibilities": [{"tag": "x", "rules": [{"matchFeatures": [{"matchExpressions": [
        {"op": "InRegexp", "key": "zone", "value": ["^eu-"]}]}]}]}]})
        .to_string()
        .as_bytes(),
    )
    .unwrap();
    let nodes = [
        node("a", &[("zone", "eu-west")]),
        node("b", &[("zone", "eu-north")]),
        node("c", &[("zone", "us-east")]),
    ];
    let refs: Vec<_> = nodes.iter().collect();
    assert_eq!(
        spec.sets[0].rule.terms(&refs),
        Some(vec![vec![
            json!({"key": "zone", "operator": "In", "values": ["eu-north", "eu-west"]})
        ]])
    );
    // 17 ORed alternatives exceed the 16-term cap: no label form (sized before it is built).
    let any: Vec<_> = (0..17)
        .map(|i| json!({"matchFeatures": [{"feature": "kernel.version", "matchExpressions": {"major": {"op": "In", "value": [i.to_string()]}}}]}))
        .collect();
    let big = json!({"version": "v1alpha1", "compatibilities": [{"rules": [{"name": "r", "matchAny": any[..16]}, {"name": "s", "matchAny": any[..2]}]}]});
    let spec = Spec::parse_nfd(big.to_string().as_bytes()).unwrap();
    assert_eq!(spec.sets[0].rule.terms(&refs), None);
}
