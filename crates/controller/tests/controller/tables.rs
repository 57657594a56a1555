//! The pure decisions, table-tested: remediation's screen/judge/note, the taint plan, the
//! trimmed records (parsed from the API reference's JSON) and the configuration checks.

use std::collections::BTreeSet;
use std::time::Duration;

use noe_controller::objects::{NodeRecord, Owner, Phase, PodRecord, Taint};
use noe_controller::remediate::{judge, note, screen, Remedy, Skip, Verdict, MAX_NOTE};
use noe_controller::taints::{apply, converged, wanted, TAINT_KEY};
use noe_controller::{Config, ImageLookup, LeaseConfig, LookupError, Platform, Remediate, Support};
use noe_test_support::{node_json, PodFixture};

fn only(platforms: &[&str]) -> Support {
    Support::Only(
        platforms
            .iter()
            .map(|p| {
                let (os, arch) = p.split_once('/').unwrap();
                Platform::new(os, arch, None)
            })
            .collect(),
    )
}

fn ok(image: &str, support: Support) -> ImageLookup {
    ImageLookup {
        image: image.into(),
        support: Ok(support),
    }
}

fn failed(image: &str) -> ImageLookup {
    ImageLookup {
        image: image.into(),
        support: Err(LookupError {
            image: image.into(),
            reason: "registry.example.com answered 500".into(),
        }),
    }
}

fn node(arch: Option<&str>, os: Option<&str>) -> NodeRecord {
    NodeRecord::new("n1", arch, os, Vec::new())
}

#[test]
#[allow(clippy::type_complexity)]
fn screen_table() {
    let base = PodRecord::new("ns", "web", "n1", &["app:1"]);
    let arm = node(Some("arm64"), Some("linux"));
    let with = |change: &dyn Fn(&mut PodRecord)| {
        let mut pod = base.clone();
        change(&mut pod);
        pod
    };
    let cases: Vec<(&str, PodRecord, Option<NodeRecord>, Result<Platform, Skip>)> = vec![
        (
            "in scope",
            base.clone(),
            Some(arm.clone()),
            Ok(Platform::new("linux", "arm64", None)),
        ),
        (
            "deleting",
            with(&|p| p.deleting = true),
            Some(arm.clone()),
            Err(Skip::Deleting),
        ),
        (
            "succeeded",
            with(&|p| p.phase = Phase::Succeeded),
            Some(arm.clone()),
            Err(Skip::Finished),
        ),
        (
            "failed",
            with(&|p| p.phase = Phase::Failed),
            Some(arm.clone()),
            Err(Skip::Finished),
        ),
        (
            "pending is judged",
            with(&|p| p.phase = Phase::Pending),
            Some(arm.clone()),
            Ok(Platform::new("linux", "arm64", None)),
        ),
        (
            "mirror annotation",
            with(&|p| p.mirror = true),
            Some(arm.clone()),
            Err(Skip::Mirror),
        ),
        (
            "node owner (static pod)",
            with(&|p| {
                p.owner = Some(Owner {
                    kind: "Node".into(),
                    name: "n1".into(),
                })
            }),
            Some(arm.clone()),
            Err(Skip::Mirror),
        ),
        (
            "daemonset",
            with(&|p| {
                p.owner = Some(Owner {
                    kind: "DaemonSet".into(),
                    name: "ds".into(),
                })
            }),
            Some(arm.clone()),
            Err(Skip::DaemonSet),
        ),
        (
            "too many images",
            with(&|p| p.too_many_images = true),
            Some(arm.clone()),
            Err(Skip::TooManyImages),
        ),
        (
            "no images",
            with(&|p| p.images.clear()),
            Some(arm.clone()),
            Err(Skip::NoImages),
        ),
        ("node unknown", base.clone(), None, Err(Skip::NodeUnknown)),
        (
            "node without arch",
            base.clone(),
            Some(node(None, Some("linux"))),
            Err(Skip::NodeWithoutArch),
        ),
        (
            "node without os label is linux",
            base.clone(),
            Some(node(Some("amd64"), None)),
            Ok(Platform::new("linux", "amd64", None)),
        ),
    ];
    for (name, pod, node, want) in cases {
        assert_eq!(screen(&pod, node.as_ref()), want, "{name}");
    }
}

#[test]
#[allow(clippy::type_complexity)]
fn judge_table() {
    let arm = Platform::new("linux", "arm64", None);
    let win = Platform::new("windows", "amd64", None);
    let pod = PodRecord::new("ns", "web", "n1", &["app:1", "sidecar:2"]);
    let mut orphan = pod.clone();
    orphan.owner = None;
    let misfit = |image: &str, platforms: &[&str]| noe_controller::remediate::Misfit {
        image: image.into(),
        platforms: match only(platforms) {
            Support::Only(set) => set.into_iter().collect(),
            Support::Any => Vec::new(),
        },
    };
    let cases: Vec<(
        &str,
        &PodRecord,
        &Platform,
        Vec<ImageLookup>,
        Remediate,
        Verdict,
    )> = vec![
        (
            "all fit",
            &pod,
            &arm,
            vec![
                ok("app:1", only(&["linux/amd64", "linux/arm64"])),
                ok("sidecar:2", only(&["linux/arm64"])),
            ],
            Remediate::Report,
            Verdict::Fits,
        ),
        (
            "arch-neutral image fits anywhere",
            &pod,
            &arm,
            vec![
                ok("app:1", Support::Any),
                ok("sidecar:2", only(&["linux/arm64"])),
            ],
            Remediate::Report,
            Verdict::Fits,
        ),
        (
            "image without OS fits any OS",
            &pod,
            &win,
            vec![
                ok("app:1", only(&["/amd64"])),
                ok("sidecar:2", only(&["windows/amd64"])),
            ],
            Remediate::Report,
            Verdict::Fits,
        ),
        (
            "one misfit: report",
            &pod,
            &arm,
            vec![
                ok("app:1", only(&["linux/amd64"])),
                ok("sidecar:2", only(&["linux/arm64"])),
            ],
            Remediate::Report,
            Verdict::Misplaced {
                misfits: vec![misfit("app:1", &["linux/amd64"])],
                remedy: Remedy::Report,
            },
        ),
        (
            "right arch, wrong OS",
            &pod,
            &win,
            vec![
                ok("app:1", only(&["linux/amd64"])),
                ok("sidecar:2", Support::Any),
            ],
            Remediate::Report,
            Verdict::Misplaced {
                misfits: vec![misfit("app:1", &["linux/amd64"])],
                remedy: Remedy::Report,
            },
        ),
        (
            "evict with a controller owner",
            &pod,
            &arm,
            vec![
                ok("app:1", only(&["linux/amd64"])),
                ok("sidecar:2", only(&["linux/s390x"])),
            ],
            Remediate::Evict,
            Verdict::Misplaced {
                misfits: vec![
                    misfit("app:1", &["linux/amd64"]),
                    misfit("sidecar:2", &["linux/s390x"]),
                ],
                remedy: Remedy::Evict,
            },
        ),
        (
            "evict without a controller owner: report only",
            &orphan,
            &arm,
            vec![
                ok("app:1", only(&["linux/amd64"])),
                ok("sidecar:2", Support::Any),
            ],
            Remediate::Evict,
            Verdict::Misplaced {
                misfits: vec![misfit("app:1", &["linux/amd64"])],
                remedy: Remedy::ReportNoController,
            },
        ),
        (
            "a failed lookup: no verdict",
            &pod,
            &arm,
            vec![ok("app:1", only(&["linux/amd64"])), failed("sidecar:2")],
            Remediate::Evict,
            Verdict::LookupFailed,
        ),
        (
            "a missing lookup: no verdict",
            &pod,
            &arm,
            vec![ok("app:1", only(&["linux/amd64"]))],
            Remediate::Evict,
            Verdict::LookupFailed,
        ),
    ];
    for (name, pod, node, lookups, mode, want) in cases {
        assert_eq!(judge(pod, node, &lookups, mode), want, "{name}");
    }
}

#[test]
fn note_names_node_images_and_is_bounded() {
    let arm = Platform::new("linux", "arm64", None);
    let misfits = vec![noe_controller::remediate::Misfit {
        image: "app:1".into(),
        platforms: vec![Platform::new("linux", "amd64", None)],
    }];
    assert_eq!(
        note("n1", &arm, &misfits, Remedy::Evict),
        "node n1 is linux/arm64; images that cannot run there: app:1 [linux/amd64]; evicting"
    );
    let many: Vec<_> = (0..100)
        .map(|i| noe_controller::remediate::Misfit {
            image: format!("registry.example.com/team/é-{i}:v1"),
            platforms: vec![Platform::new("linux", "amd64", None)],
        })
        .collect();
    let text = note("n1", &arm, &many, Remedy::Report);
    assert!(text.len() <= MAX_NOTE, "{}", text.len());
    assert!(text.ends_with("..."));
}

fn parts(x: &(String, String, String)) -> (&str, &str, &str) {
    (x.0.as_str(), x.1.as_str(), x.2.as_str())
}

#[test]
fn taint_plan_table() {
    let arm: BTreeSet<String> = ["arm64".to_owned()].into();
    let t = |key: &str, value: &str, effect: &str| {
        (key.to_owned(), value.to_owned(), effect.to_owned())
    };
    let other = t("dedicated", "gpu", "NoSchedule");
    // (name, node arch, taints before, converged?, taints after)
    type Taints = Vec<(String, String, String)>;
    let cases: Vec<(&str, Option<&str>, Taints, bool, Taints)> = vec![
        (
            "arm node, none yet",
            Some("arm64"),
            vec![other.clone()],
            false,
            vec![other.clone(), t(TAINT_KEY, "arm64", "NoSchedule")],
        ),
        (
            "arm node, already",
            Some("arm64"),
            vec![t(TAINT_KEY, "arm64", "NoSchedule"), other.clone()],
            true,
            vec![other.clone(), t(TAINT_KEY, "arm64", "NoSchedule")],
        ),
        (
            "arm node, stale value",
            Some("arm64"),
            vec![t(TAINT_KEY, "amd64", "NoSchedule")],
            false,
            vec![t(TAINT_KEY, "arm64", "NoSchedule")],
        ),
        (
            "arm node, duplicate",
            Some("arm64"),
            vec![
                t(TAINT_KEY, "arm64", "NoSchedule"),
                t(TAINT_KEY, "arm64", "NoSchedule"),
            ],
            false,
            vec![t(TAINT_KEY, "arm64", "NoSchedule")],
        ),
        (
            "amd node: ours removed, others kept",
            Some("amd64"),
            vec![t(TAINT_KEY, "arm64", "NoSchedule"), other.clone()],
            false,
            vec![other.clone()],
        ),
        (
            "amd node, clean",
            Some("amd64"),
            vec![other.clone()],
            true,
            vec![other.clone()],
        ),
        (
            "no arch label: ours removed",
            None,
            vec![t(TAINT_KEY, "arm64", "NoSchedule")],
            false,
            vec![],
        ),
        (
            "someone's NoExecute under our key is not ours",
            Some("amd64"),
            vec![t(TAINT_KEY, "x", "NoExecute")],
            true,
            vec![t(TAINT_KEY, "x", "NoExecute")],
        ),
    ];
    for (name, arch, before, is_converged, after) in cases {
        let want = wanted(arch, &arm);
        assert_eq!(
            converged(before.iter().map(parts), want),
            is_converged,
            "{name}"
        );
        let got = apply(before, parts, want, |value| {
            t(TAINT_KEY, value, "NoSchedule")
        });
        assert_eq!(got, after, "{name}");
        assert!(got
            .iter()
            .all(|x| x.0 != TAINT_KEY || x.2 != "NoExecute" || name.contains("NoExecute")));
    }
}

#[test]
fn records_keep_only_what_is_used() {
    let mut json = node_json("n1", "arm64", "linux");
    json["spec"]["taints"] =
        serde_json::json!([{"key": TAINT_KEY, "value": "arm64", "effect": "NoSchedule"}]);
    json["metadata"]["labels"]["node.kubernetes.io/windows-build"] = "10.0.17763".into();
    let node: NodeRecord = serde_json::from_value(json).unwrap();
    assert_eq!(node.name(), "n1");
    assert_eq!(node.platform(), Some(Platform::new("linux", "arm64", None)));
    assert_eq!(node.windows_build.as_deref(), Some("10.0.17763"));
    assert!(node.ready);
    assert_eq!(
        node.taints,
        [Taint {
            key: TAINT_KEY.into(),
            value: "arm64".into(),
            effect: "NoSchedule".into()
        }]
    );
    use kube::Resource as _;
    assert!(node.meta().labels.is_none() && node.meta().managed_fields.is_none());

    let mut fixture = PodFixture::new("ns", "web", "n1", &["app:1", "sidecar:2", "app:1"]);
    fixture.init_images = vec!["init:3".into()];
    fixture.pull_secrets = vec!["regcred".into()];
    let mut json = fixture.json();
    json["spec"]["volumes"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"name": "model", "image": {"reference": "models/llm:1"}}));
    json["metadata"]["deletionTimestamp"] = "2026-11-01T10:00:00Z".into();
    let pod: PodRecord = serde_json::from_value(json).unwrap();
    assert_eq!(pod.images, ["app:1", "sidecar:2", "init:3", "models/llm:1"]);
    assert_eq!(pod.pull_secrets, ["regcred"]);
    assert_eq!(pod.node_name, "n1");
    assert_eq!(pod.phase, Phase::Running);
    assert!(pod.deleting && !pod.mirror);
    assert_eq!(
        pod.owner.as_ref().map(|o| o.kind.as_str()),
        Some("ReplicaSet")
    );
    assert!(pod.meta().annotations.is_none() && pod.meta().owner_references.is_none());

    // Hostile: nulls everywhere, more images than judged.
    let pod: PodRecord = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "x", "namespace": null, "labels": null, "ownerReferences": null},
        "spec": {"containers": (0..500).map(|i| serde_json::json!({"image": format!("i{i}")})).collect::<Vec<_>>(),
                 "initContainers": null, "imagePullSecrets": [{"name": null}]},
        "status": null,
    }))
    .unwrap();
    assert!(pod.too_many_images);
    assert_eq!(pod.images.len(), noe_controller::objects::MAX_IMAGES);
    assert!(pod.pull_secrets.is_empty());
    assert_eq!(pod.phase, Phase::Unknown);
}

#[test]
fn config_checks() {
    let lease = LeaseConfig::new("noe", "noe-system", "pod-a");
    let cases: Vec<(&str, Config, bool)> = vec![
        ("default", Config::default(), true),
        (
            "evict at rate 0",
            Config {
                remediate: Remediate::Evict,
                remediate_rate_per_minute: 0,
                ..Config::default()
            },
            false,
        ),
        (
            "bad arch",
            Config {
                taint_arches: ["arm64;rm".to_owned()].into(),
                ..Config::default()
            },
            false,
        ),
        (
            "client-go lease defaults",
            Config {
                leader_election: Some(lease.clone()),
                ..Config::default()
            },
            true,
        ),
        (
            "renew deadline above lease",
            Config {
                leader_election: Some(LeaseConfig {
                    renew_deadline: Duration::from_secs(20),
                    ..lease.clone()
                }),
                ..Config::default()
            },
            false,
        ),
        (
            "no identity",
            Config {
                leader_election: Some(LeaseConfig {
                    identity: String::new(),
                    ..lease.clone()
                }),
                ..Config::default()
            },
            false,
        ),
        (
            "zero retry",
            Config {
                timings: noe_controller::Timings {
                    error_retry: Duration::ZERO,
                    ..Default::default()
                },
                ..Config::default()
            },
            false,
        ),
    ];
    for (name, config, valid) in cases {
        assert_eq!(config.validate().is_ok(), valid, "{name}");
    }
    assert!(!Config::default().needs_nodes());
    assert!(Config {
        remediate: Remediate::Report,
        ..Config::default()
    }
    .needs_nodes());
}
