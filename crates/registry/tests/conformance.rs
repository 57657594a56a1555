//! Replays upstream projects' own test tables against this crate: distribution/reference,
//! the kubelet's keyring, docker config, credential provider plugin and config tests, containerd's
//! `hosts.toml` tests, docker/cli's config and hostname tests, and three `WWW-Authenticate`
//! suites.
//!
//! The tables are not part of this repository. They are read from `NOE_CONFORMANCE_DIR`, else
//! from `../shared/conformance` beside the workspace; when neither exists the test says so and
//! passes (CI has no copy). Every case that does not pass must be listed in [`known`] with the
//! reason docs/compatibility.md ("Registry conformance") gives; a listed case that starts passing
//! fails the test too, so the list stays true.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod conformance {
    pub mod challenge;
    pub mod containerd;
    pub mod docker_cli;
    pub mod known;
    pub mod kubelet;
    pub mod provider;
    pub mod reference;
    pub mod table;
}

use std::collections::BTreeSet;
use std::path::PathBuf;

use conformance::table::Tally;

/// Where the tables are, if anywhere.
/// The upstream tables; the replay is ignored when they are absent at build time (`build.rs`
/// sets `noe_no_conformance`), and fails (never passes for testing nothing) when they went
/// missing since.
fn conformance_dir() -> PathBuf {
    let dir = match std::env::var_os("NOE_CONFORMANCE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance"),
    };
    let registry = dir.join("registry");
    assert!(
        registry.is_dir(),
        "{} went missing since the build",
        registry.display()
    );
    registry
}

#[tokio::test]
#[cfg_attr(
    noe_no_conformance,
    ignore = "needs ../shared/conformance/registry (or NOE_CONFORMANCE_DIR)"
)]
async fn upstream_tables_replay() {
    let dir = conformance_dir();
    let tallies: Vec<Tally> = vec![
        conformance::reference::distribution(&dir),
        conformance::containerd::hosts(&dir).await,
        conformance::docker_cli::config(&dir).await,
        conformance::docker_cli::convert_to_hostname(&dir),
        conformance::kubelet::docker_config(&dir),
        conformance::kubelet::keyring(&dir),
        conformance::kubelet::urls_match(&dir),
        conformance::provider::plugin(&dir).await,
        conformance::provider::config(&dir),
        conformance::challenge::www_authenticate(&dir),
    ];
    let (mut passed, mut total) = (0, 0);
    let mut failed: BTreeSet<(String, String)> = BTreeSet::new();
    for tally in &tallies {
        println!(
            "{:<40} {:>4} / {:>4} pass",
            tally.table,
            tally.passed,
            tally.total()
        );
        passed += tally.passed;
        total += tally.total();
        for (id, detail) in &tally.failed {
            println!("    differs: {id}: {detail}");
            failed.insert((tally.table.to_owned(), id.clone()));
        }
    }
    println!("{:<40} {passed:>4} / {total:>4} pass", "all tables");
    let known: BTreeSet<(String, String)> = conformance::known::DIFFERENCES
        .iter()
        .map(|(table, id, _)| ((*table).to_owned(), (*id).to_owned()))
        .collect();
    let unexplained: Vec<_> = failed.difference(&known).collect();
    let now_passing: Vec<_> = known.difference(&failed).collect();
    assert!(
        unexplained.is_empty() && now_passing.is_empty(),
        "cases failing without a documented reason: {unexplained:#?}\n\
         documented differences that now pass (remove them from known.rs and docs/compatibility.md): {now_passing:#?}"
    );
}
