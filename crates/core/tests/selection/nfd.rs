//! NFD's semantics (`pkg/apis/nfd/nodefeaturerule`): `NotIn` on a missing element is false, a
//! missing feature fails every op, flags answer only `Exists`/`DoesNotExist`, instance terms
//! hold when one instance satisfies every expression; value counts are checked; and the label
//! translation for nodes without a `NodeFeature`.

use noe_core::selection::{SelectionError, Spec, Tri};
use noe_test_support::{nfd_nested_spec, nfd_regex_spec};
use serde_json::json;

use super::helpers::{featured, node, x86_features};

/// An NFD spec with one set of one rule of one term.
fn one_term(term: serde_json::Value) -> String {
    json!({"version": "v1alpha1", "compatibilities": [{"rules": [{"name": "r", "matchFeatures": [term]}]}]})
        .to_string()
}

fn eval_term(term: serde_json::Value, node: &noe_core::selection::NodeFacts) -> Tri {
    let spec = Spec::parse_nfd(one_term(term).as_bytes()).unwrap();
    spec.sets[0].rule.eval(node)
}

#[test]
fn golden_table_against_node_features() {
    let n = featured("n1", &[], x86_features());
    let t = |feature: &str, exprs: serde_json::Value| {
        eval_term(json!({"feature": feature, "matchExpressions": exprs}), &n)
    };
    // (feature, expressions, expected)
    let table = [
        (
            "kernel.version",
            json!({"major": {"op": "In", "value": ["6"]}}),
            Tri::True,
        ),
        (
            "kernel.version",
            json!({"major": {"op": "In", "value": ["5"]}}),
            Tri::False,
        ),
        (
            "kernel.version",
            json!({"major": {"op": "NotIn", "value": ["5"]}}),
            Tri::True,
        ),
        // NotIn on a missing element is false (Kubernetes says true).
        (
            "kernel.version",
            json!({"nope": {"op": "NotIn", "value": ["5"]}}),
            Tri::False,
        ),
        (
            "kernel.version",
            json!({"nope": {"op": "DoesNotExist"}}),
            Tri::True,
        ),
        (
            "kernel.version",
            json!({"nope": {"op": "Exists"}}),
            Tri::False,
        ),
        (
            "kernel.version",
            json!({"major": {"op": "Gt", "value": ["5"]}}),
            Tri::True,
        ),
        (
            "kernel.version",
            json!({"major": {"op": "Ge", "value": ["6"]}}),
            Tri::True,
        ),
        (
            "kernel.version",
            json!({"major": {"op": "Lt", "value": ["6"]}}),
            Tri::False,
        ),
        (
            "kernel.version",
            json!({"major": {"op": "Le", "value": ["6"]}}),
            Tri::True,
        ),
        (
            "kernel.version",
            json!({"minor": {"op": "GtLt", "value": ["0", "2"]}}),
            Tri::True,
        ),
        (
            "kernel.version",
            json!({"minor": {"op": "GeLe", "value": ["2", "4"]}}),
            Tri::False,
        ),
        // A non-integer value never compares.
        (
            "kernel.version",
            json!({"full": {"op": "Gt", "value": ["5"]}}),
            Tri::False,
        ),
        (
            "kernel.version",
            json!({"full": {"op": "Ge", "value": ["6.1"], "type": "version"}}),
            Tri::True,
        ),
        (
            "kernel.version",
            json!({"full": {"op": "Lt", "value": ["6.0.9"], "type": "version"}}),
            Tri::False,
        ),
        (
            "kernel.version",
            json!({"full": {"op": "InRegexp", "value": ["amd64$"]}}),
            Tri::True,
        ),
        (
            "system.osrelease",
            json!({"ID": {"op": "In", "value": ["debian", "ubuntu"]}}),
            Tri::True,
        ),
        (
            "kernel.config",
            json!({"NO_HZ": {"op": "In", "value": ["y", "m"]}}),
            Tri::True,
        ),
        // A missing feature fails every op, even DoesNotExist.
        (
            "kernel.selinux",
            json!({"enabled": {"op": "DoesNotExist"}}),
            Tri::False,
        ),
        (
            "memory.hugepages",
            json!({"enabled": {"op": "NotIn", "value": ["x"]}}),
            Tri::False,
        ),
        // Flags answer Exists and DoesNotExist only.
        ("cpu.cpuid", json!({"AVX2": {"op": "Exists"}}), Tri::True),
        (
            "cpu.cpuid",
            json!({"AVX512F": {"op": "Exists"}}),
            Tri::False,
        ),
        (
            "cpu.cpuid",
            json!({"AVX512F": {"op": "DoesNotExist"}}),
            Tri::True,
        ),
        (
            "cpu.cpuid",
            json!({"AVX2": {"op": "In", "value": ["true"]}}),
            Tri::False,
        ),
        (
            "kernel.loadedmodule",
            json!({"nvidia": {"op": "Exists"}}),
            Tri::True,
        ),
        // An instance feature holds when one instance satisfies every expression.
        (
            "pci.device",
            json!({"class": {"op": "In", "value": ["0300"]}, "vendor": {"op": "In", "value": ["10de"]}}),
            Tri::True,
        ),
        (
            "pci.device",
            json!({"class": {"op": "In", "value": ["0300"]}, "vendor": {"op": "In", "value": ["8086"]}}),
            Tri::False,
        ),
        (
            "pci.device",
            json!({"device": {"op": "In", "value": ["1521"]}}),
            Tri::True,
        ),
        // Element names are case-sensitive, feature names are not.
        ("CPU.CPUID", json!({"AVX": {"op": "Exists"}}), Tri::True),
    ];
    for (feature, exprs, want) in table {
        assert_eq!(t(feature, exprs.clone()), want, "{feature} {exprs}");
    }
}

#[test]
fn match_name_and_match_any() {
    let n = featured("n1", &[], x86_features());
    let name = json!({"feature": "kernel.loadedmodule", "matchName": {"op": "InRegexp", "value": ["^nv"]}});
    assert_eq!(eval_term(name, &n), Tri::True);
    let name =
        json!({"feature": "kernel.loadedmodule", "matchName": {"op": "In", "value": ["zfs"]}});
    assert_eq!(eval_term(name, &n), Tri::False);

    let any = |modules: &[&str]| {
        let branches: Vec<_> = modules
            .iter()
            .map(|m| json!({"matchFeatures": [{"feature": "kernel.loadedmodule", "matchExpressions": {*m: {"op": "Exists"}}}]}))
            .collect();
        let spec = json!({"version": "v1alpha1", "compatibilities": [{"rules": [{"name": "r", "matchAny": branches,
            "matchFeatures": [{"feature": "cpu.cpuid", "matchExpressions": {"AVX": {"op": "Exists"}}}]}]}]});
        Spec::parse_nfd(spec.to_string().as_bytes()).unwrap().sets[0]
            .rule
            .eval(&n)
    };
    assert_eq!(any(&["zfs", "kvm"]), Tri::True);
    assert_eq!(any(&["zfs", "btrfs"]), Tri::False);
}

#[test]
fn invalid_expressions_are_refused() {
    let bad = [
        json!({"x": {"op": "Exists", "value": ["a"]}}),
        json!({"x": {"op": "In"}}),
        json!({"x": {"op": "Gt", "value": ["a"]}}),
        json!({"x": {"op": "Gt", "value": ["1", "2"]}}),
        json!({"x": {"op": "GtLt", "value": ["3", "2"]}}),
        json!({"x": {"op": "GeLe", "value": ["2", "2"]}}),
        json!({"x": {"op": "Matches", "value": ["a"]}}),
        json!({"x": {"op": "In", "value": ["a"], "type": "version"}}),
        json!({"x": {"op": "InRegexp", "value": ["("]}}),
        json!({"x": {"op": "InRegexp", "value": ["a".repeat(300)]}}),
    ];
    for exprs in bad {
        let spec = one_term(json!({"feature": "kernel.version", "matchExpressions": exprs}));
        assert!(
            matches!(
                Spec::parse_nfd(spec.as_bytes()),
                Err(SelectionError::Invalid(_))
            ),
            "{exprs}"
        );
    }
    let wrong_version = json!({"version": "v1", "compatibilities": []}).to_string();
    assert!(matches!(
        Spec::parse_nfd(wrong_version.as_bytes()),
        Err(SelectionError::Invalid(_))
    ));
    assert!(matches!(
        Spec::parse_nfd(b"version: [\n"),
        Err(SelectionError::Parse(_))
    ));
}

#[test]
fn counts_and_sizes_are_bounded() {
    let sets: Vec<_> = (0..65).map(|_| json!({"rules": []})).collect();
    let spec = json!({"version": "v1alpha1", "compatibilities": sets}).to_string();
    assert_eq!(
        Spec::parse_nfd(spec.as_bytes()).unwrap_err(),
        SelectionError::TooMany {
            what: "compatibility sets",
            limit: 64
        }
    );
    let values: Vec<String> = (0..65).map(|i| i.to_string()).collect();
    let spec = one_term(
        json!({"feature": "f.g", "matchExpressions": {"x": {"op": "In", "value": values}}}),
    );
    assert!(matches!(
        Spec::parse_nfd(spec.as_bytes()),
        Err(SelectionError::Parse(_))
    ));
    let big = vec![b' '; 256 * 1024 + 1];
    assert_eq!(
        Spec::parse_nfd(&big).unwrap_err(),
        SelectionError::TooLarge(256 * 1024)
    );
}

/// 32,768 copies of the Unicode `\w` are one compiled expression; distinct patterns stop at the
/// spec's budget of compiled bytes; a hostile nesting fails at its depth, whether in the
/// document or inside an expression's `value`.
#[test]
fn regular_expressions_and_nesting_are_bounded() {
    use noe_core::selection::limits;
    let regex_spec = |pattern: &dyn Fn(usize) -> String| nfd_regex_spec(pattern).into_bytes();
    let word = Spec::parse_nfd(&regex_spec(&|_| "\\w".to_owned())).unwrap();
    assert!(word.regex_bytes > 0);
    assert!(word.regex_bytes < 512 * 1024, "{}", word.regex_bytes);
    let distinct = regex_spec(&|i| format!("\\w{}", char::from(b'a' + (i % 26) as u8)));
    assert_eq!(
        Spec::parse_nfd(&distinct).unwrap_err(),
        SelectionError::TooMany {
            what: "bytes of compiled regular expressions",
            limit: limits::SPEC_REGEX_BYTES
        }
    );
    let literals = regex_spec(&|i| format!("{:03x}", i % 4096));
    assert!(matches!(
        Spec::parse_nfd(&literals),
        Err(SelectionError::TooMany { limit, .. }) if limit == limits::SPEC_REGEX_BYTES
    ));
    let nested = |depth: usize| nfd_nested_spec(depth, true);
    // Within the bound, the nesting is read (and the empty list refused for what it is).
    assert!(matches!(
        Spec::parse_nfd(nested(50).as_bytes()),
        Err(SelectionError::Parse(_) | SelectionError::Invalid(_))
    ));
    for depth in [100, 100_000] {
        assert_eq!(
            Spec::parse_nfd(nested(depth).as_bytes()).unwrap_err(),
            SelectionError::TooMany {
                what: "levels of nesting",
                limit: limits::DEPTH
            }
        );
    }
}

#[test]
fn yaml_as_nfd_documents_it() {
    let yaml = br#"
version: v1alpha1
compatibilities:
- description: "My image requirements"
  weight: 10
  tag: gpu
  rules:
  - name: "kernel and cpu"
    matchFeatures:
    - feature: kernel.loadedmodule
      matchExpressions:
        vfio-pci: {op: Exists}
    - feature: cpu.model
      matchExpressions:
        vendor_id: {op: In, value: ["Intel", "AMD"]}
"#;
    let spec = Spec::parse_nfd(yaml).unwrap();
    assert_eq!(spec.sets.len(), 1);
    assert_eq!(
        (spec.sets[0].weight, spec.sets[0].tag.as_str()),
        (10, "gpu")
    );
    let mut features = x86_features();
    features["flags"]["kernel.loadedmodule"]["elements"]["vfio-pci"] = json!({});
    assert_eq!(
        spec.sets[0].rule.eval(&featured("n", &[], features)),
        Tri::True
    );
    assert_eq!(
        spec.sets[0].rule.eval(&featured("n", &[], x86_features())),
        Tri::False
    );
    // Without a NodeFeature, a feature no label says is unknown (what labels say still counts).
    let intel = [("feature.node.kubernetes.io/cpu-model.vendor_id", "Intel")];
    assert_eq!(spec.sets[0].rule.eval(&node("n", &intel)), Tri::Unknown);
    assert_eq!(spec.sets[0].rule.eval(&node("n", &[])), Tri::False);
}

/// A `NodeFeature` past the bounds: the features not kept are unknown (or told by their labels),
/// never false; long values are cut, and what fits is still evaluated exactly.
#[test]
fn node_features_past_the_bounds_are_unknown_not_false() {
    use noe_core::selection::features::{MAX_FEATURE_ITEMS, MAX_VALUE_BYTES};
    use noe_core::selection::NodeFeatures;
    let big = || {
        let mut features = x86_features();
        let many: serde_json::Map<String, serde_json::Value> = (0..=MAX_FEATURE_ITEMS)
            .map(|i| (format!("CONFIG_{i}"), json!("y")))
            .collect();
        features["attributes"]["kernel.config"] = json!({"elements": many});
        features["attributes"]["system.name"] =
            json!({"elements": {"nodename": "x".repeat(MAX_VALUE_BYTES + 100)}});
        features
    };
    let parsed = NodeFeatures::from_spec_features(&big());
    assert!(parsed.is_truncated("kernel.config"));
    assert!(parsed.get("kernel.config").is_none());
    assert_eq!(
        parsed
            .get("system.name")
            .and_then(|f| f.attribute("nodename"))
            .map(str::len),
        Some(MAX_VALUE_BYTES)
    );
    let n = featured("n", &[], big());
    let config = json!({"feature": "kernel.config",
        "matchExpressions": {"CONFIG_1": {"op": "In", "value": ["y"]}}});
    assert_eq!(eval_term(config, &n), Tri::Unknown);
    // A labelled option of the truncated feature is still told by its label.
    let labelled = featured(
        "n",
        &[("feature.node.kubernetes.io/kernel-config.NO_HZ", "true")],
        big(),
    );
    let no_hz =
        json!({"feature": "kernel.config", "matchExpressions": {"NO_HZ": {"op": "Exists"}}});
    assert_eq!(eval_term(no_hz, &labelled), Tri::True);
    // What fits is exact: a missing feature is false.
    let missing = json!({"feature": "memory.hugepages",
        "matchExpressions": {"enabled": {"op": "Exists"}}});
    assert_eq!(eval_term(missing, &n), Tri::False);
}

#[test]
fn label_translation_keeps_nfd_semantics() {
    let label = |feature: &str, exprs: serde_json::Value, labels: &[(&str, &str)]| {
        eval_term(
            json!({"feature": feature, "matchExpressions": exprs}),
            &node("n", labels),
        )
    };
    let p = "feature.node.kubernetes.io/";
    let avx = format!("{p}cpu-cpuid.AVX512F");
    assert_eq!(
        label(
            "cpu.cpuid",
            json!({"AVX512F": {"op": "Exists"}}),
            &[(&avx, "true")]
        ),
        Tri::True
    );
    assert_eq!(
        label("cpu.cpuid", json!({"AVX512F": {"op": "Exists"}}), &[]),
        Tri::False
    );
    // A blacklisted flag is never a label; DoesNotExist may be a filtered label: unknown.
    assert_eq!(
        label("cpu.cpuid", json!({"SSE4.2": {"op": "Exists"}}), &[]),
        Tri::Unknown
    );
    assert_eq!(
        label("cpu.cpuid", json!({"AVX512F": {"op": "DoesNotExist"}}), &[]),
        Tri::Unknown
    );
    let major = format!("{p}kernel-version.major");
    assert_eq!(
        label(
            "kernel.version",
            json!({"major": {"op": "NotIn", "value": ["5"]}}),
            &[]
        ),
        Tri::False
    );
    assert_eq!(
        label(
            "kernel.version",
            json!({"major": {"op": "NotIn", "value": ["5"]}}),
            &[(&major, "6")]
        ),
        Tri::True
    );
    assert_eq!(
        label(
            "kernel.version",
            json!({"major": {"op": "GeLe", "value": ["5", "6"]}}),
            &[(&major, "6")]
        ),
        Tri::True
    );
    let os = format!("{p}system-os_release.ID");
    assert_eq!(
        label(
            "system.osrelease",
            json!({"ID": {"op": "In", "value": ["debian"]}}),
            &[(&os, "debian")]
        ),
        Tri::True
    );
    let gpu = format!("{p}pci-0300_10de.present");
    let pci = json!({"class": {"op": "In", "value": ["0300"]}, "vendor": {"op": "In", "value": ["10de", "1002"]}});
    assert_eq!(
        label("pci.device", pci.clone(), &[(&gpu, "true")]),
        Tri::True
    );
    assert_eq!(label("pci.device", pci, &[]), Tri::False);
    // A class nfd-worker does not label by default.
    let nic = json!({"class": {"op": "In", "value": ["0200"]}, "vendor": {"op": "In", "value": ["8086"]}});
    assert_eq!(label("pci.device", nic, &[]), Tri::Unknown);
    assert_eq!(
        label("kernel.loadedmodule", json!({"kvm": {"op": "Exists"}}), &[]),
        Tri::Unknown
    );
    assert_eq!(
        label(
            "local.label",
            json!({"example.com/flavor": {"op": "In", "value": ["x"]}}),
            &[("example.com/flavor", "x")]
        ),
        Tri::True
    );
}
