//! The decision table of noe's own behaviour (steps 1–10 in docs/architecture.md): input pod,
//! image platforms, policy → verdict, patch, warnings and signals.
//!
//! `noe:` lines compare with adevinta/noe (pkg/arch/hook.go); they feed docs/compatibility.md.

use noe_core::decide::{
    selector, DenyReason, OnLookupError, Policy, PreferenceMode, Signal, SkipReason,
};
use serde_json::json;

use super::helpers::lookups;
use super::runner::*;

pub fn cases() -> Vec<Case> {
    vec![
        // ---- Step 7: preferred arch, required mode (noe's behaviour) ----
        // noe: same nodeSelector; noe writes no platforms annotation.
        case("flag preference supported: nodeSelector, parents created whole",
            pod(json!({})), lookups(&[("app:1", Ok(MULTI))]), Policy::default(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/nodeSelector", json!({"kubernetes.io/arch": "amd64"})),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::PREFERRED)]),
        // noe: same affinity (as a new ORed term, see the AND case).
        case("no preference: required affinity created whole",
            pod(json!({})), lookups(&[("app:1", Ok(MULTI))]), no_pref(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/affinity", affinity(&["amd64", "arm64"])),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),
        // noe: same patch, but preferred_architecture_not_available_total is never incremented.
        case("flag preference unsupported: affinity, metric, no warning",
            pod(json!({})), lookups(&[("app:1", Ok(ARM))]), Policy::default(),
            Expect::Patch(&["arm64"], vec![
                add("/spec/affinity", affinity(&["arm64"])),
                annotations("arm64"),
            ])).signals(vec![not_available("amd64"), injected(selector::AFFINITY)]),
        // noe: same.
        case("label preference supported wins over the flag",
            pod(json!({"metadata": {"labels": {"arch.noe.adevinta.com/preferred": "arm64"}}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy::default(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/nodeSelector", json!({"kubernetes.io/arch": "arm64"})),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::PREFERRED)]),
        // noe: same warning, no metric.
        case("label preference unsupported by the images: affinity + warning",
            pod(json!({"metadata": {"labels": {"arch.noe.adevinta.com/preferred": "arm64"}}})),
            lookups(&[("app:1", Ok(AMD))]), Policy::default(),
            Expect::Patch(&["amd64"], vec![
                add("/spec/affinity", affinity(&["amd64"])),
                annotations("amd64"),
            ])).warn(&["could not select preferred arch: arm64"])
            .signals(vec![not_available("arm64"), injected(selector::AFFINITY)]),
        // noe: falls back to the flag silently (no warning).
        case("label preference not schedulable: flag used, warning",
            pod(json!({"metadata": {"labels": {"arch.noe.adevinta.com/preferred": "s390x"}}})),
            lookups(&[("app:1", Ok(MULTI))]),
            Policy { schedulable_archs: set(&["amd64", "arm64"]), ..Policy::default() },
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/nodeSelector", json!({"kubernetes.io/arch": "amd64"})),
                annotations("amd64,arm64"),
            ])).warn(&["could not select preferred arch: s390x"])
            .signals(vec![injected(selector::PREFERRED)]),
        // noe: an empty label counts as set: without a flag preference it warns
        // "could not select preferred arch: " (empty arch).
        case("empty preference label is unset",
            pod(json!({"metadata": {"labels": {"arch.noe.adevinta.com/preferred": ""}}})),
            lookups(&[("app:1", Ok(MULTI))]), no_pref(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/affinity", affinity(&["amd64", "arm64"])),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),

        // ---- Step 7: preferred mode (new in noe-rs) ----
        case("preferred mode: required In term + soft preference with the weight",
            pod(json!({})), lookups(&[("app:1", Ok(MULTI))]),
            Policy { preference_mode: PreferenceMode::Preferred, preference_weight: weight(30), ..Policy::default() },
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/affinity", json!({"nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [arch_in(&["amd64", "arm64"])]}]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [pref_term("amd64", 30)]}})),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::PREFERRED_AFFINITY)]),
        case("preferred mode, preference unsupported: required term only",
            pod(json!({})), lookups(&[("app:1", Ok(ARM))]),
            Policy { preference_mode: PreferenceMode::Preferred, ..Policy::default() },
            Expect::Patch(&["arm64"], vec![
                add("/spec/affinity", affinity(&["arm64"])),
                annotations("arm64"),
            ])).signals(vec![not_available("amd64"), injected(selector::AFFINITY)]),
        case("preferred mode with existing preferred terms: appended",
            pod(json!({"spec": {"affinity": {"nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": {
                    "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}}})),
            lookups(&[("app:1", Ok(MULTI))]),
            Policy { preference_mode: PreferenceMode::Preferred, ..Policy::default() },
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution",
                    json!({"nodeSelectorTerms": [{"matchExpressions": [arch_in(&["amd64", "arm64"])]}]})),
                add(&format!("{PREF}/-"), pref_term("amd64", 50)),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::PREFERRED_AFFINITY)]),

        // ---- Step 7: AND into every existing required term ----
        // noe: appends a new term `arch In [...]`; terms are ORed, so the pod may now run in any
        // zone, and the user's terms stay without an arch constraint.
        case("arch expression ANDed into every term; {} left alone; matchFields-only term too",
            pod(json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}],
                     "futureTermField": 1},
                    {},
                    {"matchExpressions": null,
                     "matchFields": [{"key": "spec.futureField", "operator": "In", "values": ["x"]}]}
                ]}}}}})),
            lookups(&[("app:1", Ok(MULTI))]), no_pref(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add(&format!("{REQ}/0/matchExpressions/-"), arch_in(&["amd64", "arm64"])),
                add(&format!("{REQ}/2/matchExpressions"), json!([arch_in(&["amd64", "arm64"])])),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),
        // noe: appends a term, turning the user's (invalid) empty list into a schedulable pod.
        case("explicit nodeSelectorTerms [] left untouched",
            pod(json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": []}}}}})),
            lookups(&[]), no_pref(),
            Expect::Unchanged(SkipReason::EmptyNodeSelectorTerms))
            .signals(vec![skipped(SkipReason::EmptyNodeSelectorTerms)]),
        // noe: appends an ORed term, making a pod that matches no node schedulable.
        case("only an empty {} term: left untouched",
            pod(json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [], "matchFields": null}]}}}}})),
            lookups(&[]), no_pref(),
            Expect::Unchanged(SkipReason::EmptyNodeSelectorTerms))
            .signals(vec![skipped(SkipReason::EmptyNodeSelectorTerms)]),
        case("required present with null term list: the list is added whole",
            pod(json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": null}}}}})),
            lookups(&[("app:1", Ok(MULTI))]), no_pref(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add(REQ, json!([{"matchExpressions": [arch_in(&["amd64", "arm64"])]}])),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),
        case("affinity with only podAntiAffinity: nodeAffinity added whole",
            pod(json!({"spec": {"affinity": {"podAntiAffinity": {"futureField": 1}}}})),
            lookups(&[("app:1", Ok(MULTI))]), no_pref(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/affinity/nodeAffinity", affinity(&["amd64", "arm64"])["nodeAffinity"].clone()),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),
        case("nodeAffinity with only a user preferred term: required added whole",
            pod(json!({"spec": {"affinity": {"nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [pref_term("arm64", 5)]}}}})),
            lookups(&[("app:1", Ok(MULTI))]), no_pref(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution",
                    json!({"nodeSelectorTerms": [{"matchExpressions": [arch_in(&["amd64", "arm64"])]}]})),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),

        // ---- Step 10: null / absent / present parents ----
        // noe: diffs a re-encoded typed Pod, which also removes fields newer than its client-go.
        case("null nodeSelector, affinity, annotations, tolerations: each added whole once",
            pod(json!({"metadata": {"annotations": null, "labels": {"team": "a"}},
                       "spec": {"nodeSelector": null, "affinity": null, "tolerations": null}})),
            lookups(&[("app:1", Ok(MULTI))]),
            Policy { match_node_labels: vec!["team".to_owned()], ..tolerations_policy(None) },
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/affinity", affinity(&["amd64", "arm64"])),
                add("/spec/nodeSelector", json!({"team": "a"})),
                add("/spec/tolerations", json!([
                    {"key": "arch", "value": "amd64", "effect": "NoSchedule"},
                    {"key": "arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}])),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::AFFINITY), node_match("team")]),
        case("present nodeSelector and annotations: single escaped keys added",
            pod(json!({"metadata": {"annotations": {"a/b": "c"}},
                       "spec": {"nodeSelector": {"disktype": "ssd"}}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy::default(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/nodeSelector/kubernetes.io~1arch", json!("amd64")),
                add(ANN, json!("amd64,arm64")),
            ])).signals(vec![injected(selector::PREFERRED)]),
        case("metadata without annotations, nodeSelector empty object",
            pod(json!({"spec": {"nodeSelector": {}}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy::default(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/nodeSelector/kubernetes.io~1arch", json!("amd64")),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::PREFERRED)]),

        // ---- Step 2: the pod constrains its arch itself ----
        // noe: same skip and reason label.
        case("nodeSelector kubernetes.io/arch: skipped",
            pod(json!({"spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"}}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy::default(),
            Expect::Unchanged(SkipReason::NodeSelector)).signals(vec![skipped(SkipReason::NodeSelector)]),
        case("nodeSelector beta.kubernetes.io/arch: skipped",
            pod(json!({"spec": {"nodeSelector": {"beta.kubernetes.io/arch": "arm64"}}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy::default(),
            Expect::Unchanged(SkipReason::NodeSelector)).signals(vec![skipped(SkipReason::NodeSelector)]),
        case("required expression on the beta arch label: skipped",
            pod(json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "beta.kubernetes.io/arch", "operator": "NotIn", "values": ["arm"]}]}]}}}}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy::default(),
            Expect::Unchanged(SkipReason::AffinityLabelSelector))
            .signals(vec![skipped(SkipReason::AffinityLabelSelector)]),
        // noe: pins the flag's amd64 with a nodeSelector, making the pod's own soft arm64
        // preference pointless.
        case("a preferred (soft) arch term is not a constraint, but the pod's own preference",
            pod(json!({"spec": {"affinity": {"nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [pref_term("arm64", 1)]}}}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy::default(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution",
                    json!({"nodeSelectorTerms": [{"matchExpressions": [arch_in(&["amd64", "arm64"])]}]})),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),
        // noe: same skip, but with nodeSelector nil it copies the label as a new ORed required
        // term `team In [a]`, which un-pins the DaemonSet pod from its node.
        case("DaemonSet pod (owner + matchFields metadata.name): skipped, matchNodeLabels into nodeSelector",
            pod(json!({"metadata": {"labels": {"team": "a"}, "ownerReferences": [
                           {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": true}]},
                       "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}}}}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy { match_node_labels: vec!["team".to_owned()], ..Policy::default() },
            Expect::Patch(&[], vec![add("/spec/nodeSelector", json!({"team": "a"}))]))
            .signals(vec![skipped(SkipReason::AffinityFieldSelector), node_match("team")]),

        // ---- Step 1 ----
        // noe: same (no metric).
        case("nodeName set: unchanged, matchNodeLabels not applied",
            pod(json!({"metadata": {"labels": {"team": "a"}}, "spec": {"nodeName": "node-1"}})),
            lookups(&[]), Policy { match_node_labels: vec!["team".to_owned()], ..Policy::default() },
            Expect::Unchanged(SkipReason::NodeName)).signals(vec![skipped(SkipReason::NodeName)]),
        // noe: has no skip label (only the chart's objectSelector).
        case("skip label true: unchanged",
            pod(json!({"metadata": {"labels": {"arch.noe.adevinta.com/skip": "true"}}})),
            lookups(&[]), Policy::default(),
            Expect::Unchanged(SkipReason::SkipLabel)).signals(vec![skipped(SkipReason::SkipLabel)]),
        case("skip label other than true: processed",
            pod(json!({"metadata": {"labels": {"arch.noe.adevinta.com/skip": "false"}}})),
            lookups(&[("app:1", Ok(AMD))]), Policy::default(),
            Expect::Patch(&["amd64"], vec![
                add("/spec/nodeSelector", json!({"kubernetes.io/arch": "amd64"})),
                annotations("amd64"),
            ])).signals(vec![injected(selector::PREFERRED)]),

        // ---- Step 3: images ----
        // noe: same (containers + initContainers).
        case("init container narrows the set",
            pod(json!({"spec": {"initContainers": [{"name": "init", "image": "init:1"}]}})),
            lookups(&[("app:1", Ok(MULTI)), ("init:1", Ok(ARM))]), Policy::default(),
            Expect::Patch(&["arm64"], vec![
                add("/spec/affinity", affinity(&["arm64"])),
                annotations("arm64"),
            ])).signals(vec![not_available("amd64"), injected(selector::AFFINITY)]),
        // noe: looks every container up, duplicates included.
        case("ephemeral containers ignored, duplicates and empty images dropped",
            pod(json!({"spec": {
                "containers": [{"name": "a", "image": "app:1"}, {"name": "b", "image": "app:1"},
                               {"name": "c", "image": ""}],
                "ephemeralContainers": [{"name": "debug", "image": "debug:1"}]}})),
            lookups(&[("app:1", Ok(AMD))]), Policy::default(),
            Expect::Patch(&["amd64"], vec![
                add("/spec/nodeSelector", json!({"kubernetes.io/arch": "amd64"})),
                annotations("amd64"),
            ])).signals(vec![injected(selector::PREFERRED)]),
        // noe: same (no metric, matchNodeLabels applied).
        case("no image: matchNodeLabels only",
            pod(json!({"metadata": {"labels": {"team": "a"}},
                       "spec": {"containers": [{"name": "c", "image": ""}]}})),
            lookups(&[]), Policy { match_node_labels: vec!["team".to_owned()], ..Policy::default() },
            Expect::Patch(&[], vec![add("/spec/nodeSelector", json!({"team": "a"}))]))
            .signals(vec![skipped(SkipReason::NoImages), node_match("team")]),

        // ---- Step 4: OS and platform filtering ----
        // noe: filters by --system-os only, so a Windows pod's Windows image has no usable
        // platform and the pod is denied.
        case("Windows pod (spec.os.name) with a Windows image",
            pod(json!({"spec": {"os": {"name": "windows"}, "containers": [{"name": "w", "image": "win:1"}]}})),
            lookups(&[("win:1", Ok(&["windows/amd64", "linux/arm64"]))]), Policy::default(),
            Expect::Patch(&["amd64"], vec![
                add("/spec/nodeSelector", json!({"kubernetes.io/arch": "amd64"})),
                annotations("amd64"),
            ])).signals(vec![injected(selector::PREFERRED)]),
        case("pod OS from a kubernetes.io/os nodeSelector",
            pod(json!({"spec": {"nodeSelector": {"kubernetes.io/os": "windows"},
                                "containers": [{"name": "w", "image": "win:1"}]}})),
            lookups(&[("win:1", Ok(&["windows/amd64", "linux/arm64"]))]), no_pref(),
            Expect::Patch(&["amd64"], vec![
                add("/spec/affinity", affinity(&["amd64"])),
                annotations("amd64"),
            ])).signals(vec![injected(selector::AFFINITY)]),
        case("pod OS from a required kubernetes.io/os expression; arch ANDed into that term",
            pod(json!({"spec": {"containers": [{"name": "w", "image": "win:1"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]}]}]}}}}})),
            lookups(&[("win:1", Ok(&["windows/arm64", "linux/amd64"]))]), Policy::default(),
            Expect::Patch(&["arm64"], vec![
                add(&format!("{REQ}/0/matchExpressions/-"), arch_in(&["arm64"])),
                annotations("arm64"),
            ])).signals(vec![not_available("amd64"), injected(selector::AFFINITY)]),
        // noe: same.
        case("empty OS counts as a match; other OS ignored",
            pod(json!({})), lookups(&[("app:1", Ok(&["/arm64", "windows/amd64"]))]), Policy::default(),
            Expect::Patch(&["arm64"], vec![
                add("/spec/affinity", affinity(&["arm64"])),
                annotations("arm64"),
            ])).signals(vec![not_available("amd64"), injected(selector::AFFINITY)]),
        // noe: same.
        case("variants ignored",
            pod(json!({"spec": {"containers": [{"name": "a", "image": "app:1"}, {"name": "b", "image": "b:1"}]}})),
            lookups(&[("app:1", Ok(&["linux/arm/v7", "linux/arm/v6", "linux/arm64/v8"])), ("b:1", Ok(&["linux/arm"]))]),
            Policy::default(),
            Expect::Patch(&["arm"], vec![
                add("/spec/affinity", affinity(&["arm"])),
                annotations("arm"),
            ])).signals(vec![not_available("amd64"), injected(selector::AFFINITY)]),
        // noe: same.
        case("unschedulable archs ignored",
            pod(json!({})), lookups(&[("app:1", Ok(&["linux/s390x", "linux/arm64", "linux/amd64", "linux/ppc64le"]))]),
            Policy { preferred_arch: None, schedulable_archs: set(&["amd64", "arm64"]), ..Policy::default() },
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/affinity", affinity(&["amd64", "arm64"])),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),

        // ---- Step 6: no common arch ----
        // noe: denied with "could not find a common image architecture across all containers".
        case("no common arch: denied naming each image and its platforms",
            pod(json!({"spec": {"containers": [{"name": "app", "image": "app:1"}, {"name": "s", "image": "sidecar:2"}]}})),
            lookups(&[("app:1", Ok(AMD)), ("sidecar:2", Ok(ARM))]), Policy::default(),
            Expect::Deny(DenyReason::NoCommonArch, "no architecture is supported by every container: app:1 [linux/amd64], sidecar:2 [linux/arm64]")),
        case("image of another OS only: denied",
            pod(json!({})), lookups(&[("app:1", Ok(&["windows/amd64"]))]), Policy::default(),
            Expect::Deny(DenyReason::NoCommonArch, "no architecture is supported by every container: app:1 [windows/amd64] (pod OS: linux)")),

        // ---- Step 5: failed lookups ----
        // noe: same decision over the other images, no warning; its registry_errors_total is
        // labelled per image (unbounded).
        case("ignore-image: one failure ignored, warning",
            pod(json!({"spec": {"containers": [{"name": "app", "image": "app:1"}, {"name": "s", "image": "sidecar:2"}]}})),
            lookups(&[("app:1", Ok(MULTI)), ("sidecar:2", Err("registry unavailable"))]), Policy::default(),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/nodeSelector", json!({"kubernetes.io/arch": "amd64"})),
                annotations("amd64,arm64"),
            ])).warn(&["image sidecar:2 ignored for architecture selection: could not find its platforms (registry unavailable)"])
            .signals(vec![failed("sidecar:2", "registry unavailable"), injected(selector::PREFERRED)]),
        // noe: unchanged too, but it still applies matchNodeLabels and gives no warning.
        case("ignore-image: every lookup failed, fail open with a warning",
            pod(json!({"metadata": {"labels": {"team": "a"}}})),
            lookups(&[("app:1", Err("timeout"))]),
            Policy { match_node_labels: vec!["team".to_owned()], ..Policy::default() },
            Expect::Unchanged(SkipReason::LookupFailed))
            .warn(&["pod not constrained to an architecture: could not find the platforms of app:1 (timeout)"])
            .signals(vec![failed("app:1", "timeout"), Signal::FailedOpen, skipped(SkipReason::LookupFailed)]),
        case("an image missing from the lookups counts as failed",
            pod(json!({})), lookups(&[]), Policy::default(),
            Expect::Unchanged(SkipReason::LookupFailed))
            .warn(&["pod not constrained to an architecture: could not find the platforms of app:1 (no lookup result)"])
            .signals(vec![failed("app:1", "no lookup result"), Signal::FailedOpen, skipped(SkipReason::LookupFailed)]),
        // noe: has no --on-lookup-error.
        case("allow-pod: one failure leaves the pod untouched",
            pod(json!({"spec": {"containers": [{"name": "app", "image": "app:1"}, {"name": "s", "image": "sidecar:2"}]}})),
            lookups(&[("app:1", Ok(MULTI)), ("sidecar:2", Err("unauthorized"))]),
            Policy { on_lookup_error: OnLookupError::AllowPod, ..Policy::default() },
            Expect::Unchanged(SkipReason::LookupFailed))
            .warn(&["pod not constrained to an architecture: could not find the platforms of sidecar:2 (unauthorized)"])
            .signals(vec![failed("sidecar:2", "unauthorized"), Signal::FailedOpen, skipped(SkipReason::LookupFailed)]),
        case("deny: one failure denies, naming the image and why",
            pod(json!({"spec": {"containers": [{"name": "app", "image": "app:1"}, {"name": "s", "image": "sidecar:2"}]}})),
            lookups(&[("app:1", Ok(MULTI)), ("sidecar:2", Err("unauthorized"))]),
            Policy { on_lookup_error: OnLookupError::Deny, ..Policy::default() },
            Expect::Deny(DenyReason::LookupFailed, "could not find the platforms of sidecar:2 (unauthorized)"))
            .signals(vec![failed("sidecar:2", "unauthorized")]),

        case("deny mode with every lookup resolved: decided as usual",
            pod(json!({})), lookups(&[("app:1", Ok(MULTI))]),
            Policy { on_lookup_error: OnLookupError::Deny, ..Policy::default() },
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/nodeSelector", json!({"kubernetes.io/arch": "amd64"})),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::PREFERRED)]),
        case("deny mode: an image of another OS only is a denial, not a lookup failure",
            pod(json!({})), lookups(&[("app:1", Ok(&["windows/amd64"]))]),
            Policy { on_lookup_error: OnLookupError::Deny, ..Policy::default() },
            Expect::Deny(DenyReason::NoCommonArch, "no architecture is supported by every container: app:1 [windows/amd64] (pod OS: linux)")),

        // ---- Step 8: matchNodeLabels ----
        // noe: overwrites a nodeSelector key the pod set (zone), and counts it; with nodeSelector
        // nil it adds an ORed required term per label instead.
        case("matchNodeLabels: escaped keys, existing key kept, missing label ignored",
            pod(json!({"metadata": {"labels": {"team": "a", "example.com/pool~x": "gpu", "zone": "z"}},
                       "spec": {"nodeSelector": {"zone": "user"}}})),
            lookups(&[("app:1", Ok(MULTI))]),
            Policy { match_node_labels: vec!["team".into(), "example.com/pool~x".into(), "missing".into(), "zone".into()],
                     ..Policy::default() },
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/nodeSelector/kubernetes.io~1arch", json!("amd64")),
                add("/spec/nodeSelector/team", json!("a")),
                add("/spec/nodeSelector/example.com~1pool~0x", json!("gpu")),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::PREFERRED), node_match("team"), node_match("example.com/pool~x")]),
        case("skipped arch, matchNodeLabels key already set: unchanged",
            pod(json!({"metadata": {"labels": {"team": "a"}},
                       "spec": {"nodeSelector": {"kubernetes.io/arch": "arm64", "team": "b"}}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy { match_node_labels: vec!["team".to_owned()], ..Policy::default() },
            Expect::Unchanged(SkipReason::NodeSelector)).signals(vec![skipped(SkipReason::NodeSelector)]),

        // ---- Step 9: tolerations (new in noe-rs) ----
        case("tolerations of every possible arch, present ones skipped, appended",
            pod(json!({"spec": {"tolerations": [{"key": "arch", "value": "arm64", "effect": "NoSchedule"}]}})),
            lookups(&[("app:1", Ok(MULTI))]), tolerations_policy(None),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/affinity", affinity(&["amd64", "arm64"])),
                add("/spec/tolerations/-", json!({"key": "arch", "value": "amd64", "effect": "NoSchedule"})),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::AFFINITY)]),
        case("tolerations with a nodeSelector: only the selected arch's",
            pod(json!({})), lookups(&[("app:1", Ok(MULTI))]), tolerations_policy(Some("arm64")),
            Expect::Patch(&["amd64", "arm64"], vec![
                add("/spec/nodeSelector", json!({"kubernetes.io/arch": "arm64"})),
                add("/spec/tolerations", json!([{"key": "arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}])),
                annotations("amd64,arm64"),
            ])).signals(vec![injected(selector::PREFERRED)]),

        // ---- Step 2 exception: reinvocation (our annotation present) ----
        // noe: on reinvocation its own nodeSelector makes it skip ("node-selector found"), so a
        // sidecar added later with a narrower image is ignored and the pod can land on a node
        // where the sidecar cannot run.
        case("reinvocation, sidecar narrower: our nodeSelector removed, affinity added",
            pod(json!({"metadata": {"annotations": {"arch.noe.adevinta.com/platforms": "amd64,arm64"}},
                       "spec": {"nodeSelector": {"kubernetes.io/arch": "amd64"},
                                "containers": [{"name": "app", "image": "app:1"}, {"name": "mesh", "image": "sidecar:2"}]}})),
            lookups(&[("app:1", Ok(MULTI)), ("sidecar:2", Ok(ARM))]), Policy::default(),
            Expect::Patch(&["arm64"], vec![
                remove("/spec/nodeSelector/kubernetes.io~1arch"),
                add("/spec/affinity", affinity(&["arm64"])),
                replace(ANN, json!("arm64")),
            ])).signals(vec![not_available("amd64"), recomputed(&["amd64", "arm64"]), injected(selector::AFFINITY)]),
        case("reinvocation, our expressions rewritten in place",
            pod(json!({"metadata": {"annotations": {"arch.noe.adevinta.com/platforms": "amd64,arm64"}},
                "spec": {"containers": [{"name": "app", "image": "app:1"}, {"name": "mesh", "image": "sidecar:2"}],
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}, arch_in(&["amd64", "arm64"])]},
                            {"matchExpressions": [arch_in(&["amd64", "arm64"])]}]}}}}})),
            lookups(&[("app:1", Ok(MULTI)), ("sidecar:2", Ok(AMD))]), no_pref(),
            Expect::Patch(&["amd64"], vec![
                replace(&format!("{REQ}/0/matchExpressions/1/values"), json!(["amd64"])),
                replace(&format!("{REQ}/1/matchExpressions/0/values"), json!(["amd64"])),
                replace(ANN, json!("amd64")),
            ])).signals(vec![recomputed(&["amd64", "arm64"]), injected(selector::AFFINITY)]),
        case("reinvocation in preferred mode: required rewritten, our soft term removed",
            pod(json!({"metadata": {"annotations": {"arch.noe.adevinta.com/platforms": "amd64,arm64"}},
                "spec": {"containers": [{"name": "app", "image": "app:1"}, {"name": "mesh", "image": "sidecar:2"}],
                    "affinity": {"nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": [arch_in(&["amd64", "arm64"])]}]},
                        "preferredDuringSchedulingIgnoredDuringExecution": [pref_term("arm64", 7), pref_term("amd64", 50)]}}}})),
            lookups(&[("app:1", Ok(MULTI)), ("sidecar:2", Ok(ARM))]),
            Policy { preference_mode: PreferenceMode::Preferred, ..Policy::default() },
            // The user's own soft arm64 term (weight 7) is not ours: kept, and since the pod
            // now has a preference of its own, ours is removed whatever the arch.
            Expect::Patch(&["arm64"], vec![
                replace(&format!("{REQ}/0/matchExpressions/0/values"), json!(["arm64"])),
                remove(&format!("{PREF}/1")),
                replace(ANN, json!("arm64")),
            ])).signals(vec![recomputed(&["amd64", "arm64"]), injected(selector::AFFINITY)]),
        case("reinvocation with nothing new: unchanged",
            pod(json!({"metadata": {"annotations": {"arch.noe.adevinta.com/platforms": "amd64,arm64"}},
                       "spec": {"nodeSelector": {"kubernetes.io/arch": "amd64"}}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy::default(),
            Expect::Unchanged(SkipReason::AlreadyUpToDate))
            .signals(vec![recomputed(&["amd64", "arm64"]), skipped(SkipReason::AlreadyUpToDate)]),
        case("reinvocation with nothing new, affinity form: unchanged, nothing counted",
            pod(json!({"metadata": {"annotations": {"arch.noe.adevinta.com/platforms": "arm64"}},
                "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [arch_in(&["arm64"])]}]}}}}})),
            lookups(&[("app:1", Ok(ARM))]), Policy::default(),
            Expect::Unchanged(SkipReason::AlreadyUpToDate))
            .signals(vec![not_available("amd64"), recomputed(&["arm64"]), skipped(SkipReason::AlreadyUpToDate)]),
        case("reinvocation, a new term added by another webhook gets our expression",
            pod(json!({"metadata": {"annotations": {"arch.noe.adevinta.com/platforms": "amd64"}},
                "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [arch_in(&["amd64"])]},
                                          {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}}}})),
            lookups(&[("app:1", Ok(AMD))]), no_pref(),
            Expect::Patch(&["amd64"], vec![
                add(&format!("{REQ}/1/matchExpressions/-"), arch_in(&["amd64"])),
            ])).signals(vec![recomputed(&["amd64"]), injected(selector::AFFINITY)]),
        case("annotation present but the arch expression is not ours: user's, skipped",
            pod(json!({"metadata": {"annotations": {"arch.noe.adevinta.com/platforms": "amd64,arm64"}},
                "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [arch_in(&["arm64"])]}]}}}}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy::default(),
            Expect::Unchanged(SkipReason::AffinityLabelSelector))
            .signals(vec![skipped(SkipReason::AffinityLabelSelector)]),
        case("annotation present but the nodeSelector arch is outside it: user's, skipped",
            pod(json!({"metadata": {"annotations": {"arch.noe.adevinta.com/platforms": "amd64"}},
                       "spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"}}})),
            lookups(&[("app:1", Ok(MULTI))]), Policy::default(),
            Expect::Unchanged(SkipReason::NodeSelector)).signals(vec![skipped(SkipReason::NodeSelector)]),
    ]
}
