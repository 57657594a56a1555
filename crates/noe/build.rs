//! Sets `NOE_BUILD_REVISION` for `noe_build_info{revision}`: the variable of the same name when the
//! build sets it (the Dockerfile's build argument; a build context has no `.git`), else the commit
//! `git` names for the source tree, else nothing (the metric then says `unknown`).
//!
//! Also marks the tests that replay the captured admission requests
//! (`../shared/conformance/admission`, or `$NOE_CONFORMANCE_DIR/admission`) as ignored when that
//! data is absent, with `cfg(noe_no_conformance)`: cargo cannot ignore a test at run time, and a
//! test that returned early would report ok for testing nothing. With the data present they run
//! (`.ci/run`).

use std::path::{Path, PathBuf};
use std::process::Command;

const VAR: &str = "NOE_BUILD_REVISION";

fn main() {
    conformance();
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

/// `cfg(noe_no_conformance)` when the captured admission requests are absent.
fn conformance() {
    println!("cargo::rustc-check-cfg=cfg(noe_no_conformance)");
    println!("cargo::rerun-if-env-changed=NOE_CONFORMANCE_DIR");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let shared = manifest.join("../../../shared");
    let dir = std::env::var_os("NOE_CONFORMANCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| shared.join("conformance"));
    let data = dir.join("admission");
    // Watched so the cfg follows the data appearing or going (a path that does not exist would
    // rerun this script at every build).
    let watched = [data.as_path(), dir.as_path(), shared.as_path()]
        .into_iter()
        .find(|path| path.is_dir());
    if let Some(watched) = watched {
        println!("cargo::rerun-if-changed={}", watched.display());
    }
    if !data.is_dir() {
        println!("cargo::rustc-cfg=noe_no_conformance");
    }
}
