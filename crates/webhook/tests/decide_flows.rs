//! Multi-step decision flows (reinvocation after a sidecar injector, idempotence), workload pod
//! templates through `patch::with_prefix`, and the small public helpers of `decide`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "decide_support/helpers.rs"]
mod helpers;

use std::collections::BTreeMap;

use helpers::{apply, assert_constrained, assert_minimal, lookups, patched_pod, values};
use k8s_openapi::api::{apps::v1::Deployment, batch::v1::CronJob};
use noe_webhook::decide::{
    decide, needs_lookups, pod_images, should_skip, Lookups, OnLookupError, Policy, PolicyError,
    PreferenceMode, Signal, SkipReason, Verdict,
};
use noe_webhook::patch::with_prefix;
use serde_json::{json, Value};

const MULTI: &[&str] = &["linux/amd64", "linux/arm64"];
const ARM: &[&str] = &["linux/arm64"];

fn all_lookups() -> Lookups {
    lookups(&[
        ("app:1", Ok(MULTI)),
        ("mesh:2", Ok(ARM)),
        ("init:1", Ok(&["linux/amd64", "linux/arm64", "linux/s390x"])),
    ])
}

fn policy(mode: PreferenceMode) -> Policy {
    Policy {
        preference_mode: mode,
        match_node_labels: vec!["team".to_owned()],
        arch_tolerations: BTreeMap::from([
            (
                "amd64".to_owned(),
                vec![json!({"key": "arch", "value": "amd64", "effect": "NoSchedule"})],
            ),
            (
                "arm64".to_owned(),
                vec![json!({"key": "arch", "value": "arm64", "effect": "NoSchedule"})],
            ),
        ]),
        ..Policy::default()
    }
}

fn app_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "labels": {"team": "a"}},
        "spec": {
            "containers": [{"name": "app", "image": "app:1"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}}
        }
    })
}

/// What a sidecar injector does after us: one more container.
fn inject_sidecar(pod: &mut Value) {
    pod["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "mesh", "image": "mesh:2"}));
}

/// Decides and applies; returns the new raw pod and the common set.
fn admit(pod: &Value, policy: &Policy) -> (Value, Vec<String>) {
    let decision = decide(pod, &all_lookups(), policy);
    match &decision.verdict {
        Verdict::Patch { common, .. } => {
            let (raw, typed) = patched_pod(pod, &decision.verdict);
            assert_constrained(&typed, common);
            (raw, common.clone())
        }
        other => panic!("expected a patch, got {other:?}"),
    }
}

fn assert_up_to_date(pod: &Value, policy: &Policy) {
    let decision = decide(pod, &all_lookups(), policy);
    assert_eq!(
        decision.verdict,
        Verdict::Unchanged {
            reason: SkipReason::AlreadyUpToDate
        },
        "a second admission of {pod} changes nothing"
    );
    assert!(
        !decision.signals.iter().any(|s| matches!(
            s,
            Signal::ArchSelectorInjected { .. } | Signal::NodeMatchInjection { .. }
        )),
        "nothing counted as injected again: {:?}",
        decision.signals
    );
}

#[test]
fn reinvocation_after_a_narrower_sidecar_required_mode() {
    let policy = policy(PreferenceMode::Required);
    let (mut pod, common) = admit(&app_pod(), &policy);
    assert_eq!(common, ["amd64", "arm64"]);
    assert_eq!(
        pod["spec"]["nodeSelector"],
        json!({"kubernetes.io/arch": "amd64", "team": "a"})
    );
    assert_up_to_date(&pod, &policy);

    inject_sidecar(&mut pod);
    let (pod, common) = admit(&pod, &policy);
    assert_eq!(common, ["arm64"]);
    // Our nodeSelector is gone (the sidecar cannot run on amd64), the user's key stays, and the
    // arch is ANDed into both of the user's zone terms.
    assert_eq!(pod["spec"]["nodeSelector"], json!({"team": "a"}));
    let terms = &pod["spec"]["affinity"]["nodeAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
    for term in terms.as_array().unwrap() {
        assert_eq!(
            term["matchExpressions"][1],
            json!({"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]})
        );
    }
    assert_eq!(terms.as_array().unwrap().len(), 2, "no ORed term added");
    // Tolerations: amd64's from the first pass stay (they only permit), arm64's added once.
    assert_eq!(pod["spec"]["tolerations"].as_array().unwrap().len(), 2);
    assert_up_to_date(&pod, &policy);
}

#[test]
fn reinvocation_after_a_narrower_sidecar_preferred_mode() {
    let policy = policy(PreferenceMode::Preferred);
    let (mut pod, _) = admit(&app_pod(), &policy);
    let node_affinity = &pod["spec"]["affinity"]["nodeAffinity"];
    assert_eq!(
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"],
        json!([{"weight": 50, "preference": {"matchExpressions": [
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}}])
    );
    assert_eq!(pod["spec"]["nodeSelector"], json!({"team": "a"}));
    assert_up_to_date(&pod, &policy);

    inject_sidecar(&mut pod);
    let (pod, common) = admit(&pod, &policy);
    assert_eq!(common, ["arm64"]);
    let node_affinity = &pod["spec"]["affinity"]["nodeAffinity"];
    assert_eq!(
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"],
        json!([])
    );
    assert_up_to_date(&pod, &policy);
}

#[test]
fn reinvocation_that_makes_the_pod_impossible_is_denied() {
    let policy = Policy::default();
    let mut pod =
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "a:1"}]}});
    let amd = lookups(&[("a:1", Ok(&["linux/amd64"])), ("mesh:2", Ok(ARM))]);
    let first = decide(&pod, &amd, &policy);
    let Verdict::Patch { ops, .. } = &first.verdict else {
        panic!("{first:?}")
    };
    pod = apply(&pod, &values(ops));
    inject_sidecar(&mut pod);
    let second = decide(&pod, &amd, &policy);
    assert_eq!(
        second.verdict,
        Verdict::Deny {
            code: 403,
            message: "no architecture is supported by every container: a:1 [amd64], mesh:2 [arm64]"
                .to_owned()
        }
    );
}

#[test]
fn every_fresh_decision_is_idempotent() {
    let pods = [
        app_pod(),
        json!({"metadata": {"annotations": null}, "spec": {"affinity": null, "nodeSelector": null,
               "tolerations": null, "containers": [{"name": "a", "image": "app:1"}],
               "initContainers": [{"name": "i", "image": "init:1"}]}}),
        json!({"metadata": {"labels": {"arch.noe.adevinta.com/preferred": "arm64"}},
               "spec": {"containers": [{"name": "a", "image": "app:1"}]}}),
    ];
    for mode in [PreferenceMode::Required, PreferenceMode::Preferred] {
        for preferred in [None, Some("amd64"), Some("arm64")] {
            let policy = Policy {
                preferred_arch: preferred.map(str::to_owned),
                ..policy(mode)
            };
            for pod in &pods {
                let (after, _) = admit(pod, &policy);
                assert_up_to_date(&after, &policy);
            }
        }
    }
}

#[test]
fn workload_templates_are_patched_under_their_prefix() {
    let template = json!({
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "app:1"}]}
    });
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template}
    });
    let cronjob = json!({
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "job"},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}}
    });
    let decision = decide(&template, &all_lookups(), &Policy::default());
    let Verdict::Patch { ops, .. } = decision.verdict else {
        panic!("expected a patch")
    };

    let ops_d = values(&with_prefix(ops.clone(), "/spec/template"));
    assert_minimal(&deployment, &ops_d);
    let patched: Deployment = serde_json::from_value(apply(&deployment, &ops_d)).unwrap();
    let tpl = patched.spec.unwrap().template;
    assert_eq!(
        tpl.spec.unwrap().node_selector.unwrap()["kubernetes.io/arch"],
        "amd64"
    );
    assert_eq!(
        tpl.metadata.unwrap().annotations.unwrap()["arch.noe.adevinta.com/platforms"],
        "amd64,arm64"
    );

    let ops_c = values(&with_prefix(ops, "/spec/jobTemplate/spec/template"));
    assert_minimal(&cronjob, &ops_c);
    let patched: CronJob = serde_json::from_value(apply(&cronjob, &ops_c)).unwrap();
    let tpl = patched.spec.unwrap().job_template.spec.unwrap().template;
    assert_eq!(
        tpl.spec.unwrap().node_selector.unwrap()["kubernetes.io/arch"],
        "amd64"
    );
}

#[test]
fn pod_images_are_containers_then_init_containers_deduplicated() {
    let pod = json!({"spec": {
        "containers": [{"image": "a:1"}, {"image": ""}, {"image": "b:1"}, {"name": "no-image"}],
        "initContainers": [{"image": "b:1"}, {"image": "c:1"}],
        "ephemeralContainers": [{"image": "debug:1"}]
    }});
    assert_eq!(pod_images(&pod), ["a:1", "b:1", "c:1"]);
    assert!(pod_images(&json!({})).is_empty());
    assert!(pod_images(&json!({"spec": {"containers": null}})).is_empty());
}

#[test]
fn should_skip_and_needs_lookups() {
    let table: &[(Value, Option<SkipReason>, bool)] = &[
        (
            json!({"spec": {"containers": [{"image": "a"}]}}),
            None,
            true,
        ),
        (
            json!({"spec": {"nodeName": "n", "containers": [{"image": "a"}]}}),
            Some(SkipReason::NodeName),
            false,
        ),
        (
            json!({"spec": {"nodeName": "", "containers": [{"image": "a"}]}}),
            None,
            true,
        ),
        (
            json!({"metadata": {"labels": {"arch.noe.adevinta.com/skip": "true"}}, "spec": {"containers": [{"image": "a"}]}}),
            Some(SkipReason::SkipLabel),
            false,
        ),
        (
            json!({"spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"}, "containers": [{"image": "a"}]}}),
            None,
            false,
        ),
        (json!({"spec": {"containers": []}}), None, false),
        (
            json!({"metadata": {"annotations": {"arch.noe.adevinta.com/platforms": "arm64"}},
                "spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"}, "containers": [{"image": "a"}]}}),
            None,
            true,
        ),
    ];
    for (pod, skip, needs) in table {
        assert_eq!(should_skip(pod), *skip, "{pod}");
        assert_eq!(needs_lookups(pod), *needs, "{pod}");
    }
}

#[test]
fn policies_validate() {
    assert_eq!(Policy::default().validate(), Ok(()));
    let schedulable = ["arm64".to_owned()].into_iter().collect();
    let bad = Policy {
        schedulable_archs: schedulable,
        ..Policy::default()
    };
    assert_eq!(
        bad.validate(),
        Err(PolicyError::PreferredNotSchedulable {
            arch: "amd64".into(),
            schedulable: vec!["arm64".into()],
        })
    );
    let no_pref = Policy {
        preferred_arch: Some(String::new()),
        ..bad
    };
    assert_eq!(no_pref.validate(), Ok(()));
    for weight in [0, 101, -1] {
        assert_eq!(
            Policy {
                preference_weight: weight,
                ..Policy::default()
            }
            .validate(),
            Err(PolicyError::Weight(weight))
        );
    }
    for weight in [1, 100] {
        assert_eq!(
            Policy {
                preference_weight: weight,
                ..Policy::default()
            }
            .validate(),
            Ok(())
        );
    }
    let bad_toleration = Policy {
        arch_tolerations: BTreeMap::from([("arm64".to_owned(), vec![json!("x")])]),
        ..Policy::default()
    };
    assert!(matches!(
        bad_toleration.validate(),
        Err(PolicyError::Toleration { arch, .. }) if arch == "arm64"
    ));
    assert!(Policy {
        on_lookup_error: OnLookupError::Deny,
        ..Policy::default()
    }
    .validate()
    .is_ok());
}
