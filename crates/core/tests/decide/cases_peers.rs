//! The decision table of the rules from our peers (the multiarch-tuning-operator, tolerable,
//! kube-arch-webhook) and our own design (docs/architecture.md, "The decision").

use noe_core::decide::{
    selector, DenyReason, Facts, Mode, OnContradiction, OnLookupError, Policy, PreferenceMode,
    Signal, SkipReason,
};
use serde_json::json;

use super::helpers::lookups;
use super::runner::*;

fn two_containers() -> serde_json::Value {
    pod(
        json!({"spec": {"containers": [{"name": "app", "image": "app:1"}, {"name": "s", "image": "sidecar:2"}]}}),
    )
}

fn namespace_prefers(arch: &str) -> Facts {
    Facts {
        namespace_preferred_arch: Some(arch.to_owned()),
        ..Facts::default()
    }
}

fn fallback(arch: Option<&str>, policy: Policy) -> Policy {
    Policy {
        on_lookup_error: OnLookupError::Fallback,
        fallback_arch: arch.map(str::to_owned),
        ..policy
    }
}

fn audit() -> Policy {
    Policy {
        mode: Mode::Audit,
        ..Policy::default()
    }
}

fn audit_annotation(value: &str) -> serde_json::Value {
    add(
        "/metadata/annotations",
        json!({"arch.noe.adevinta.com/audit": value}),
    )
}

fn daemonset_owner(controller: bool) -> serde_json::Value {
    json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": controller}])
}

fn node_pin() -> serde_json::Value {
    json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}}})
}

pub fn cases() -> Vec<Case> {
    let arm_pool = || architectures(&[("amd64", &[]), ("arm64", &[("pool", "graviton")])]);
    vec![
        // ---- Step 2: only some terms pin the arch (terms are ORed) ----
        case("some terms pin the arch: the others get the common set, no hard preference, a soft one",
            pod(json!({"spec": {"affinity": required(vec![
                vec![expr("foo", "In", &["bar"]), arch_in(&["s390x"])],
                vec![expr("baz", "In", &["foo"])]])}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy::default(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add(&format!("{REQ}/1/matchExpressions/-"), arch_in(&["amd64", "arm64"])),
                add(PREF, json!([pref_term("amd64", 50)])),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::PREFERRED_AFFINITY)]),
        case("some terms pin the arch, no preference: only the other terms change",
            pod(json!({"spec": {"affinity": required(vec![
                vec![expr("some-other-label", "In", &["value"])],
                vec![arch_in(&["amd64"])]])}})),
            lookups(&[("app:1", Ok(MULTI))]), no_pref(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add(&format!("{REQ}/0/matchExpressions/-"), arch_in(&["amd64", "arm64"])),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),
        case("every term pins the arch: skipped",
            pod(json!({"spec": {"affinity": required(vec![
                vec![expr("foo", "In", &["bar"]), arch_in(&["arm64"])],
                vec![expr("kubernetes.io/arch", "NotIn", &["s390x"])]])}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy::default(),
            Expect::Unchanged(SkipReason::AffinityLabelSelector))
            .signals(vec![skipped(SkipReason::AffinityLabelSelector)]),
        case("an empty term does not count: the only other term pins the arch, skipped",
            pod(json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{}, {"matchExpressions": [arch_in(&["arm64"])]}]}}}}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy::default(),
            Expect::Unchanged(SkipReason::AffinityLabelSelector))
            .signals(vec![skipped(SkipReason::AffinityLabelSelector)]),

        // ---- Step 2: DaemonSet pods ----
        case("matchFields metadata.name without a DaemonSet owner: constrained, the term gets the expression",
            pod(json!({"spec": {"affinity": node_pin()}})),
            lookups(&[("app:1", Ok(MULTI))]), no_pref(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add(&format!("{REQ}/0/matchExpressions"), json!([arch_in(&["amd64", "arm64"])])),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),
        case("a DaemonSet owner that is not the controller: not a DaemonSet pod",
            pod(json!({"metadata": {"ownerReferences": daemonset_owner(false)}, "spec": {"affinity": node_pin()}})),
            lookups(&[("app:1", Ok(MULTI))]), no_pref(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add(&format!("{REQ}/0/matchExpressions"), json!([arch_in(&["amd64", "arm64"])])),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),
        case("a DaemonSet owner without the node pin: not a DaemonSet pod",
            pod(json!({"metadata": {"ownerReferences": daemonset_owner(true)}})),
            lookups(&[("app:1", Ok(MULTI))]), no_pref(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/affinity", affinity(&["amd64", "arm64"])),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),
        case("DaemonSet pod: skipped, tolerations of the archs its images support",
            pod(json!({"metadata": {"ownerReferences": daemonset_owner(true)}, "spec": {"affinity": node_pin()}})),
            lookups(&[("app:1", Ok(MULTI))]), tolerations_policy(None),
            Expect::Patch(&[], vec![
                add("/spec/tolerations", json!([toleration("amd64"),
                    {"key": "arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}])),
            ])).signals(vec![skipped(SkipReason::AffinityFieldSelector)]),

        // ---- Step 3: image volumes, images without platforms ----
        case("an image volume is looked up; its platforms narrow the set",
            pod(json!({"spec": {"volumes": [{"name": "v", "image": {"reference": "data:1"}}]}})),
            lookups(&[("app:1", Ok(MULTI)), ("data:1", Ok(ARM))]), Policy::default(),
            Expect::Patch(&["arm64"], vec![
                add("/spec/affinity", affinity(&["arm64"])),
                annotations("arm64"),
            ])).signals(vec![not_available("amd64"), injected(selector::AFFINITY)]),
        case("an image volume without platforms (an OCI artifact) constrains nothing",
            pod(json!({"spec": {"volumes": [{"name": "v", "image": {"reference": "data:1"}},
                                            {"name": "e", "emptyDir": {}}]}})),
            lookups(&[("app:1", Ok(MULTI)), ("data:1", Ok(&[]))]), Policy::default(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/nodeSelector", json!({"kubernetes.io/arch": "amd64"})),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::PREFERRED)]),
        case("a container image without platforms is a failed lookup, never assumed amd64",
            pod(json!({"spec": {"volumes": [{"name": "v", "image": {"reference": "app:1"}}]}})),
            lookups(&[("app:1", Ok(&[]))]), Policy::default(),
            Expect::Unchanged(SkipReason::LookupFailed))
            .warn(&["pod not constrained to an architecture: could not find the platforms of app:1 (the registry lists no platform for it)"])
            .signals(vec![failed("app:1", "the registry lists no platform for it"), Signal::FailedOpen,
                          skipped(SkipReason::LookupFailed)]),

        case("an image a platform override declares arch-neutral (\"*\") constrains nothing",
            two_containers(),
            lookups(&[("app:1", Ok(MULTI)), ("sidecar:2", Ok(&["*"]))]), Policy::default(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/nodeSelector", json!({"kubernetes.io/arch": "amd64"})),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::PREFERRED)]),
        case("every image arch-neutral by override: nothing to decide",
            pod(json!({})), lookups(&[("app:1", Ok(&["*"]))]), Policy::default(),
            Expect::Unchanged(SkipReason::NoImages))
            .signals(vec![skipped(SkipReason::NoImages)]),
        case("a pinned pod with an arch-neutral image: no contradiction",
            pod(json!({"spec": {"nodeSelector": {"kubernetes.io/arch": "s390x"}}})),
            lookups(&[("app:1", Ok(&["*"]))]), Policy::default(),
            Expect::Unchanged(SkipReason::NodeSelector))
            .signals(vec![skipped(SkipReason::NodeSelector)]),

        // ---- Step 5: the fallback arch ----
        case("fallback: an image that cannot be found is taken to support only the fallback arch",
            two_containers(),
            lookups(&[("app:1", Ok(MULTI)), ("sidecar:2", Err("unauthorized"))]),
            fallback(Some("amd64"), Policy::default()),
            Expect::Patch(&["amd64"], vec![
                add("/spec/nodeSelector", json!({"kubernetes.io/arch": "amd64"})),
                annotations("amd64"),
            ])).warn(&["image sidecar:2 taken to support only amd64: could not find its platforms (unauthorized)"])
            .signals(vec![failed("sidecar:2", "unauthorized"), injected(selector::PREFERRED)]),
        case("fallback: every lookup failed, the pod is constrained to the fallback arch",
            pod(json!({})), lookups(&[("app:1", Err("timeout"))]), fallback(Some("arm64"), no_pref()),
            Expect::Patch(&["arm64"], vec![
                add("/spec/affinity", affinity(&["arm64"])),
                annotations("arm64"),
            ])).warn(&["image app:1 taken to support only arm64: could not find its platforms (timeout)"])
            .signals(vec![failed("app:1", "timeout"), injected(selector::AFFINITY)]),
        case("fallback arch outside the other images' set: denied, the assumption named",
            two_containers(),
            lookups(&[("app:1", Ok(AMD)), ("sidecar:2", Err("unauthorized"))]),
            fallback(Some("arm64"), Policy::default()),
            Expect::Deny(DenyReason::NoCommonArch,
                "no architecture is supported by every container: app:1 [linux/amd64], sidecar:2 [assumed arm64]"))
            .warn(&["image sidecar:2 taken to support only arm64: could not find its platforms (unauthorized)"])
            .signals(vec![failed("sidecar:2", "unauthorized")]),
        case("fallback without a fallback arch: as ignore-image",
            two_containers(),
            lookups(&[("app:1", Ok(MULTI)), ("sidecar:2", Err("unauthorized"))]),
            fallback(None, Policy::default()),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/nodeSelector", json!({"kubernetes.io/arch": "amd64"})),
                annotations("amd64,arm64"),
            ])).warn(&["image sidecar:2 ignored for architecture selection: could not find its platforms (unauthorized)"])
            .signals(vec![failed("sidecar:2", "unauthorized"), injected(selector::PREFERRED)]),

        // ---- Step 6: the denial shows what the images really have ----
        case("denial names the platforms each image really has, and the schedulable list",
            pod(json!({})), lookups(&[("app:1", Ok(&["linux/s390x", "linux/arm/v7"]))]),
            Policy { preferred_arch: None, schedulable_archs: set(&["amd64", "arm64"]), ..Policy::default() },
            Expect::Deny(DenyReason::NoCommonArch,
                "no architecture is supported by every container: app:1 [linux/s390x, linux/arm/v7] (schedulable: amd64, arm64)")),

        // ---- Step 6b: the pod's own constraint contradicts its images ----
        case("pinned to arm64 by nodeSelector, image amd64 only: a warning naming the image",
            pod(json!({"spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"}}})),
            lookups(&[("app:1", Ok(AMD))]), Policy::default(),
            Expect::Unchanged(SkipReason::NodeSelector))
            .warn(&["image app:1 [linux/amd64] cannot run on the architectures this pod selects"])
            .signals(vec![Signal::Contradiction, skipped(SkipReason::NodeSelector)]),
        case("contradiction with --on-contradiction=deny: denied",
            pod(json!({"spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"}}})),
            lookups(&[("app:1", Ok(AMD))]),
            Policy { on_contradiction: OnContradiction::Deny, ..Policy::default() },
            Expect::Deny(DenyReason::Contradiction,
                "no architecture this pod selects is supported by every image: app:1 [linux/amd64]"))
            .signals(vec![Signal::Contradiction]),
        case("terms that exclude the image's only arch (NotIn): a warning",
            pod(json!({"spec": {"affinity": required(vec![vec![expr("kubernetes.io/arch", "NotIn", &["amd64"])]])}})),
            lookups(&[("app:1", Ok(AMD))]), Policy::default(),
            Expect::Unchanged(SkipReason::AffinityLabelSelector))
            .warn(&["image app:1 [linux/amd64] cannot run on the architectures this pod selects"])
            .signals(vec![Signal::Contradiction, skipped(SkipReason::AffinityLabelSelector)]),
        case("each image runs on a selected arch, not the same one: one warning naming them all",
            pod(json!({"spec": {"containers": [{"name": "app", "image": "app:1"}, {"name": "s", "image": "sidecar:2"}],
                                "affinity": affinity(&["amd64", "arm64"])}})),
            lookups(&[("app:1", Ok(AMD)), ("sidecar:2", Ok(ARM))]), Policy::default(),
            Expect::Unchanged(SkipReason::AffinityLabelSelector))
            .warn(&["no architecture this pod selects is supported by every image: app:1 [linux/amd64], sidecar:2 [linux/arm64]"])
            .signals(vec![Signal::Contradiction, skipped(SkipReason::AffinityLabelSelector)]),
        case("a pinned pod whose lookups fail: no check, never denied for it",
            pod(json!({"spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"}}})),
            lookups(&[("app:1", Err("timeout"))]),
            Policy { on_lookup_error: OnLookupError::Deny, ..Policy::default() },
            Expect::Unchanged(SkipReason::NodeSelector))
            .signals(vec![failed("app:1", "timeout"), skipped(SkipReason::NodeSelector)]),

        // ---- Step 7: the namespace's preference, the pod's own preference ----
        case("the namespace's preferred arch is used when the pod has none",
            pod(json!({})), lookups(&[("app:1", Ok(MULTI))]), Policy::default(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/nodeSelector", json!({"kubernetes.io/arch": "arm64"})),
                annotations("amd64,arm64"),
            ])).facts(namespace_prefers("arm64")).signals(vec![injected(selector::PREFERRED)]),
        case("the pod's label beats the namespace's",
            pod(json!({"metadata": {"labels": {"arch.noe.adevinta.com/preferred": "amd64"}}})),
            lookups(&[("app:1", Ok(MULTI))]), no_pref(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/nodeSelector", json!({"kubernetes.io/arch": "amd64"})),
                annotations("amd64,arm64"),
            ])).facts(namespace_prefers("arm64")).signals(vec![injected(selector::PREFERRED)]),
        case("a namespace preference that is not schedulable: the flag's, silently",
            pod(json!({})), lookups(&[("app:1", Ok(MULTI))]),
            Policy { schedulable_archs: set(&["amd64", "arm64"]), ..Policy::default() },
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/nodeSelector", json!({"kubernetes.io/arch": "amd64"})),
                annotations("amd64,arm64"),
            ])).facts(namespace_prefers("s390x")).signals(vec![injected(selector::PREFERRED)]),
        case("a namespace preference the images lack: affinity, metric, no warning",
            pod(json!({})), lookups(&[("app:1", Ok(AMD))]), no_pref(),
            Expect::Patch(&["amd64"], vec![
                add("/spec/affinity", affinity(&["amd64"])),
                annotations("amd64"),
            ])).facts(namespace_prefers("arm64"))
            .signals(vec![not_available("arm64"), injected(selector::AFFINITY)]),
        case("the pod's own preferred arch term: no preference added in preferred mode either",
            pod(json!({"spec": {"affinity": {"nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [pref_term("arm64", 10)]}}}})),
            lookups(&[("app:1", Ok(MULTI))]),
            Policy { preference_mode: PreferenceMode::Preferred, ..Policy::default() },
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution",
                    json!({"nodeSelectorTerms": [{"matchExpressions": [arch_in(&["amd64", "arm64"])]}]})),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),

        // ---- Step 9: tolerations of pinned pods, node labels per arch ----
        case("a pod pinned to arm64 gets arm64's tolerations",
            pod(json!({"spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"}}})),
            lookups(&[("app:1", Ok(MULTI))]), tolerations_policy(None),
            Expect::Patch(&[], vec![
                add("/spec/tolerations", json!([{"key": "arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}])),
            ])).signals(vec![skipped(SkipReason::NodeSelector)]),
        case("a pod pinned to arm64 gets arm64's node labels too, in its nodeSelector",
            pod(json!({"spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"}}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy { architectures: arm_pool(), ..no_pref() },
            Expect::Patch(&[], vec![
                add("/spec/nodeSelector/pool", json!("graviton")),
                add("/spec/tolerations", json!([toleration("arm64")])),
            ])).signals(vec![skipped(SkipReason::NodeSelector)]),
        case("a pod pinned by affinity whose nodeSelector sets a node label key: its value kept",
            pod(json!({"spec": {"nodeSelector": {"pool": "mine"}, "affinity": affinity(&["arm64"])}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy { architectures: arm_pool(), ..no_pref() },
            Expect::Patch(&[], vec![add("/spec/tolerations", json!([toleration("arm64")]))]))
            .signals(vec![skipped(SkipReason::AffinityLabelSelector)]),
        case("a pod pinned to two archs: tolerations of both, no node labels (one term per arch is the user's)",
            pod(json!({"spec": {"affinity": affinity(&["amd64", "arm64"])}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy { architectures: arm_pool(), ..no_pref() },
            Expect::Patch(&[], vec![add("/spec/tolerations", json!([toleration("amd64"), toleration("arm64")]))]))
            .signals(vec![skipped(SkipReason::AffinityLabelSelector)]),
        case("a pinned pod whose lookups failed: tolerations of the arch it names",
            pod(json!({"spec": {"affinity": affinity(&["amd64"])}})),
            lookups(&[("app:1", Err("timeout"))]), tolerations_policy(None),
            Expect::Patch(&[], vec![add("/spec/tolerations", json!([toleration("amd64")]))]))
            .signals(vec![failed("app:1", "timeout"), skipped(SkipReason::AffinityLabelSelector)]),
        case("a pod pinned to an arch its images lack: no toleration for it, a warning",
            pod(json!({"spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"}}})),
            lookups(&[("app:1", Ok(AMD))]), tolerations_policy(None),
            Expect::Unchanged(SkipReason::NodeSelector))
            .warn(&["image app:1 [linux/amd64] cannot run on the architectures this pod selects"])
            .signals(vec![Signal::Contradiction, skipped(SkipReason::NodeSelector)]),
        case("partly pinned: tolerations of the user's arch terms only where the images run",
            pod(json!({"spec": {"affinity": required(vec![
                vec![expr("foo", "In", &["bar"]), arch_in(&["s390x"])],
                vec![expr("baz", "In", &["foo"])]])}})),
            lookups(&[("app:1", Ok(MULTI))]),
            Policy { architectures: architectures(&[("amd64", &[]), ("arm64", &[]), ("s390x", &[])]), ..no_pref() },
            Expect::Patch(&["amd64", "arm64"], vec![
                add(&format!("{REQ}/1/matchExpressions/-"), arch_in(&["amd64", "arm64"])),
                add("/spec/tolerations", json!([toleration("amd64"), toleration("arm64")])),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),
        case("node labels of the one arch the pod may run on are ANDed into its term",
            pod(json!({})), lookups(&[("app:1", Ok(ARM))]),
            Policy { architectures: arm_pool(), ..no_pref() },
            Expect::Patch(&["arm64"], vec![
                add("/spec/affinity", required(vec![vec![arch_in(&["arm64"]), expr("pool", "In", &["graviton"])]])),
                add("/spec/tolerations", json!([toleration("arm64")])),
                annotations("arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),
        case("node labels with a nodeSelector pin: a required term of the pinned arch carries them",
            pod(json!({})), lookups(&[("app:1", Ok(MULTI))]),
            Policy { architectures: architectures(&[("amd64", &[("pool", "general")])]), ..Policy::default() },
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/nodeSelector", json!({"kubernetes.io/arch": "amd64"})),
                add("/spec/affinity", required(vec![vec![arch_in(&["amd64"]), expr("pool", "In", &["general"])]])),
                add("/spec/tolerations", json!([toleration("amd64")])),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::PREFERRED)]),
        case("several archs, one with node labels: one term per arch, the user's term copied",
            pod(json!({"spec": {"affinity": required(vec![vec![expr("zone", "In", &["a"])]])}})),
            lookups(&[("app:1", Ok(MULTI))]),
            Policy { architectures: arm_pool(), ..no_pref() },
            Expect::Patch(&["amd64", "arm64"], vec![
                add(&format!("{REQ}/0/matchExpressions/-"), arch_in(&["amd64"])),
                add(&format!("{REQ}/-"), json!({"matchExpressions": [
                    expr("zone", "In", &["a"]), arch_in(&["arm64"]), expr("pool", "In", &["graviton"])]})),
                add("/spec/tolerations", json!([toleration("amd64"), toleration("arm64")])),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),
        case("several archs with node labels and no term: the terms are created",
            pod(json!({})), lookups(&[("app:1", Ok(MULTI))]),
            Policy { architectures: architectures(&[("amd64", &[("pool", "general")]), ("arm64", &[("pool", "graviton")])]), ..no_pref() },
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/affinity", required(vec![
                    vec![arch_in(&["amd64"]), expr("pool", "In", &["general"])],
                    vec![arch_in(&["arm64"]), expr("pool", "In", &["graviton"])]])),
                add("/spec/tolerations", json!([toleration("amd64"), toleration("arm64")])),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),

        // ---- Audit mode ----
        case("audit: a patch is only reported, in the annotation and a warning",
            pod(json!({})), lookups(&[("app:1", Ok(MULTI))]), audit(),
            Expect::Patch(&[], vec![audit_annotation("patch:amd64,arm64")]))
            .warn(&["audit: would constrain to amd64,arm64"])
            .signals(vec![injected(selector::PREFERRED)]),
        case("audit: a denial is allowed, its reason reported",
            two_containers(), lookups(&[("app:1", Ok(AMD)), ("sidecar:2", Ok(ARM))]), audit(),
            Expect::Patch(&[], vec![audit_annotation("deny:no-common-arch")]))
            .warn(&["audit: would deny: no architecture is supported by every container: app:1 [linux/amd64], sidecar:2 [linux/arm64]"]),
        case("audit: a patch without an arch constraint is reported as patch",
            pod(json!({"spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"}}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy { mode: Mode::Audit, ..tolerations_policy(None) },
            Expect::Patch(&[], vec![audit_annotation("patch")]))
            .warn(&["audit: would patch the pod (no architecture constraint)"])
            .signals(vec![skipped(SkipReason::NodeSelector)]),
        case("audit: a pod enforcement leaves alone gets nothing",
            pod(json!({"spec": {"nodeName": "node-1"}})), lookups(&[]), audit(),
            Expect::Unchanged(SkipReason::NodeName)).signals(vec![skipped(SkipReason::NodeName)]),
    ]
}
