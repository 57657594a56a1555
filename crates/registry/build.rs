//! Marks the tests that replay the registry's upstream tables (`../shared/conformance/registry`, or
//! `$NOE_CONFORMANCE_DIR/registry`) as ignored when that data is absent, with
//! `cfg(noe_no_conformance)`: cargo cannot ignore a test at run time, and a test that returned
//! early would report ok for testing nothing. With the data present they run (`.ci/run`).

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rustc-check-cfg=cfg(noe_no_conformance)");
    println!("cargo::rerun-if-env-changed=NOE_CONFORMANCE_DIR");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let shared = manifest.join("../../../shared");
    let dir = std::env::var_os("NOE_CONFORMANCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| shared.join("conformance"));
    let data = dir.join("registry");
    // Watched so the cfg follows the data appearing or going (a path that does not exist would
    // rerun this script at every build).
    let watched = [data.as_path(), dir.as_path(), shared.as_path()]
        .into_iter()
        .find(|path| path.is_dir())
        .unwrap_or(Path::new("build.rs"));
    println!("cargo::rerun-if-changed={}", watched.display());
    if !data.is_dir() {
        println!("cargo::rustc-cfg=noe_no_conformance");
    }
}
