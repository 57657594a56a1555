//! The explain engine (`noe_core::explain`): a decision said in words from its summary — each
//! constraint as the patch writes it (pinned or constrained), audit mode, tolerations, node
//! labels, failed lookups — and workload templates explained at their paths.

use super::helpers::{decide_pod, lookups};
use noe_core::decide::{
    ArchSettings, Constraint, Facts, ImageSupport, Lookups, Mode, OnLookupError, Policy,
    PreferenceMode,
};
use noe_core::explain::{Explanation, Note, Outcome};
use noe_core::workload::pod_of;
use serde_json::{json, Value};

const MULTI: &[&str] = &["linux/amd64", "linux/arm", "linux/arm64"];

fn pod(images: &[&str]) -> Value {
    let containers: Vec<Value> = images
        .iter()
        .enumerate()
        .map(|(i, image)| json!({"name": format!("c{i}"), "image": image}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "labels": {"team": "a"}},
        "spec": {"containers": containers},
    })
}

fn explain(object: &Value, lookups: &Lookups, policy: &Policy) -> Explanation {
    let of = pod_of(object).unwrap();
    let decision = decide_pod(of.pod.as_ref(), lookups, &Facts::default(), policy);
    Explanation::decided(&of, decision)
}

fn tolerating() -> Policy {
    let settings = ArchSettings {
        tolerations: vec![json!({"key": "arch", "value": "arm64", "effect": "NoSchedule"})],
        node_labels: Default::default(),
    };
    Policy {
        preferred_arch: None,
        architectures: [("arm64".to_owned(), settings)].into(),
        match_node_labels: vec!["team".to_owned()],
        ..Policy::default()
    }
}

#[test]
fn messages_say_what_the_patch_does() {
    let multi = lookups(&[("app:1", Ok(MULTI))]);
    let preferred_mode = Policy {
        preference_mode: PreferenceMode::Preferred,
        ..Policy::default()
    };
    let no_preference = Policy {
        preferred_arch: None,
        ..Policy::default()
    };
    let audit = Policy {
        mode: Mode::Audit,
        preferred_arch: None,
        ..Policy::default()
    };
    let cases: &[(&str, &Policy, &str)] = &[
        (
            "required mode pins the preferred arch",
            &Policy::default(),
            "pinned to the preferred architecture amd64 (every image supports amd64,arm,arm64)",
        ),
        (
            "preferred mode constrains and prefers",
            &preferred_mode,
            "constrained to the architectures amd64,arm,arm64, preferring amd64",
        ),
        (
            "without a preferred arch",
            &no_preference,
            "constrained to the architectures amd64,arm,arm64",
        ),
        (
            "tolerations and node labels",
            &tolerating(),
            "constrained to the architectures amd64,arm,arm64; tolerations added; pod labels copied into nodeSelector: team",
        ),
        (
            "audit mode",
            &audit,
            "audit mode: nothing enforced, annotated arch.noe.adevinta.com/audit=patch:amd64,arm,arm64",
        ),
    ];
    for (name, policy, want) in cases {
        let explained = explain(&pod(&["app:1"]), &multi, policy);
        assert_eq!(explained.message(), *want, "{name}");
        assert!(!explained.denied() && !explained.lookup_failed(), "{name}");
        assert_eq!(explained.json()["message"], *want, "{name}");
        assert!(explained.text().contains(want), "{name}");
    }
}

#[test]
fn the_summary_records_each_step() {
    let found = lookups(&[
        ("app:1", Ok(MULTI)),
        ("arm:1", Ok(&["linux/arm64", "windows/amd64"])),
        ("gone:1", Err("unauthorized")),
    ]);
    let explained = explain(&pod(&["app:1", "arm:1", "gone:1"]), &found, &tolerating());
    let summary = &explained.decision().unwrap().summary;
    assert_eq!(summary.common.as_deref(), Some(&["arm64".to_owned()][..]));
    assert_eq!(
        summary.constraint,
        Constraint::Constrained {
            archs: vec!["arm64".into()]
        }
    );
    assert_eq!(summary.tolerations, ["arm64"]);
    assert_eq!(summary.node_labels, ["team"]);
    assert_eq!(summary.images.len(), 3);
    let ImageSupport::Platforms { platforms, usable } = &summary.images[1].support else {
        panic!("{:?}", summary.images[1].support);
    };
    let platforms: Vec<String> = platforms.iter().map(ToString::to_string).collect();
    assert_eq!(platforms, ["linux/arm64", "windows/amd64"]);
    assert_eq!(usable, &["arm64"]);
    assert_eq!(
        summary.images[2].support,
        ImageSupport::Failed {
            error: "unauthorized".into()
        }
    );
    // The failure is named with its whole error, in JSON and in text.
    assert!(explained.lookup_failed());
    assert_eq!(
        explained.json()["lookupErrors"],
        json!([{"image": "gone:1", "error": "unauthorized"}])
    );
    assert!(explained
        .text()
        .contains("lookup failed: gone:1: unauthorized"));
}

#[test]
fn failures_denials_and_skips() {
    // Every lookup failed: left alone (ignore-image), the failure named.
    let failed = lookups(&[("app:1", Err("timeout"))]);
    let explained = explain(&pod(&["app:1"]), &failed, &Policy::default());
    assert_eq!(explained.message(), "unchanged: image lookup failed");
    assert!(explained.lookup_failed());
    assert!(explained
        .text()
        .starts_with("Pod ns/p: allowed unchanged\n"));

    // Deny on a failed lookup.
    let deny = Policy {
        on_lookup_error: OnLookupError::Deny,
        ..Policy::default()
    };
    let explained = explain(&pod(&["app:1"]), &failed, &deny);
    assert!(explained.denied());
    assert_eq!(explained.json()["allowed"], false);
    assert_eq!(
        explained.decision().unwrap().summary.constraint,
        Constraint::None
    );

    // No common arch.
    let disjoint = lookups(&[("a:1", Ok(&["linux/amd64"])), ("b:1", Ok(&["linux/arm64"]))]);
    let explained = explain(&pod(&["a:1", "b:1"]), &disjoint, &Policy::default());
    assert!(explained.denied());
    assert!(explained
        .message()
        .starts_with("no architecture is supported by every container"));

    // Not a pod.
    let config = json!({"kind": "ConfigMap", "metadata": {"name": "c"}});
    let skipped = Explanation::skipped(&config, "not a pod".into());
    assert_eq!(skipped.name, "default/c");
    assert_eq!(skipped.outcome, Outcome::Skipped("not a pod".into()));
    assert_eq!(
        skipped.json(),
        json!({"kind": "ConfigMap", "name": "default/c", "skipped": "not a pod"})
    );
}

#[test]
fn workloads_are_explained_at_their_template() {
    let multi = lookups(&[("app:1", Ok(MULTI))]);
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team"},
        "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "app:1"}]}}},
    });
    let explained = explain(&deployment, &multi, &Policy::default());
    assert_eq!(explained.name, "team/web");
    let Outcome::Decided { patch, note, .. } = &explained.outcome else {
        panic!("{explained:?}");
    };
    assert_eq!(*note, None);
    let paths: Vec<String> = patch
        .iter()
        .map(|op| serde_json::to_value(op).unwrap()["path"].to_string())
        .collect();
    assert!(
        paths.iter().all(|p| p.starts_with("\"/spec/template/")),
        "{paths:?}"
    );

    let daemonset = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "team"},
        "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "app:1"}]}}},
    });
    let explained = explain(&daemonset, &multi, &Policy::default());
    let Outcome::Decided { note, .. } = &explained.outcome else {
        panic!("{explained:?}");
    };
    assert_eq!(*note, Some(Note::DaemonSet));
    assert!(explained.message().starts_with("unchanged: "));
    assert!(explained.message().ends_with(
        "(DaemonSet pods are pinned to their node by the DaemonSet controller: no architecture constraint is added)"
    ));
}
