//! Replays the placement cases of our peers through the decision and judges each by where the
//! patched pod may be scheduled, not by the shape of its patch: the multiarch-tuning-operator's
//! pod-placement cases and adevinta/noe's webhook cases (with cases derived from noe's code).
//!
//! The case files are not part of the repository: the test reads them from `NOE_CONFORMANCE_DIR`
//! (else `<workspace>/../shared/conformance`) and skips, saying so, when they are absent.
//!
//! Each case ends as one of:
//! - agrees: the same nodes are eligible, ranked the same by preferred terms (or with the same
//!   best nodes, for cases marked `top`, where the peer weighs several architectures);
//! - envelope: the chart or the admission envelope decides, not the decision (a namespace the
//!   chart excludes, an UPDATE, an object that is not a pod), and the pod stays as it came;
//! - deliberate: a documented difference: the result matches what the case (or the table below)
//!   says noe-rs does instead, and docs/compatibility.md carries the line given here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::schedule::Comparison;
use noe_core::decide::{
    plan, Facts, Lookups, OnLookupError, Policy, PreferenceMode, Verdict, Weight,
};
use noe_core::patch::pod_template_pointer;
use noe_core::Platform;
use serde_json::{json, Value};

/// The namespace the chart is installed in, for the peer's cases: the operator's own namespace
/// plays the release namespace the chart's namespaceSelector excludes (with kube-system).
const RELEASE_NAMESPACE: &str = "openshift-multiarch-tuning-operator";

/// A label no node carries: the peer requires it to keep a pod with no common architecture
/// Pending (noe-rs denies such a pod).
const NEVER_SET: &[&str] = &["multiarch.openshift.io/no-supported-arch"];

/// `spec` fields: required `kubernetes.io/arch In [archs]`, and a preferred term if given.
fn arch_affinity(archs: &[&str], preferred: Option<(&str, i64)>) -> Value {
    let mut node_affinity = json!({"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/arch", "operator": "In", "values": archs}]}]}});
    if let Some((arch, weight)) = preferred {
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = json!([{"weight": weight,
            "preference": {"matchExpressions": [
                {"key": "kubernetes.io/arch", "operator": "In", "values": [arch]}]}}]);
    }
    json!({"affinity": {"nodeAffinity": node_affinity}})
}

const FOUR: &[&str] = &["amd64", "arm64", "ppc64le", "s390x"];

/// Differences the case files do not mark, each with what noe-rs does instead and the line of
/// docs/compatibility.md that says so (a phrase it must contain).
fn extra_deliberate(id: &str, case: &Value) -> Option<(Value, &'static str)> {
    const CONTROL_PLANE: &str = "A pod with a control-plane or master `nodeSelector`";
    Some(match id {
        "U17" => (arch_affinity(&["amd64", "arm64"], None), CONTROL_PLANE),
        "O01" | "O02" => (arch_affinity(FOUR, Some(("amd64", 50))), CONTROL_PLANE),
        "U18" => (
            arch_affinity(&["amd64", "arm64"], None),
            "A pod with a DaemonSet owner but without the DaemonSet controller's",
        ),
        "E12" => (
            arch_affinity(FOUR, Some(("amd64", 50))),
            "Namespaces named `kube-*` other than `kube-system`",
        ),
        // noe appends an ORed term `label In [value]` to the pod's required terms.
        name if name.starts_with("TestHookHandlesPodNodeMatchingLabelSelector")
            && name.ends_with("/When the pod already has a node affinity") =>
        {
            let key = case["flags"]["match_node_labels"][0].as_str()?;
            (
                json!({"nodeSelector": {key: "true"}}),
                "`matchNodeLabels` go into `nodeSelector` only",
            )
        }
        "matchNodeLabels on the affinity path appends an ORed term" => {
            let mut expected = arch_affinity(&["amd64", "arm64"], None);
            expected["nodeSelector"] = json!({"topology.kubernetes.io/zone": "eu-west-1a"});
            (expected, "`matchNodeLabels` go into `nodeSelector` only")
        }
        "Existing non-arch required affinity gets an ORed arch term (weakens user constraint)" => (
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]}]}}}}),
            "ANDed into every required node selector term",
        ),
        _ => return None,
    })
}

/// The docs/compatibility.md phrase for the differences the case files mark as deliberate.
fn marked_deliberate(id: &str) -> Option<&'static str> {
    Some(match id {
        "U01" | "U02" | "U03" => "an explicit `nodeSelectorTerms: []` are left untouched",
        "U23" => "soft preference included",
        "R03" | "E21" => "When every image lookup fails, the pod is left exactly as it came",
        "E22" | "E25" => "one preferred architecture per pod",
        "D03" => "`--preference-mode=required` (the default, noe's) pins",
        _ => return None,
    })
}

/// The placement cases; the replay is ignored when they are absent at build time (`build.rs`
/// sets `noe_no_conformance`), and fails (never passes for testing nothing) when they went
/// missing since.
fn conformance_dir() -> PathBuf {
    let dir = match std::env::var_os("NOE_CONFORMANCE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance"),
    };
    let placement = dir.join("placement");
    assert!(
        placement.is_dir(),
        "{} went missing since the build",
        placement.display()
    );
    dir
}

fn read(dir: &Path, name: &str) -> Value {
    let path = dir.join("placement").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `"linux/arm/v7"` → a platform; a bare `"amd64"` has an empty OS.
fn platform(spec: &str) -> Platform {
    match spec.split_once('/') {
        None => Platform::new("", spec, None),
        Some((os, rest)) => {
            let mut parts = rest.split('/');
            let arch = parts.next().unwrap_or_default();
            Platform::new(os, arch, parts.next())
        }
    }
}

fn platforms(list: &Value) -> Result<Arc<[Platform]>, String> {
    match list {
        Value::Array(items) => Ok(items
            .iter()
            .map(|p| platform(p.as_str().expect("a platform string")))
            .collect()),
        Value::Object(entry) if entry.contains_key("platforms") => platforms(&entry["platforms"]),
        Value::Object(error) => Err(error
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("lookup failed")
            .to_owned()),
        _ => Err("cannot be inspected".to_owned()),
    }
}

/// The platforms of an image, as a case gives them.
type PlatformsOf<'a> = &'a dyn Fn(&str) -> Result<Arc<[Platform]>, String>;

/// The decision under test: the pod (or pod template) in, the verdict out.
fn run(pod: &Value, platforms_of: PlatformsOf<'_>, policy: &Policy) -> Verdict {
    let plan = plan(pod, policy);
    let lookups: Lookups = plan
        .images()
        .map(|image| {
            let found = platforms_of(image).map_err(noe_core::decide::LookupError::message);
            (image.to_owned(), found)
        })
        .collect();
    super::helpers::decide_checked(&plan, &lookups, &Facts::default(), policy).verdict
}

/// The pod spec after the verdict; a denied pod is scheduled nowhere.
fn spec_after(pod: &Value, verdict: &Verdict) -> Value {
    match verdict {
        Verdict::Unchanged { .. } => pod["spec"].clone(),
        Verdict::Patch { ops, .. } => {
            let ops: Vec<Value> = ops
                .iter()
                .map(|op| serde_json::to_value(op).unwrap())
                .collect();
            let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops)).unwrap();
            let mut out = pod.clone();
            json_patch::patch(&mut out, &patch).expect("the patch applies");
            out["spec"].clone()
        }
        Verdict::Deny { .. } => nowhere(),
    }
}

fn nowhere() -> Value {
    json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": []}}}})
}

/// The spec a case expects: `"unchanged"`, `"denied"`, or the fields that replace the pod's.
fn expected_spec(spec: &Value, expected: &Value) -> Value {
    match expected {
        Value::String(s) if s == "unchanged" => spec.clone(),
        Value::String(s) if s == "denied" => nowhere(),
        Value::Object(fields) => {
            let mut out = spec.clone();
            for (key, value) in fields {
                let key = key.strip_prefix("template.spec.").unwrap_or(key);
                out[key] = value.clone();
            }
            out
        }
        other => panic!("unexpected expectation {other}"),
    }
}

#[derive(Debug)]
enum Outcome {
    Agrees,
    Envelope(&'static str),
    Deliberate(&'static str),
    Fails(String),
}

/// Compares our spec with the expected one under the case's preference rule.
fn judge(ours: &Value, want: &Value, preferences: &str) -> Result<(), String> {
    let nodes = super::schedule::nodes(&[ours, want], NEVER_SET);
    match (super::schedule::compare(ours, want, &nodes), preferences) {
        (Comparison::Same, _)
        | (Comparison::SameTop, "top")
        | (Comparison::SameTop | Comparison::DifferentPreferences, "ignore") => Ok(()),
        (Comparison::DifferentNodes(node, side), _) => Err(format!(
            "eligible nodes differ ({side}): {:?} name={}",
            node.labels, node.name
        )),
        (other, _) => Err(format!("preferences differ: {other:?}")),
    }
}

fn flag_policy(flags: &[Value]) -> Policy {
    let mut policy = Policy::default();
    for flag in flags {
        let flag = flag.as_str().expect("a flag");
        let (name, value) = flag.split_once('=').expect("--flag=value");
        match name {
            "--preferred-arch" => policy.preferred_arch = Some(value.to_owned()),
            "--preference-mode" => {
                policy.preference_mode = match value {
                    "preferred" => PreferenceMode::Preferred,
                    "required" => PreferenceMode::Required,
                    other => panic!("preference mode {other}"),
                }
            }
            "--preference-weight" => {
                policy.preference_weight = Weight::try_from(value.parse::<i64>().unwrap()).unwrap()
            }
            "--on-lookup-error" => {
                policy.on_lookup_error = match value {
                    "ignore-image" => OnLookupError::IgnoreImage,
                    "allow-pod" => OnLookupError::AllowPod,
                    "deny" => OnLookupError::Deny,
                    other => panic!("on lookup error {other}"),
                }
            }
            other => panic!("flag {other} not understood by the replay"),
        }
    }
    policy
}

/// One multiarch-tuning-operator case.
fn mto_case(case: &Value) -> Outcome {
    let object = &case["object"];
    let kind = object["kind"].as_str().unwrap();
    let pointer = pod_template_pointer(kind).unwrap_or_else(|| panic!("kind {kind}"));
    let pod = object.pointer(pointer.as_str()).expect("a pod template");
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let policy = flag_policy(case["noe_flags"].as_array().unwrap());
    let images = case["images"].as_object().unwrap().clone();
    let platforms_of = move |image: &str| match images.get(image) {
        Some(platforms_or_null) => platforms(platforms_or_null),
        None => Err("not in the case".to_owned()),
    };
    let excluded = namespace == "kube-system" || namespace == RELEASE_NAMESPACE;
    let ours = if excluded {
        pod["spec"].clone()
    } else {
        spec_after(pod, &run(pod, &platforms_of, &policy))
    };
    let preferences = case["preferences"].as_str().unwrap_or("order");
    let mto = expected_spec(&pod["spec"], &case["mto_expected"]);
    let verdict = judge(&ours, &mto, preferences);
    if verdict.is_ok() {
        return if excluded {
            Outcome::Envelope("namespace excluded by the chart")
        } else {
            Outcome::Agrees
        };
    }
    let id = case["id"].as_str().unwrap();
    let deliberate = match (&case["deliberate"], extra_deliberate(id, case)) {
        (Value::Object(d), _) => {
            marked_deliberate(id).map(|phrase| (d["noe_expected"].clone(), phrase))
        }
        (_, extra) => extra,
    };
    if let Some((noe_expected, phrase)) = deliberate {
        let want = expected_spec(&pod["spec"], &noe_expected);
        return match judge(&ours, &want, preferences) {
            Ok(()) => Outcome::Deliberate(phrase),
            Err(why) => Outcome::Fails(format!("neither MTO's nor the documented result: {why}")),
        };
    }
    Outcome::Fails(verdict.unwrap_err())
}

/// One adevinta/noe case.
fn noe_case(case: &Value) -> Outcome {
    if case["operation"].as_str().is_some_and(|op| op != "CREATE") {
        return Outcome::Envelope("only CREATE is decided");
    }
    let Some(object) = case["pod"].as_object() else {
        return Outcome::Envelope("not a pod");
    };
    if case["kind"].as_str().is_some_and(|kind| kind != "Pod") {
        // The webhook is registered for pods; `noe explain` decides a workload's template.
        return Outcome::Deliberate("Only Pods are mutated");
    }
    let pod = Value::Object(object.clone());
    let flags = &case["flags"];
    let policy = Policy {
        preferred_arch: flags["preferred_arch"].as_str().map(str::to_owned),
        schedulable_archs: flags["schedulable_archs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect(),
        match_node_labels: flags["match_node_labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect(),
        system_os: flags["system_os"].as_str().unwrap().to_owned(),
        ..Policy::default()
    };
    let images = case["image_platforms"].as_object().unwrap().clone();
    let platforms_of =
        move |image: &str| match images.get(image).or_else(|| images.get("<any other>")) {
            Some(list) => platforms(list),
            None => Err("not in the case".to_owned()),
        };
    let ours = spec_after(&pod, &run(&pod, &platforms_of, &policy));
    let want = expected_spec(&pod["spec"], &case["expected"]);
    match judge(&ours, &want, "order") {
        Ok(()) => Outcome::Agrees,
        Err(why) => {
            let name = case["name"].as_str().unwrap();
            match extra_deliberate(name, case) {
                Some((noe_expected, phrase)) => {
                    let want = expected_spec(&pod["spec"], &noe_expected);
                    match judge(&ours, &want, "order") {
                        Ok(()) => Outcome::Deliberate(phrase),
                        Err(why) => Outcome::Fails(format!(
                            "neither noe's nor the documented result: {why}"
                        )),
                    }
                }
                None => Outcome::Fails(why),
            }
        }
    }
}

#[test]
#[cfg_attr(
    noe_no_conformance,
    ignore = "needs ../shared/conformance/placement (or NOE_CONFORMANCE_DIR)"
)]
fn placement_cases_schedule_as_our_peers_or_as_documented() {
    let dir = conformance_dir();
    let compatibility = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/compatibility.md"),
    )
    .unwrap();
    let mut results: Vec<(String, String, Outcome)> = Vec::new();
    let mto = read(&dir, "mto_pod_placement_cases.json");
    for case in mto["cases"].as_array().unwrap() {
        let id = case["id"].as_str().unwrap().to_owned();
        results.push(("mto".into(), id, mto_case(case)));
    }
    for file in ["noe_webhook_cases.json", "noe_derived_cases.json"] {
        for case in read(&dir, file).as_array().unwrap() {
            let name = case["name"].as_str().unwrap().to_owned();
            results.push((
                file.trim_end_matches("_cases.json").into(),
                name,
                noe_case(case),
            ));
        }
    }
    let mut counts: BTreeMap<(String, &str), usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for (file, id, outcome) in &results {
        let label = match outcome {
            Outcome::Agrees => "agrees",
            Outcome::Envelope(why) => {
                eprintln!("{file} {id}: envelope ({why})");
                "envelope"
            }
            Outcome::Deliberate(phrase) => {
                eprintln!("{file} {id}: deliberate ({phrase})");
                if !compatibility.contains(phrase) {
                    failures.push(format!(
                        "{file} {id}: docs/compatibility.md lacks {phrase:?}"
                    ));
                }
                "deliberate"
            }
            Outcome::Fails(why) => {
                failures.push(format!("{file} {id}: {why}"));
                "fails"
            }
        };
        *counts.entry((file.clone(), label)).or_default() += 1;
    }
    eprintln!("conformance: {counts:?}");
    assert!(
        failures.is_empty(),
        "{} placement cases fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
