// The conformance switch shared by the build scripts of noe-core, noe-registry and noe (each
// `include!`s this file; it is not a crate of its own, and it lives under crates/ so the image's
// build context holds it).
//
// Marks the tests that replay `../shared/conformance/<part>` (or `$NOE_CONFORMANCE_DIR/<part>`)
// as ignored when that data is absent, with `cfg(noe_no_conformance)`: cargo cannot ignore a
// test at run time, and a test that returned early would report ok for testing nothing. With the
// data present they run (`.ci/run`).

/// Sets `cfg(noe_no_conformance)` when the conformance data `part` (`placement`, `registry`,
/// `admission`) is absent.
fn conformance(part: &str) {
    use std::path::{Path, PathBuf};

    println!("cargo::rustc-check-cfg=cfg(noe_no_conformance)");
    println!("cargo::rerun-if-env-changed=NOE_CONFORMANCE_DIR");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let shared = manifest.join("../../../shared");
    let dir = std::env::var_os("NOE_CONFORMANCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| shared.join("conformance"));
    let data = dir.join(part);
    // Watched so the cfg follows the data appearing or going (a path that does not exist would
    // rerun the script at every build: without any, the script itself is watched).
    let watched = [data.as_path(), dir.as_path(), shared.as_path()]
        .into_iter()
        .find(|path| path.is_dir())
        .unwrap_or(Path::new("build.rs"));
    println!("cargo::rerun-if-changed={}", watched.display());
    if !data.is_dir() {
        println!("cargo::rustc-cfg=noe_no_conformance");
    }
}
