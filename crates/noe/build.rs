//! Sets `NOE_BUILD_REVISION` for `noe_build_info{revision}`: the variable of the same name when the
//! build sets it (the Dockerfile's build argument; a build context has no `.git`), else the commit
//! `git` names for the source tree, else nothing (the metric then says `unknown`).
//!
//! Also marks the tests that replay the captured admission requests
//! (`../shared/conformance/admission`) as ignored when that data is absent
//! (`crates/build/conformance.rs`).

use std::path::Path;
use std::process::Command;

include!("../build/conformance.rs");

const VAR: &str = "NOE_BUILD_REVISION";

fn main() {
    conformance("admission");
    println!("cargo:rerun-if-env-changed={VAR}");
    let revision = match std::env::var(VAR) {
        Ok(set) => Some(set),
        Err(_) => from_git(),
    };
    if let Some(revision) = revision.filter(|r| valid(r)) {
        println!("cargo:rustc-env={VAR}={revision}");
    }
}

/// The checked-out commit; the HEAD file and the branch's ref are watched so a new commit runs
/// this again (only the files that exist: a missing one would run it on every build).
fn from_git() -> Option<String> {
    let revision = git(&["rev-parse", "--short=12", "HEAD"])?;
    for watched in ["HEAD", "packed-refs"] {
        watch(git(&["rev-parse", "--git-path", watched]));
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch(git(&["rev-parse", "--git-path", &branch]));
    }
    Some(revision)
}

fn watch(path: Option<String>) {
    if let Some(path) = path.filter(|p| Path::new(p).is_file()) {
        println!("cargo:rerun-if-changed={path}");
    }
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.trim().to_owned())
}

/// A label value from the build, bounded: hex digits, a tag or a version, at most 64 characters.
fn valid(revision: &str) -> bool {
    !revision.is_empty()
        && revision.len() <= 64
        && revision
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+'))
}
