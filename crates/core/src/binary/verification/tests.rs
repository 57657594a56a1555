#![allow(clippy::unwrap_used)]

use std::ops::ControlFlow;

use proptest::prelude::*;

use super::*;
use crate::binary::elf::synthetic_header;
use crate::binary::tar::{Kind, TarReader};

/// One entry of a test layer.
enum E<'a> {
    /// An executable file with these bytes.
    Exe(&'a str, Vec<u8>),
    /// A file of mode 0644.
    Data(&'a str, &'a [u8]),
    Dir(&'a str),
    Sym(&'a str, &'a str),
    Hard(&'a str, &'a str),
    /// `.wh.NAME` hiding this path.
    Wh(&'a str),
    /// `.wh..wh..opq` in this directory.
    Opq(&'a str),
}

fn elf(arch: &str) -> Vec<u8> {
    synthetic_header(Machine::expected(&linux(arch)).unwrap())
}

fn linux(arch: &str) -> Platform {
    Platform::new("linux", arch, None)
}

fn script(line: &str) -> Vec<u8> {
    format!("{line}\nexec \"$@\"\n").into_bytes()
}

fn layer(entries: &[E<'_>]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let header = |kind, mode, size| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size);
        h
    };
    for entry in entries {
        match entry {
            E::Exe(path, bytes) => b.append_data(
                &mut header(tar::EntryType::Regular, 0o755, bytes.len() as u64),
                path,
                &bytes[..],
            ),
            E::Data(path, bytes) => b.append_data(
                &mut header(tar::EntryType::Regular, 0o644, bytes.len() as u64),
                path,
                *bytes,
            ),
            E::Dir(path) => b.append_data(
                &mut header(tar::EntryType::Directory, 0o755, 0),
                path,
                &[][..],
            ),
            E::Sym(path, target) => {
                b.append_link(&mut header(tar::EntryType::Symlink, 0o777, 0), path, target)
            }
            E::Hard(path, target) => {
                b.append_link(&mut header(tar::EntryType::Link, 0o755, 0), path, target)
            }
            E::Wh(path) => {
                let path = path.trim_start_matches('/');
                let whiteout = match path.rsplit_once('/') {
                    Some((dir, name)) => format!("{dir}/.wh.{name}"),
                    None => format!(".wh.{path}"),
                };
                b.append_data(
                    &mut header(tar::EntryType::Regular, 0o644, 0),
                    whiteout,
                    &[][..],
                )
            }
            E::Opq(dir) => b.append_data(
                &mut header(tar::EntryType::Regular, 0o644, 0),
                format!("{dir}/.wh..wh..opq"),
                &[][..],
            ),
        }
        .unwrap();
    }
    b.into_inner().unwrap()
}

fn config(entrypoint: &[&str], extra: &str) -> Run {
    let json = format!(
        r#"{{"config":{{"Entrypoint":{}{extra}}}}}"#,
        serde_json::to_string(entrypoint).unwrap()
    );
    Run::from_config(json.as_bytes()).unwrap()
}

/// Verifies `layers` (top first) fed in chunks of 100 bytes; the report and the layers begun.
fn verify(arch: &str, run: &Run, layers: &[Vec<u8>]) -> (Report, usize) {
    let mut v = match Verification::new(&linux(arch), run, layers.len()) {
        Ok(v) => v,
        Err(report) => return (report, 0),
    };
    for bytes in layers {
        v.begin_layer();
        let mut reader = TarReader::new();
        let mut decided = None;
        for chunk in bytes.chunks(100) {
            let flow = reader
                .push(chunk, &mut |e: &Entry<'_>| match v.entry(e) {
                    Some(report) => {
                        decided = Some(report.clone());
                        ControlFlow::Break(())
                    }
                    None => ControlFlow::Continue(()),
                })
                .unwrap();
            if flow.is_break() {
                break;
            }
        }
        if let Some(report) = decided {
            return (report, v.layers_read());
        }
        if let Some(report) = v.end_layer() {
            return (report.clone(), v.layers_read());
        }
    }
    panic!("the last layer decides")
}

fn summary(report: &Report) -> (String, Option<&str>) {
    (report.summary(), report.program.as_deref())
}

#[test]
fn the_program_is_the_platforms_machine_or_a_mismatch() {
    let image = [layer(&[E::Exe("app", elf("amd64"))])];
    let run = config(&["/app"], "");
    let (report, _) = verify("amd64", &run, &image);
    assert_eq!(summary(&report), ("verified".into(), Some("/app")));
    assert_eq!(report.evidence, "/app is an x86-64 ELF (EM_X86_64)");
    let (report, _) = verify("arm64", &run, &image);
    assert_eq!(report.verdict, Verdict::Mismatch);
    assert_eq!(report.evidence, "/app is an x86-64 ELF (EM_X86_64)");
    assert_eq!(report.machine.unwrap().name(), "x86-64");
    let correction = report.correction("sha256:ab", &linux("arm64")).unwrap();
    assert_eq!(correction.platform, linux("arm64"));
}

#[test]
fn every_machine_of_the_table_verifies_its_own_platform() {
    let all = [
        "amd64", "arm64", "arm", "386", "ppc64le", "s390x", "riscv64", "loong64",
    ];
    for arch in all {
        let image = [layer(&[E::Exe("app", elf(arch))])];
        let run = config(&["/app"], "");
        for other in all {
            let (report, _) = verify(other, &run, &image);
            let expected = if other == arch {
                "verified"
            } else {
                "mismatch"
            };
            assert_eq!(report.summary(), expected, "{arch} image on {other}");
        }
    }
}

#[test]
fn the_search_stops_in_the_first_layer_that_holds_the_program() {
    let top = layer(&[E::Data("etc/app.conf", b"x"), E::Exe("app", elf("arm64"))]);
    let lower = layer(&[E::Exe("app", elf("amd64"))]);
    let run = config(&["/app"], "");
    let (report, read) = verify("arm64", &run, &[top.clone(), lower.clone(), lower.clone()]);
    assert_eq!((report.summary(), read), ("verified".into(), 1));
    // Only in a lower layer.
    let (report, read) = verify("amd64", &run, &[layer(&[E::Dir("etc")]), lower]);
    assert_eq!((report.summary(), read), ("verified".into(), 2));
}

#[test]
fn whiteouts_and_opaque_directories_hide_lower_layers() {
    let lower = layer(&[E::Exe("opt/app", elf("amd64")), E::Exe("app", elf("amd64"))]);
    let cases: [(Vec<E<'_>>, &str, &str); 5] = [
        (vec![E::Wh("app")], "/app", "unverifiable: not-found"),
        (vec![E::Wh("opt")], "/opt/app", "unverifiable: not-found"),
        (
            vec![E::Opq("opt"), E::Data("opt/other", b"")],
            "/opt/app",
            "unverifiable: not-found",
        ),
        // The opaque layer's own entries stay.
        (
            vec![E::Opq("opt"), E::Exe("opt/app", elf("arm64"))],
            "/opt/app",
            "mismatch",
        ),
        // A whiteout elsewhere hides nothing here.
        (vec![E::Wh("opt/other")], "/opt/app", "verified"),
    ];
    for (top, program, expected) in cases {
        let (report, _) = verify(
            "amd64",
            &config(&[program], ""),
            &[layer(&top), lower.clone()],
        );
        assert_eq!(report.summary(), expected, "{program}");
    }
}

#[test]
fn symlinks_are_followed_in_the_merged_view() {
    // A chain: absolute, then relative through `..`.
    let chain = [layer(&[
        E::Sym("app", "/bin/real"),
        E::Sym("bin/real", "../opt/x"),
        E::Exe("opt/x", elf("arm64")),
    ])];
    let (report, _) = verify("arm64", &config(&["/app"], ""), &chain);
    assert_eq!(summary(&report), ("verified".into(), Some("/opt/x")));

    // A loop ends as not found.
    let loops = [layer(&[E::Sym("a", "/b"), E::Sym("b", "a")])];
    let (report, _) = verify("arm64", &config(&["/a"], ""), &loops);
    assert_eq!(report.summary(), "unverifiable: not-found");

    // A link in a lower layer to a file in an upper one (read once).
    let up = [
        layer(&[E::Exe("opt/real", elf("arm64"))]),
        layer(&[E::Sym("app", "opt/real")]),
    ];
    let (report, read) = verify("arm64", &config(&["/app"], ""), &up);
    assert_eq!(
        (summary(&report), read),
        (("verified".into(), Some("/opt/real")), 2)
    );

    // Debian's merged /usr: /bin is a link in the base layer, /usr/bin/sh a link to dash.
    let base = layer(&[
        E::Sym("bin", "usr/bin"),
        E::Exe("usr/bin/dash", elf("amd64")),
        E::Sym("usr/bin/sh", "dash"),
    ]);
    let image = [layer(&[E::Data("usr/bin/other", b"")]), base.clone()];
    let (report, _) = verify("amd64", &config(&["/bin/sh"], ""), &image);
    assert_eq!(summary(&report), ("verified".into(), Some("/usr/bin/dash")));

    // An upper directory replaces a lower link at the same path.
    let over = [
        layer(&[E::Dir("bin"), E::Exe("bin/sh", elf("arm64"))]),
        base,
    ];
    let (report, _) = verify("arm64", &config(&["/bin/sh"], ""), &over);
    assert_eq!(summary(&report), ("verified".into(), Some("/bin/sh")));
}

#[test]
fn hard_links_are_followed_in_their_layer_and_below() {
    let same = [layer(&[
        E::Exe("usr/bin/a", elf("s390x")),
        E::Hard("usr/bin/b", "usr/bin/a"),
    ])];
    let (report, _) = verify("s390x", &config(&["/usr/bin/b"], ""), &same);
    assert_eq!(summary(&report), ("verified".into(), Some("/usr/bin/a")));
    // The target in a lower layer; an upper layer's file at the target path is another file.
    let lower = [
        layer(&[E::Exe("opt/real", elf("arm64"))]),
        layer(&[E::Hard("app", "opt/real")]),
        layer(&[E::Exe("opt/real", elf("amd64"))]),
    ];
    let (report, _) = verify("amd64", &config(&["/app"], ""), &lower);
    assert_eq!(summary(&report), ("verified".into(), Some("/opt/real")));
}

#[test]
fn a_script_is_followed_to_its_interpreter_once() {
    let image = [layer(&[
        E::Exe("entry.sh", script("#!/bin/sh")),
        E::Exe("bin/sh", elf("amd64")),
    ])];
    let (report, _) = verify("arm64", &config(&["/entry.sh"], ""), &image);
    assert_eq!(summary(&report), ("mismatch".into(), Some("/entry.sh")));
    assert_eq!(
        report.evidence,
        "/entry.sh runs /bin/sh, an x86-64 ELF (EM_X86_64)"
    );
    // `env NAME` through PATH, the interpreter in a lower layer.
    let image = [
        layer(&[E::Exe("srv/run.py", script("#!/usr/bin/env python3"))]),
        layer(&[
            E::Exe("usr/bin/env", elf("arm64")),
            E::Exe("usr/local/bin/python3", elf("arm64")),
        ]),
    ];
    let run = config(
        &["run.py"],
        r#","WorkingDir":"/srv","Env":["PATH=/srv:/usr/local/bin"]"#,
    );
    let (report, _) = verify("arm64", &run, &image);
    assert_eq!(summary(&report), ("verified".into(), Some("/srv/run.py")));
    assert!(
        report.evidence.contains("/usr/local/bin/python3"),
        "{}",
        report.evidence
    );
    // An interpreter that is a script itself, and one that is missing.
    let image = [layer(&[
        E::Exe("a.sh", script("#!/b.sh")),
        E::Exe("b.sh", script("#!/bin/sh")),
        E::Exe("c.sh", script("#!/nowhere/sh")),
    ])];
    let (report, _) = verify("amd64", &config(&["/a.sh"], ""), &image);
    assert_eq!(report.summary(), "unverifiable: not-elf");
    let (report, _) = verify("amd64", &config(&["/c.sh"], ""), &image);
    assert_eq!(report.summary(), "unverifiable: not-found");
    assert_eq!(
        report.evidence,
        "/c.sh runs /nowhere/sh: no file at /nowhere/sh"
    );
}

#[test]
fn a_bare_name_goes_through_path() {
    let run = config(&["tool"], r#","Env":["PATH=/a:/b"]"#);
    // Both in one layer: PATH's order wins even when the later one comes first in the tar.
    let image = [layer(&[
        E::Exe("b/tool", elf("arm64")),
        E::Exe("a/tool", elf("amd64")),
    ])];
    let (report, _) = verify("amd64", &run, &image);
    assert_eq!(summary(&report), ("verified".into(), Some("/a/tool")));
    // The topmost layer holding one decides (see the module's documentation).
    let image = [
        layer(&[E::Exe("b/tool", elf("arm64"))]),
        layer(&[E::Exe("a/tool", elf("amd64"))]),
    ];
    let (report, read) = verify("arm64", &run, &image);
    assert_eq!(
        (summary(&report), read),
        (("verified".into(), Some("/b/tool")), 1)
    );
    // None of them.
    let (report, _) = verify("arm64", &run, &[layer(&[E::Dir("a")])]);
    assert_eq!(report.summary(), "unverifiable: not-found");
    assert_eq!(report.evidence, "no tool in PATH");
    // Relative to the working directory.
    let run = config(&["./bin/app"], r#","WorkingDir":"/srv""#);
    let image = [layer(&[E::Exe("srv/bin/app", elf("riscv64"))])];
    assert_eq!(verify("riscv64", &run, &image).0.summary(), "verified");
}

#[test]
fn what_is_not_an_elf_program_is_unverifiable() {
    let image = [layer(&[
        E::Data("app.jar", b"PK\x03\x04"),
        E::Data("lib.so", &elf("amd64")),
        E::Dir("dir"),
        E::Exe("empty", Vec::new()),
    ])];
    for (program, expected) in [
        ("/app.jar", "unverifiable: not-elf"),
        ("/lib.so", "unverifiable: not-elf"),
        ("/dir", "unverifiable: not-found"),
        ("/empty", "unverifiable: not-elf"),
        ("/app.jar/x", "unverifiable: not-found"),
    ] {
        let (report, _) = verify("amd64", &config(&[program], ""), &image);
        assert_eq!(report.summary(), expected, "{program}");
    }
}

#[test]
fn some_images_are_decided_before_reading() {
    let run = config(&["/app"], "");
    let windows = Verification::new(&Platform::new("windows", "amd64", None), &run, 1);
    assert_eq!(windows.unwrap_err().summary(), "unverifiable: windows");
    let wasm = Verification::new(&linux("wasm"), &run, 1);
    assert_eq!(
        wasm.unwrap_err().summary(),
        "unverifiable: unknown-platform"
    );
    let none = Verification::new(&linux("amd64"), &Run::default(), 1);
    assert_eq!(none.unwrap_err().summary(), "unverifiable: not-found");
    let many = Verification::new(&linux("amd64"), &run, MAX_LAYERS + 1);
    assert_eq!(many.unwrap_err().summary(), "unverifiable: budget");
    let empty = Verification::new(&linux("amd64"), &run, 0);
    assert_eq!(empty.unwrap_err().summary(), "unverifiable: not-found");
}

fn entry<'a>(path: &'a str, kind: Kind, link: &'a str) -> Entry<'a> {
    Entry {
        path,
        kind,
        link,
        mode: 0o755,
        head: b"",
    }
}

#[test]
fn entries_and_memory_are_bounded() {
    let run = config(&["/app"], "");
    let mut v = Verification::new(&linux("amd64"), &run, 1).unwrap();
    v.begin_layer();
    let mut path = String::new();
    let mut last = None;
    for i in 0..=crate::binary::MAX_ENTRIES {
        path.clear();
        path.push_str(&format!("/d/{i}"));
        last = v.entry(&entry(&path, Kind::Dir, "")).cloned();
        if last.is_some() {
            break;
        }
    }
    assert_eq!(last.unwrap().summary(), "unverifiable: budget");
    // Four bytes per plain entry, grown by doubling.
    assert!(v.buffered() <= 2 * 1024 * 1024, "{}", v.buffered());

    // Links are remembered within their bound.
    let mut v = Verification::new(&linux("amd64"), &run, 1).unwrap();
    v.begin_layer();
    let target = "t".repeat(4000);
    let mut outcome = None;
    for i in 0..100 {
        let path = format!("/l/{i}");
        if let Some(report) = v.entry(&entry(&path, Kind::Symlink, &target)) {
            outcome = Some(report.clone());
            break;
        }
    }
    assert_eq!(outcome.unwrap().summary(), "unverifiable: budget");
    assert!(v.buffered() <= 2 * 1024 * 1024);
}

#[test]
fn a_link_target_beyond_the_path_bound_is_budget() {
    let run = config(&["/app"], "");
    let mut v = Verification::new(&linux("amd64"), &run, 1).unwrap();
    v.begin_layer();
    let target = "x/".repeat(2100);
    let report = v.entry(&entry("/app", Kind::Symlink, &target)).cloned();
    assert_eq!(report.unwrap().summary(), "unverifiable: budget");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Random layers of links, whiteouts and files: always a report, never a panic.
    #[test]
    fn random_layers_always_end_in_a_report(
        layers in proptest::collection::vec(
            proptest::collection::vec((0u8..7, 0usize..6, 0usize..6), 0..12),
            1..4,
        ),
        arch in proptest::sample::select(vec!["amd64", "arm64"]),
    ) {
        let names = ["/app", "/bin", "/bin/app", "/usr", "/usr/bin/app", "/x"];
        let targets = ["/app", "bin", "../usr/bin/app", "/usr/bin", "app", "x"];
        let built: Vec<Vec<u8>> = layers
            .iter()
            .map(|entries| {
                let mut seen = std::collections::HashSet::new();
                let list: Vec<E<'_>> = entries
                    .iter()
                    .filter(|(_, n, _)| seen.insert(*n))
                    .map(|&(kind, n, t)| {
                        let name = &names[n][1..];
                        match kind {
                            0 => E::Exe(name, elf("amd64")),
                            1 => E::Exe(name, elf("arm64")),
                            2 => E::Sym(name, targets[t]),
                            3 => E::Dir(name),
                            4 => E::Wh(names[n]),
                            5 => E::Exe(name, script("#!/usr/bin/env app")),
                            _ => E::Hard(name, targets[t].trim_start_matches("../")),
                        }
                    })
                    .collect();
                layer(&list)
            })
            .collect();
        let run = config(&["app"], r#","Env":["PATH=/bin:/usr/bin:/"]"#);
        let (report, _) = verify(arch, &run, &built);
        prop_assert!(!report.evidence.is_empty());
    }
}
