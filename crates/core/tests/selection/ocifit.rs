//! ocifit-k8s's semantics (`pkg/validator`): keys are node labels, `NotIn` is true on an absent
//! label, `Gte`/`Lte` and `Gt`/`Lt` compare the first value as an integer, `InRegexp` is an
//! unanchored match, `value` is a string or a list; the highest weight wins, ties in document
//! order.

use noe_core::selection::{choose, SelectionError, Spec, Tri};
use serde_json::json;

use super::helpers::{node, pod};

fn expr(op: &str, key: &str, value: serde_json::Value) -> Spec {
    let spec = json!({"version": "v1alpha1", "compatibilities": [{"tag": "t", "rules": [
        {"matchFeatures": [{"matchExpressions": [{"op": op, "key": key, "value": value}]}]}]}]});
    Spec::parse_ocifit(spec.to_string().as_bytes()).unwrap()
}

#[test]
fn golden_table() {
    let k = "feature.node.kubernetes.io/kernel-version.minor";
    let n = node(
        "n",
        &[(k, "15"), ("feature.node.ocifit-k8s.flavor", "vanilla")],
    );
    let bare = node("bare", &[]);
    let table = [
        ("In", k, json!(["15", "16"]), Tri::True, Tri::False),
        ("In", k, json!("15"), Tri::True, Tri::False),
        ("NotIn", k, json!(["15"]), Tri::False, Tri::True),
        ("NotIn", k, json!("3"), Tri::True, Tri::True),
        ("Exists", k, json!(null), Tri::True, Tri::False),
        ("DoesNotExist", k, json!([]), Tri::False, Tri::True),
        ("Gt", k, json!(["14"]), Tri::True, Tri::False),
        ("Gt", k, json!("15"), Tri::False, Tri::False),
        ("Lt", k, json!(["16", "1"]), Tri::True, Tri::False),
        ("Gte", k, json!(["15"]), Tri::True, Tri::False),
        ("Gte", k, json!(["16"]), Tri::False, Tri::False),
        ("Lte", k, json!(["15"]), Tri::True, Tri::False),
        ("Lte", k, json!([14]), Tri::False, Tri::False),
        (
            "InRegexp",
            "feature.node.ocifit-k8s.flavor",
            json!(["nil"]),
            Tri::True,
            Tri::False,
        ),
        (
            "InRegexp",
            "feature.node.ocifit-k8s.flavor",
            json!(["^nil"]),
            Tri::False,
            Tri::False,
        ),
    ];
    for (op, key, value, on_n, on_bare) in table {
        let spec = expr(op, key, value.clone());
        assert_eq!(spec.sets[0].rule.eval(&n), on_n, "{op} {value} on n");
        assert_eq!(
            spec.sets[0].rule.eval(&bare),
            on_bare,
            "{op} {value} on bare"
        );
    }
}

#[test]
fn refused_specs() {
    let bad = |op: &str, value: serde_json::Value| {
        let spec = json!({"compatibilities": [{"tag": "t", "rules": [
            {"matchFeatures": [{"matchExpressions": [{"op": op, "key": "k", "value": value}]}]}]}]});
        Spec::parse_ocifit(spec.to_string().as_bytes())
    };
    assert!(matches!(
        bad("Matches", json!("x")),
        Err(SelectionError::Invalid(_))
    ));
    assert!(matches!(
        bad("Gte", json!("x")),
        Err(SelectionError::Invalid(_))
    ));
    assert!(matches!(
        bad("In", json!([])),
        Err(SelectionError::Invalid(_))
    ));
    assert!(matches!(
        bad("InRegexp", json!("(")),
        Err(SelectionError::Invalid(_))
    ));
    assert!(matches!(
        bad("In", json!({"a": 1})),
        Err(SelectionError::Parse(_))
    ));
    assert!(matches!(
        Spec::parse_ocifit(b"not json"),
        Err(SelectionError::Parse(_))
    ));
    let rules: Vec<_> = (0..33).map(|_| json!({"matchFeatures": []})).collect();
    let spec = json!({"compatibilities": [{"tag": "t", "rules": rules}]}).to_string();
    assert_eq!(
        Spec::parse_ocifit(spec.as_bytes()).unwrap_err(),
        SelectionError::TooMany {
            what: "rules in a set",
            limit: 32
        }
    );
}

fn weighted(sets: &[(&str, i64, &str)]) -> Spec {
    let sets: Vec<_> = sets
        .iter()
        .map(|(tag, weight, flavor)| {
            json!({"tag": tag, "weight": weight, "rules": [{"matchFeatures": [{"matchExpressions": [
            {"op": "In", "key": "flavor", "value": flavor}]}]}]})
        })
        .collect();
    Spec::parse_ocifit(json!({"compatibilities": sets}).to_string().as_bytes()).unwrap()
}

#[test]
fn highest_weight_wins_ties_in_document_order() {
    let nodes = [node("a", &[("flavor", "x")]), node("b", &[("flavor", "y")])];
    let candidates: Vec<_> = nodes.iter().collect();
    let p = pod("placeholder:latest", json!({}));
    let pick = |sets: &[(&str, i64, &str)]| choose(&p, &weighted(sets), &candidates).map(|c| c.tag);
    assert_eq!(pick(&[("one", 0, "x"), ("two", 0, "y")]).unwrap(), "one");
    assert_eq!(pick(&[("one", 1, "x"), ("two", 2, "y")]).unwrap(), "two");
    assert_eq!(
        pick(&[("one", 5, "z"), ("two", 2, "y"), ("three", 2, "x")]).unwrap(),
        "two"
    );
    assert_eq!(pick(&[("one", -3, "x")]).unwrap(), "one");
    assert_eq!(
        pick(&[("one", 5, "z")]).unwrap_err(),
        SelectionError::NoMatch { candidates: 2 }
    );
    assert_eq!(
        choose(&p, &weighted(&[("one", 0, "x")]), &[]).unwrap_err(),
        SelectionError::NoCandidates
    );
}
