//! Exec-format-error detection's pure decisions, table-tested: what a container status says
//! (`signal`), what a log says (`evidence_line`), what is learned and whether the pod is
//! evicted (`plan`, `placeable`, `note`), the records trimmed from the API reference's JSON,
//! and the learned store's entries and bounds (hostile values included).

use std::collections::{BTreeMap, BTreeSet};

use noe_controller::detect::{
    digest_of, evidence_line, note, placeable, plan, says_exec_format_error, signal, Case, Kept,
    NotLearned, Origin, Seen, Signal, Told,
};
use noe_controller::learned::entry::{key, parse_platform};
use noe_controller::learned::{Entry, Evidence, Snapshot, MAX_DATA_BYTES, MAX_ENTRY_BYTES};
use noe_controller::objects::{ContainerRun, PodRecord, Termination, Waiting};
use noe_controller::{ImageLookup, LookupError, Platform, Remediate, Support};
use noe_core::truth::{Corrections as _, Source};
use noe_test_support::{crash_loop, Crash, PodFixture};

const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

fn run() -> ContainerRun {
    ContainerRun::crashed(
        "app",
        "app:1",
        &format!("registry.example/app@{DIGEST}"),
        3,
        1,
        0,
    )
}

fn ended(reason: &str, message: &str, exit_code: i32, seconds: i64) -> Option<Termination> {
    Some(Termination {
        exit_code,
        reason: reason.into(),
        started_at: Some(100),
        finished_at: Some(100 + seconds),
        message: message.into(),
    })
}

#[test]
fn signal_table() {
    let with = |change: &dyn Fn(&mut ContainerRun)| {
        let mut run = run();
        change(&mut run);
        run
    };
    let runc = "exec /app: exec format error";
    let cases: Vec<(&str, ContainerRun, Signal)> = vec![
        ("a fast crash is a suspect", run(), Signal::Suspect),
        (
            "10 s is still fast",
            with(&|r| r.last = ended("Error", "", 1, 10)),
            Signal::Suspect,
        ),
        (
            "11 s is not",
            with(&|r| r.last = ended("Error", "", 1, 11)),
            Signal::Nothing,
        ),
        (
            "exit 0 is no crash",
            with(&|r| r.last = ended("Completed", "", 0, 0)),
            Signal::Nothing,
        ),
        (
            "never restarted",
            with(&|r| r.restart_count = 0),
            Signal::Nothing,
        ),
        (
            "an end before its start",
            with(&|r| r.last = ended("Error", "", 1, -5)),
            Signal::Nothing,
        ),
        (
            "no times",
            with(&|r| {
                r.last = Some(Termination {
                    exit_code: 1,
                    ..Termination::default()
                })
            }),
            Signal::Nothing,
        ),
        (
            "StartError with the runtime's message, no restart needed",
            with(&|r| {
                r.restart_count = 0;
                r.last = None;
                r.ended = ended(
                    "StartError",
                    "failed to create containerd task: exec: \"/app\": exec format error: unknown",
                    128,
                    0,
                );
            }),
            Signal::Detection(Origin::Runtime),
        ),
        (
            "a waiting message is the kubelet's",
            with(&|r| {
                r.waiting = Some(Waiting {
                    reason: "RunContainerError".into(),
                    message: format!("runc create failed: {runc}"),
                })
            }),
            Signal::Detection(Origin::Runtime),
        ),
        (
            "CreateContainerError",
            with(&|r| {
                r.waiting = Some(Waiting {
                    reason: "CreateContainerError".into(),
                    message: "Exec Format Error".into(),
                })
            }),
            Signal::Detection(Origin::Runtime),
        ),
        (
            "a termination message with reason Error is the program's output",
            with(&|r| r.last = ended("Error", runc, 1, 0)),
            Signal::Detection(Origin::Output),
        ),
        (
            "bash's words, any case",
            with(&|r| {
                r.last = ended(
                    "Error",
                    "/entrypoint.sh: line 3: /app: CANNOT EXECUTE BINARY FILE",
                    126,
                    0,
                )
            }),
            Signal::Detection(Origin::Output),
        ),
        (
            "another message of a fast crash",
            with(&|r| r.last = ended("Error", "panic: config missing", 2, 0)),
            Signal::Suspect,
        ),
    ];
    for (what, run, expected) in cases {
        assert_eq!(signal(&run), expected, "{what}");
    }
}

#[test]
fn logs_are_matched_case_insensitively_in_any_bytes() {
    let cases: Vec<(&[u8], Option<&str>)> = vec![
        (b"exec /app: exec format error\n", Some("exec /app: exec format error")),
        (
            b"standard_init_linux.go:228: exec user process caused: exec format error",
            Some("standard_init_linux.go:228: exec user process caused: exec format error"),
        ),
        (
            b"starting\n/bin/sh: /app: Exec format error\nbye\n",
            Some("/bin/sh: /app: Exec format error"),
        ),
        (
            b"/entrypoint.sh: line 5: /usr/bin/app: cannot execute binary file: Exec format error",
            Some("/entrypoint.sh: line 5: /usr/bin/app: cannot execute binary file: Exec format error"),
        ),
        (b"panic: runtime error\n", None),
        (b"exec format", None),
        (b"", None),
        // Invalid UTF-8 and control characters around it: read lossily, cleaned.
        (
            b"\xff\xfe\x1b[31mexec /app: EXEC FORMAT ERROR\x07\r\n",
            Some("\u{fffd}\u{fffd} [31mexec /app: EXEC FORMAT ERROR"),
        ),
    ];
    for (log, expected) in cases {
        assert_eq!(says_exec_format_error(log), expected.is_some(), "{log:?}");
        assert_eq!(evidence_line(log).as_deref(), expected, "{log:?}");
    }
    // A huge line is cut.
    let mut long = b"exec /app: exec format error ".to_vec();
    long.extend(std::iter::repeat_n(b'x', 100_000));
    assert!(evidence_line(&long).unwrap().len() <= 256);
}

#[test]
fn image_ids_name_a_registry_digest_or_nothing() {
    let cases = [
        (format!("registry.example/app@{DIGEST}"), Some(DIGEST)),
        (format!("docker-pullable://app@{DIGEST}"), Some(DIGEST)),
        (DIGEST.to_owned(), None),
        ("registry.example/app:1".to_owned(), None),
        ("app@sha256:abc".to_owned(), None),
        (format!("app@{}", DIGEST.to_uppercase()), None),
        (String::new(), None),
    ];
    for (image_id, expected) in cases {
        assert_eq!(digest_of(&image_id), expected, "{image_id}");
    }
}

fn case<'a>(node: Option<&'a Platform>, image_id: &'a str) -> Case<'a> {
    Case {
        origin: Origin::Output,
        program_overridden: false,
        node,
        image_id,
        mode: Remediate::Evict,
        owner_kind: Some("ReplicaSet"),
        mirror: false,
        deleting: false,
        exempt: false,
    }
}

/// What a plan learns.
type Learn = Result<(String, Platform), NotLearned>;

#[test]
fn plan_table() {
    let arm = Platform::new("linux", "arm64", None);
    let image_id = format!("app@{DIGEST}");
    let learned = Ok((DIGEST.to_owned(), arm.clone()));
    let cases: Vec<(&str, Case<'_>, Learn, Result<(), Kept>)> = vec![
        (
            "learned and evicted",
            case(Some(&arm), &image_id),
            learned.clone(),
            Ok(()),
        ),
        (
            "report mode",
            Case {
                mode: Remediate::Report,
                ..case(Some(&arm), &image_id)
            },
            learned.clone(),
            Err(Kept::NotEvicting),
        ),
        (
            "node unknown",
            case(None, &image_id),
            Err(NotLearned::NodeUnknown),
            Err(Kept::NotLearned),
        ),
        (
            "no digest",
            case(Some(&arm), DIGEST),
            Err(NotLearned::NoDigest),
            Err(Kept::NotLearned),
        ),
        (
            "output of an overridden program is no evidence",
            Case {
                program_overridden: true,
                ..case(Some(&arm), &image_id)
            },
            Err(NotLearned::Overridden),
            Err(Kept::NotLearned),
        ),
        (
            "the runtime's words are, whatever the program",
            Case {
                program_overridden: true,
                origin: Origin::Runtime,
                ..case(Some(&arm), &image_id)
            },
            learned.clone(),
            Ok(()),
        ),
        (
            "no controller",
            Case {
                owner_kind: None,
                ..case(Some(&arm), &image_id)
            },
            learned.clone(),
            Err(Kept::NoController),
        ),
        (
            "DaemonSet",
            Case {
                owner_kind: Some("DaemonSet"),
                ..case(Some(&arm), &image_id)
            },
            learned.clone(),
            Err(Kept::DaemonSet),
        ),
        (
            "static pod",
            Case {
                mirror: true,
                ..case(Some(&arm), &image_id)
            },
            learned.clone(),
            Err(Kept::Mirror),
        ),
        (
            "deleting",
            Case {
                deleting: true,
                ..case(Some(&arm), &image_id)
            },
            learned.clone(),
            Err(Kept::Deleting),
        ),
        (
            "exempt namespace",
            Case {
                exempt: true,
                ..case(Some(&arm), &image_id)
            },
            learned.clone(),
            Err(Kept::Exempt),
        ),
    ];
    for (what, case, learn, evict) in cases {
        let plan = plan(&case);
        assert_eq!(plan.learn, learn, "{what}");
        assert_eq!(plan.evict, evict, "{what}");
    }
    // A node's variant is never learned: the correction covers every variant.
    let arm7 = Platform::new("linux", "arm", Some("v7"));
    assert_eq!(
        plan(&case(Some(&arm7), &image_id)).learn,
        Ok((DIGEST.to_owned(), Platform::new("linux", "arm", None)))
    );
}

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

#[test]
fn placeable_table() {
    let arm = Platform::new("linux", "arm64", None);
    let cluster: BTreeSet<Platform> = [
        Platform::new("linux", "amd64", None),
        Platform::new("linux", "arm64", None),
    ]
    .into();
    let lookup = |image: &str, support: Support| ImageLookup {
        image: image.into(),
        support: Ok(support),
    };
    let images = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
    // The lying image also runs on amd64: its replacement can go there.
    let fine = [lookup("app:1", only(&["linux/amd64", "linux/arm64"]))];
    assert_eq!(
        placeable(&fine, &images(&["app:1"]), "app:1", &arm, &cluster),
        Ok(())
    );
    // Its sidecar runs on arm64 only: nowhere once arm64 is gone for app:1.
    let stuck = [
        lookup("app:1", only(&["linux/amd64", "linux/arm64"])),
        lookup("sidecar:1", only(&["linux/arm64"])),
    ];
    assert_eq!(
        placeable(&stuck, &images(&["app:1", "sidecar:1"]), "app:1", &arm, &cluster),
        Err("no platform of the cluster's nodes (linux/amd64, linux/arm64) runs all its images: app:1 [linux/amd64] sidecar:1 [linux/arm64]".into())
    );
    // An arm64-only cluster: nowhere.
    let arm_only: BTreeSet<Platform> = [arm.clone()].into();
    assert!(placeable(&fine, &images(&["app:1"]), "app:1", &arm, &arm_only).is_err());
    // An arch-neutral sidecar goes anywhere.
    let neutral = [
        lookup("app:1", only(&["linux/amd64", "linux/arm64"])),
        lookup("model:1", Support::Any),
    ];
    assert_eq!(
        placeable(
            &neutral,
            &images(&["app:1", "model:1"]),
            "app:1",
            &arm,
            &cluster
        ),
        Ok(())
    );
    // Never act on uncertainty.
    let unknown = [
        lookup("app:1", only(&["linux/amd64", "linux/arm64"])),
        ImageLookup {
            image: "sidecar:1".into(),
            support: Err(LookupError {
                image: "sidecar:1".into(),
                reason: "registry answered 500".into(),
            }),
        },
    ];
    assert_eq!(
        placeable(
            &unknown,
            &images(&["app:1", "sidecar:1"]),
            "app:1",
            &arm,
            &cluster
        ),
        Err("the platforms of sidecar:1 are unknown (registry answered 500)".into())
    );
}

#[test]
fn notes_say_what_was_seen_learned_and_done() {
    let arm = Platform::new("linux", "arm64", None);
    let told = |learned, evict: &Result<(), Kept>| {
        note(&Told {
            container: "app",
            image: "app:1",
            node_name: "arm-1",
            node: Some(&arm),
            evidence: "exec /app: exec format error",
            seen: Seen::Log,
            learned,
            correction: Some((DIGEST, &arm)),
            evict,
        })
    };
    assert_eq!(
        told(Ok(true), &Ok(())),
        format!("container app (image app:1) cannot run on node arm-1 (linux/arm64): its previous log says \"exec /app: exec format error\"; learned: {DIGEST} does not run on linux/arm64; evicting")
    );
    assert!(told(Ok(false), &Err(Kept::NotEvicting)).ends_with("; known: sha256:1111111111111111111111111111111111111111111111111111111111111111 does not run on linux/arm64"));
    assert!(
        told(Err(NotLearned::Overridden), &Err(Kept::NotLearned)).ends_with(
            "; not learned: the container sets command or args, so its output is no evidence"
        )
    );
    assert!(told(Ok(true), &Err(Kept::Nowhere("no platform".into())))
        .ends_with("; not evicted: no platform"));
    // Hostile lengths are cut to the Events API's bound.
    let long = "x".repeat(5000);
    let text = note(&Told {
        container: "app",
        image: &long,
        node_name: "arm-1",
        node: None,
        evidence: &long,
        seen: Seen::Status,
        learned: Err(NotLearned::NodeUnknown),
        correction: None,
        evict: &Err(Kept::NotLearned),
    });
    assert!(text.len() <= 1024);
}

#[test]
fn records_keep_only_the_statuses_that_are_signals() {
    let image_id = format!("registry.example/app@{DIGEST}");
    let mut pod = PodFixture::new("shop", "web", "arm-1", &["app:1", "sidecar:1"]).json();
    // A healthy pod keeps nothing.
    let healthy: PodRecord = serde_json::from_value(pod.clone()).unwrap();
    assert!(healthy.runs.is_empty());
    // The app crash-loops; its spec overrides args; the message is huge and hostile.
    let mut crash = Crash::new(&image_id, 4);
    crash.message = format!("\u{1b}exec /app: exec format error{}", "y".repeat(100_000));
    crash_loop(&mut pod, 0, &crash);
    pod["spec"]["containers"][0]["args"] = serde_json::json!(["--verbose"]);
    let record: PodRecord = serde_json::from_value(pod).unwrap();
    assert_eq!(record.runs.len(), 1);
    let run = &record.runs[0];
    assert_eq!(run.name, "c0");
    assert_eq!(run.image, "app:1");
    assert_eq!(run.image_id, image_id);
    assert_eq!(run.restart_count, 4);
    assert!(run.program_overridden);
    let last = run.last.as_ref().unwrap();
    assert_eq!(last.message.len(), 512);
    assert_eq!(
        (last.exit_code, last.started_at, last.finished_at),
        (1, Some(1_793_523_600), Some(1_793_523_600))
    );
    assert_eq!(run.waiting.as_ref().unwrap().reason, "CrashLoopBackOff");
    assert_eq!(signal(run), Signal::Detection(Origin::Output));
}

fn entry(digest: &str, arch: &str, time: &str) -> Entry {
    Entry::new(
        "registry.example/app:1",
        digest,
        &Platform::new("linux", arch, None),
        Source::ExecFormatError,
        Evidence {
            namespace: "shop".into(),
            pod: "web-5d8f".into(),
            container: "app".into(),
            node: "arm-1".into(),
            message: "exec /app: exec format error".into(),
            time: time.into(),
        },
    )
}

#[test]
fn entries_round_trip_and_hand_edits_are_refused_one_by_one() {
    let good = entry(DIGEST, "arm64", "2026-11-01T09:00:00Z");
    let value = good.to_json();
    assert_eq!(
        value,
        format!("{{\"image\":\"registry.example/app:1\",\"digest\":\"{DIGEST}\",\"platform\":\"linux/arm64\",\"source\":\"exec-format-error\",\"evidence\":{{\"namespace\":\"shop\",\"pod\":\"web-5d8f\",\"container\":\"app\",\"node\":\"arm-1\",\"message\":\"exec /app: exec format error\",\"time\":\"2026-11-01T09:00:00Z\"}}}}")
    );
    let k = good.key();
    assert_eq!(k, key(DIGEST, "linux/arm64"));
    assert_eq!(k.len(), 32);
    assert_eq!(Entry::parse(&k, &value), Ok(good.clone()));
    let correction = good.correction().unwrap();
    assert_eq!(correction.platform, Platform::new("linux", "arm64", None));
    assert_eq!(
        correction.evidence,
        "pod shop/web-5d8f container app on node arm-1 at 2026-11-01T09:00:00Z: exec /app: exec format error"
    );
    let bad = |what: &str, stored_key: &str, value: String| {
        assert!(Entry::parse(stored_key, &value).is_err(), "{what}: {value}");
    };
    bad("not JSON", &k, "{".into());
    bad("wrong key", "0123", value.clone());
    bad("digest", &k, value.replace(DIGEST, "sha256:abc"));
    bad("platform", &k, value.replace("linux/arm64", "linux"));
    bad(
        "platform chars",
        &k,
        value.replace("linux/arm64", "linux/arm 64"),
    );
    bad("source", &k, value.replace("exec-format-error", "rumour"));
    bad(
        "time",
        &k,
        value.replace("2026-11-01T09:00:00Z", "yesterday"),
    );
    bad("too long", &k, value.replace("arm-1", &"n".repeat(2000)));
    bad("control", &k, value.replace("arm-1", "arm\\u0007"));
    // Hostile lengths are fitted to 1 KiB.
    let huge = Entry::new(
        &"i".repeat(5000),
        DIGEST,
        &Platform::new("linux", "arm64", None),
        Source::ExecFormatError,
        Evidence {
            namespace: "n".repeat(300),
            pod: "p".repeat(300),
            container: "c".repeat(300),
            node: "o".repeat(300),
            message: "\u{1b}m".repeat(1000),
            time: "2026-11-01T09:00:00Z".into(),
        },
    );
    assert!(
        huge.to_json().len() <= MAX_ENTRY_BYTES,
        "{}",
        huge.to_json().len()
    );
    assert!(Entry::parse(&huge.key(), &huge.to_json()).is_ok());
    assert!(parse_platform("linux/arm/v7").is_ok());
}

#[test]
fn a_snapshot_uses_valid_entries_reports_garbage_and_bounds_writes() {
    let digest2 = DIGEST.replace('1', "2");
    let old = entry(DIGEST, "arm64", "2026-11-01T09:00:00Z");
    let new = entry(&digest2, "arm64", "2026-11-02T09:00:00Z");
    let data: BTreeMap<String, String> = [
        (old.key(), old.to_json()),
        (new.key(), new.to_json()),
        ("garbage".to_owned(), "{\"not\":\"an entry\"}".to_owned()),
        (key(DIGEST, "linux/s390x"), "\u{0}".to_owned()),
    ]
    .into();
    let snapshot = Snapshot::read(Some(data.clone()), Some("7".into()), 1000);
    assert!(snapshot.exists);
    assert_eq!(snapshot.len(), 2);
    assert_eq!(snapshot.garbage_count, 2);
    assert_eq!(snapshot.corrections(DIGEST).len(), 1);
    assert!(snapshot.contains_key(&old.key()));
    assert_eq!(
        snapshot.entries(),
        vec![(old.key(), old.clone()), (new.key(), new.clone())]
    );
    assert_eq!(
        snapshot.data(),
        [(old.key(), old.to_json()), (new.key(), new.to_json())].into()
    );
    // Bounded to one: the newest evidence stays.
    let one = Snapshot::read(Some(data.clone()), None, 1);
    assert_eq!(one.keys().collect::<Vec<_>>(), vec![new.key()]);
    // A write adds, keeps one per key, and evicts the oldest evidence first.
    let third = entry(&DIGEST.replace('1', "3"), "arm64", "2026-11-03T09:00:00Z");
    let (written, added) = snapshot.with(&[third.clone(), new.clone()], 2);
    assert_eq!(added, vec![third.key()]);
    assert_eq!(
        written.keys().cloned().collect::<BTreeSet<_>>(),
        [new.key(), third.key()].into()
    );
    // And never past the data bound, whatever the count.
    let many: Vec<Entry> = (0..5000u32)
        .map(|n| {
            let digest = format!("sha256:{:064x}", n);
            let mut e = entry(&digest, "arm64", "2026-11-01T09:00:00Z");
            e.evidence.message = "m".repeat(256);
            e
        })
        .collect();
    let (written, _) = Snapshot::default().with(&many, 5000);
    let bytes: usize = written.iter().map(|(k, v)| k.len() + v.len()).sum();
    assert!(bytes <= MAX_DATA_BYTES, "{bytes}");
    // A view answers the corrections of a digest.
    let view = noe_controller::LearnedView::new(
        noe_controller::LearnedConfig {
            namespace: "noe".into(),
            name: "noe-learned-platforms".into(),
            max_entries: 1000,
        },
        None,
    );
    let before = view.generation();
    let object = k8s_openapi::api::core::v1::ConfigMap {
        data: Some(data),
        ..Default::default()
    };
    view.install(Some(object.clone()));
    assert_eq!(view.for_digest(DIGEST).len(), 1);
    assert!(view.for_digest(&digest2.replace('2', "9")).is_empty());
    assert!(view.knows(DIGEST, &Platform::new("linux", "arm64", None)));
    assert!(view.generation() > before);
    let same = view.generation();
    view.install(Some(object));
    assert_eq!(view.generation(), same, "nothing changed");
}
