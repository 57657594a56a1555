//! Multi-step decision flows (reinvocation after a sidecar injector, idempotence), workload pod
//! templates through `patch::with_prefix`, what [`Plan`] reads of a pod, the ephemeral container
//! check, bounded warnings and the documented skip reasons.

use super::helpers::{
    apply, assert_constrained, assert_minimal, decide_pod, lookups, patched_pod, values,
};
use k8s_openapi::api::{apps::v1::Deployment, batch::v1::CronJob};
use noe_core::decide::{
    check_ephemeral, ephemeral_images, plan, ArchSettings, Decision, DenyReason, Facts, Lookups,
    Mode, NodeFacts, OnContradiction, OnLookupError, Policy, PreferenceMode, Signal, SkipReason,
    Verdict, MAX_WARNINGS_CHARS, MAX_WARNING_CHARS,
};
use noe_core::patch::{pod_template_pointer, with_prefix};
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

fn settings(arch: &str, labels: &[(&str, &str)]) -> (String, ArchSettings) {
    let settings = ArchSettings {
        tolerations: vec![json!({"key": "arch", "value": arch, "effect": "NoSchedule"})],
        node_labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    };
    (arch.to_owned(), settings)
}

fn policy(mode: PreferenceMode) -> Policy {
    Policy {
        preference_mode: mode,
        match_node_labels: vec!["team".to_owned()],
        architectures: [settings("amd64", &[]), settings("arm64", &[])].into(),
        ..Policy::default()
    }
}

fn decide(pod: &Value, lookups: &Lookups, policy: &Policy) -> Decision {
    decide_pod(pod, lookups, &Facts::default(), policy)
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
            let (raw, _) = patched_pod(pod, &decision.verdict);
            assert_constrained(pod, &raw, common);
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
            reason: DenyReason::NoCommonArch,
            message:
                "no architecture is supported by every container: a:1 [linux/amd64], mesh:2 [linux/arm64]"
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

    let ops_d = values(&with_prefix(
        ops.clone(),
        pod_template_pointer("Deployment").unwrap(),
    ));
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

    let ops_c = values(&with_prefix(ops, pod_template_pointer("CronJob").unwrap()));
    assert_minimal(&cronjob, &ops_c);
    let patched: CronJob = serde_json::from_value(apply(&cronjob, &ops_c)).unwrap();
    let tpl = patched.spec.unwrap().job_template.spec.unwrap().template;
    assert_eq!(
        tpl.spec.unwrap().node_selector.unwrap()["kubernetes.io/arch"],
        "amd64"
    );
}

#[test]
fn reinvocation_with_per_arch_node_labels_rewrites_our_terms_and_copies() {
    let policy = Policy {
        preferred_arch: None,
        architectures: [
            settings("amd64", &[]),
            settings("arm64", &[("pool", "graviton")]),
        ]
        .into(),
        ..Policy::default()
    };
    let zone = json!({"key": "zone", "operator": "In", "values": ["a"]});
    let pod = json!({"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "app", "image": "app:1"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [zone]}]}}}}});
    let (mut pod, common) = admit(&pod, &policy);
    assert_eq!(common, ["amd64", "arm64"]);
    let terms = |pod: &Value| {
        pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"]
            .clone()
    };
    assert_eq!(terms(&pod).as_array().unwrap().len(), 2, "{}", terms(&pod));
    assert_up_to_date(&pod, &policy);

    // The sidecar runs on arm64 only: one term, the user's zone AND arm64 AND its pool label.
    inject_sidecar(&mut pod);
    let (pod, common) = admit(&pod, &policy);
    assert_eq!(common, ["arm64"]);
    assert_eq!(
        terms(&pod),
        json!([{"matchExpressions": [zone,
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
            {"key": "pool", "operator": "In", "values": ["graviton"]}]}])
    );
    assert_up_to_date(&pod, &policy);
}

#[test]
fn plan_reads_images_once_in_order() {
    let policy = Policy::default();
    let pod = json!({"spec": {
        "containers": [{"image": "a:1"}, {"image": ""}, {"image": "b:1"}, {"name": "no-image"}],
        "initContainers": [{"image": "b:1"}, {"image": "c:1"}],
        "ephemeralContainers": [{"image": "debug:1"}],
        "volumes": [{"name": "v", "image": {"reference": "data:1"}}, {"name": "w", "image": {"reference": "a:1"}},
                    {"name": "x", "emptyDir": {}}, {"name": "y", "image": {"reference": ""}}]
    }});
    assert_eq!(
        plan(&pod, &policy).images().collect::<Vec<_>>(),
        ["a:1", "b:1", "c:1", "data:1"]
    );
    // Past a few distinct images the duplicates are found by a set: the same answer.
    let many: Vec<Value> = (0..40)
        .map(|i| json!({"image": format!("img-{}:1", i % 13)}))
        .collect();
    let pod = json!({"spec": {"containers": many, "initContainers": [{"image": "img-3:1"}, {"image": "late:1"}],
                              "volumes": [{"name": "v", "image": {"reference": "img-12:1"}}]}});
    let mut want: Vec<String> = (0..13).map(|i| format!("img-{i}:1")).collect();
    want.push("late:1".to_owned());
    assert_eq!(plan(&pod, &policy).images().collect::<Vec<_>>(), want);
    let table: &[(Value, Option<SkipReason>, usize)] = &[
        (json!({}), None, 0),
        (json!({"spec": {"containers": null}}), None, 0),
        (
            json!({"spec": {"nodeName": "n", "containers": [{"image": "a"}]}}),
            Some(SkipReason::NodeName),
            0,
        ),
        (
            json!({"spec": {"nodeName": "", "containers": [{"image": "a"}]}}),
            None,
            1,
        ),
        (
            json!({"metadata": {"labels": {"arch.noe.adevinta.com/skip": "true"}},
                   "spec": {"containers": [{"image": "a"}]}}),
            Some(SkipReason::SkipLabel),
            0,
        ),
        // A pod that pins its arch is looked up: its images are checked against its pin.
        (
            json!({"spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"}, "containers": [{"image": "a"}]}}),
            None,
            1,
        ),
        (
            json!({"spec": {"containers": [{"image": "a"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{}]}}}}}),
            Some(SkipReason::EmptyNodeSelectorTerms),
            0,
        ),
    ];
    for (pod, skip, images) in table {
        let plan = plan(pod, &policy);
        assert_eq!(plan.skip_reason(), *skip, "{pod}");
        assert_eq!(plan.images().count(), *images, "{pod}");
    }
}

#[test]
fn ephemeral_images_are_the_new_debug_containers() {
    let old = json!({"spec": {"ephemeralContainers": [{"name": "d1", "image": "debug:1"}]}});
    let new = json!({"spec": {"ephemeralContainers": [
        {"name": "d1", "image": "debug:1"}, {"name": "d2", "image": "busybox:1"},
        {"name": "d3", "image": "busybox:1"}, {"name": "d4", "image": ""}]}});
    assert_eq!(ephemeral_images(&new, Some(&old)), ["busybox:1"]);
    assert_eq!(ephemeral_images(&new, None), ["debug:1", "busybox:1"]);
    assert!(ephemeral_images(&json!({}), None).is_empty());
}

#[test]
fn ephemeral_containers_are_checked_against_the_node() {
    let node = |arch: Option<&str>, os: Option<&str>| Facts {
        node: Some(NodeFacts {
            arch: arch.map(str::to_owned),
            os: os.map(str::to_owned),
            windows_build: None,
        }),
        ..Facts::default()
    };
    let lookups = lookups(&[
        ("busybox:1", Ok(&["linux/amd64", "linux/arm64"])),
        ("amd-tool:1", Ok(&["linux/amd64"])),
        ("win-tool:1", Ok(&["windows/arm64"])),
        ("gone:1", Err("not found")),
        ("neutral:1", Ok(&["*"])),
    ]);
    let deny = Policy {
        on_contradiction: OnContradiction::Deny,
        ..Policy::default()
    };
    let warn = Policy::default();
    let unchanged = Verdict::Unchanged {
        reason: SkipReason::NodeName,
    };
    let table: Vec<(&str, Facts, &Policy, Verdict, Vec<&str>)> = vec![
        ("busybox:1", node(Some("arm64"), Some("linux")), &deny, unchanged.clone(), vec![]),
        ("amd-tool:1", node(None, Some("linux")), &deny, unchanged.clone(), vec![]),
        ("amd-tool:1", Facts::default(), &deny, unchanged.clone(), vec![]),
        // A platform override's arch-neutral image runs on any node.
        ("neutral:1", node(Some("s390x"), Some("linux")), &deny, unchanged.clone(), vec![]),
        (
            "amd-tool:1",
            node(Some("arm64"), Some("linux")),
            &warn,
            unchanged.clone(),
            vec!["debug image amd-tool:1 [linux/amd64] cannot run on the pod's node (linux/arm64)"],
        ),
        (
            "amd-tool:1",
            node(Some("arm64"), None),
            &deny,
            Verdict::Deny {
                code: 403,
                reason: DenyReason::DebugImage,
                message: "debug container images cannot run on the pod's node (arm64): amd-tool:1 [linux/amd64]".into(),
            },
            vec![],
        ),
        (
            "win-tool:1",
            node(Some("arm64"), Some("linux")),
            &warn,
            unchanged.clone(),
            vec!["debug image win-tool:1 [windows/arm64] cannot run on the pod's node (linux/arm64)"],
        ),
        (
            "gone:1",
            node(Some("arm64"), Some("linux")),
            &deny,
            unchanged.clone(),
            vec!["debug image gone:1 not checked: could not find its platforms (not found)"],
        ),
    ];
    for (image, facts, policy, verdict, warnings) in table {
        let decision = check_ephemeral(&[image], &lookups, &facts, policy);
        assert_eq!(decision.verdict, verdict, "{image} on {facts:?}");
        assert_eq!(decision.warnings, warnings, "{image} on {facts:?}");
    }
    let on_lookup_deny = Policy {
        on_lookup_error: OnLookupError::Deny,
        ..Policy::default()
    };
    let decision = check_ephemeral(
        &["gone:1"],
        &lookups,
        &node(Some("arm64"), None),
        &on_lookup_deny,
    );
    assert!(matches!(
        decision.verdict,
        Verdict::Deny {
            reason: DenyReason::LookupFailed,
            ..
        }
    ));
    let audit = Policy {
        mode: Mode::Audit,
        ..deny
    };
    let decision = check_ephemeral(
        &["amd-tool:1"],
        &lookups,
        &node(Some("arm64"), None),
        &audit,
    );
    assert_eq!(decision.verdict, unchanged);
    assert_eq!(
        decision.warnings,
        ["audit: would deny: debug container images cannot run on the pod's node (arm64): amd-tool:1 [linux/amd64]"]
    );
    assert!(decision.signals.contains(&Signal::Contradiction));
}

/// A Windows pod is pinned to the Windows build its images were built for (the node label
/// carries `major.minor.build` of the image's `os.version`); images of different builds cannot
/// share a node.
#[test]
fn windows_pods_are_pinned_to_their_images_build() {
    let pod = json!({"metadata": {"name": "w"}, "spec": {"os": {"name": "windows"},
        "containers": [{"name": "app", "image": "win-app:1"}]}});
    let policy = Policy::default();
    let ltsc2022 = lookups(&[(
        "win-app:1",
        Ok(&["windows/amd64@10.0.20348.2227", "linux/amd64"]),
    )]);
    let decision = decide(&pod, &ltsc2022, &policy);
    let (patched, _) = patched_pod(&pod, &decision.verdict);
    let terms = patched
        .pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .unwrap_or_else(|| panic!("no required terms: {decision:?}"));
    let build = terms[0]["matchExpressions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["key"] == "node.kubernetes.io/windows-build")
        .unwrap_or_else(|| panic!("no windows-build expression: {terms}"));
    assert_eq!(build["operator"], "In");
    assert_eq!(build["values"], json!(["10.0.20348"]));

    // Two images of different builds: no node runs both.
    let mixed = json!({"metadata": {"name": "w"}, "spec": {"os": {"name": "windows"},
        "containers": [{"name": "app", "image": "win-app:1"}, {"name": "old", "image": "win-old:1"}]}});
    let both = lookups(&[
        ("win-app:1", Ok(&["windows/amd64@10.0.20348.2227"])),
        ("win-old:1", Ok(&["windows/amd64@10.0.17763.5329"])),
    ]);
    assert!(
        matches!(decide(&mixed, &both, &policy).verdict, Verdict::Deny { .. }),
        "images of two Windows builds were admitted"
    );
}

#[test]
fn warnings_are_bounded_for_pods_with_many_failing_images() {
    let images: Vec<String> = (0..300)
        .map(|i| format!("registry.example.com/{}/image-{i}:1", "x".repeat(200)))
        .collect();
    let containers: Vec<Value> = images
        .iter()
        .map(|i| json!({"name": "c", "image": i}))
        .collect();
    let pod = json!({"spec": {"containers": containers}});
    let failing: Lookups = images
        .iter()
        .map(|i| {
            let error = noe_core::decide::LookupError::message("e".repeat(500));
            (i.clone(), Err(error))
        })
        .collect();
    for policy in [
        Policy::default(),
        Policy {
            on_lookup_error: OnLookupError::Deny,
            ..Policy::default()
        },
    ] {
        let decision = decide(&pod, &failing, &policy);
        assert!(decision
            .warnings
            .iter()
            .all(|w| w.chars().count() <= MAX_WARNING_CHARS));
        let total: usize = decision.warnings.iter().map(|w| w.chars().count()).sum();
        assert!(total <= MAX_WARNINGS_CHARS, "{total}");
        if let Verdict::Deny { message, .. } = &decision.verdict {
            assert!(message.chars().count() <= noe_core::decide::MAX_MESSAGE_CHARS);
        }
    }
    // Every failed image is still counted (metrics and logs), once.
    let decision = decide(&pod, &failing, &Policy::default());
    let counted = decision
        .signals
        .iter()
        .filter(|s| matches!(s, Signal::LookupFailed { .. }))
        .count();
    assert_eq!(counted, images.len());
}

#[test]
fn every_skip_reason_is_documented() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md"),
    )
    .unwrap();
    for reason in SkipReason::ALL {
        assert!(
            doc.contains(&format!("`{}`", reason.as_str())),
            "docs/configuration.md does not list the skip reason {:?}",
            reason.as_str()
        );
    }
    for reason in [
        DenyReason::NoCommonArch,
        DenyReason::LookupFailed,
        DenyReason::Contradiction,
        DenyReason::WindowsBuild,
        DenyReason::DebugImage,
    ] {
        assert!(
            doc.contains(&format!("`deny:{}`", reason.as_str())),
            "docs/configuration.md does not list the audit value deny:{}",
            reason.as_str()
        );
    }
}
