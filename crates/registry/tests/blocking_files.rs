//! Credential files that block on read (a FIFO stands in for a hung mount) never hold a lookup
//! longer than the read timeout, never hide the other files' credentials, and never keep the
//! runtime (the process) from ending.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use noe_credentials::Credential;
use noe_credentials::{Sources, SourcesConfig};
use noe_registry::hosts::ContainerdHosts;

/// Bound on a whole test step: only reached if a read blocks without its timeout.
const HANG_GUARD: Duration = Duration::from_secs(30);
/// The read timeout: long enough that a regular file is read within it on a loaded machine.
const READ_TIMEOUT: Duration = Duration::from_secs(1);

fn fifo(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let status = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
    path
}

/// Opens each FIFO for writing and closes it, so threads blocked reading them end.
fn release(fifos: &[PathBuf]) {
    for path in fifos {
        let _ = std::fs::OpenOptions::new().write(true).open(path);
    }
}

fn docker_config(dir: &Path) -> PathBuf {
    let path = dir.join("config.json");
    let auth = base64::engine::general_purpose::STANDARD.encode("good:pw");
    std::fs::write(
        &path,
        format!(r#"{{"auths":{{"registry.example":{{"auth":"{auth}"}}}}}}"#),
    )
    .unwrap();
    path
}

fn config(docker: Vec<PathBuf>, containerd: Vec<PathBuf>) -> SourcesConfig {
    SourcesConfig {
        docker_config_paths: Some(docker),
        containerd_config_paths: Some(containerd),
        helper_dirs: Some(Vec::new()),
        file_read_timeout: Some(READ_TIMEOUT),
        ..SourcesConfig::default()
    }
}

#[tokio::test]
async fn a_fifo_docker_config_neither_blocks_nor_hides_the_other_files() {
    let dir = tempfile::tempdir().unwrap();
    let blocked = fifo(dir.path(), "kubelet-config.json");
    let good = docker_config(dir.path());
    let sources = tokio::time::timeout(
        HANG_GUARD,
        Sources::new(config(vec![blocked.clone(), good], Vec::new())),
    )
    .await
    .expect("Sources::new waited on a FIFO")
    .unwrap();
    for _ in 0..3 {
        let candidates = tokio::time::timeout(
            HANG_GUARD,
            sources.candidates("registry.example/team/app:1"),
        )
        .await
        .expect("a lookup waited on a FIFO");
        let credentials: Vec<Credential> = candidates.into_iter().map(|c| c.credential).collect();
        assert_eq!(
            credentials,
            [Credential::Basic {
                username: "good".into(),
                password: "pw".into()
            }]
        );
    }
    release(&[blocked]);
}

#[tokio::test]
async fn a_fifo_containerd_config_gives_no_configuration_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let blocked = fifo(dir.path(), "config.toml");
    let sources = tokio::time::timeout(
        HANG_GUARD,
        Sources::new(config(Vec::new(), vec![blocked.clone()])),
    )
    .await
    .expect("Sources::new waited on a FIFO")
    .unwrap();
    let (candidates, hosts) = tokio::time::timeout(HANG_GUARD, async {
        (
            sources.candidates("registry.example/app:1").await,
            ContainerdHosts::new(sources.containerd().clone())
                .hosts("registry.example")
                .await,
        )
    })
    .await
    .expect("a lookup waited on a FIFO");
    assert!(candidates.is_empty());
    assert!(hosts.is_none());
    release(&[blocked]);
}

#[tokio::test]
async fn a_fifo_provider_config_fails_start_up_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let blocked = fifo(dir.path(), "provider.yaml");
    let result = tokio::time::timeout(
        HANG_GUARD,
        Sources::new(SourcesConfig {
            provider_bin_dir: Some(dir.path().to_owned()),
            provider_config: Some(blocked.clone()),
            ..config(Vec::new(), Vec::new())
        }),
    )
    .await
    .expect("Sources::new waited on a FIFO");
    let error = result.unwrap_err();
    let chain = format!(
        "{error}: {}",
        std::error::Error::source(&error)
            .map(|s| s.to_string())
            .unwrap_or_default()
    );
    assert!(chain.contains("provider.yaml"), "{chain}");
    release(&[blocked]);
}

/// What keeps a process alive after SIGTERM: `main` returns, the runtime is dropped, and tokio
/// waits for its blocking-pool threads. Reads stuck on a FIFO must not be among them.
#[test]
fn a_read_stuck_on_a_fifo_does_not_hold_the_runtime_at_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let blocked = fifo(dir.path(), "config.json");
    let docker = blocked.clone();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let sources = Sources::new(config(vec![docker], Vec::new()))
                .await
                .unwrap();
            sources.candidates("registry.example/app:1").await
        });
        drop(runtime);
        let _ = done.send(());
    });
    let ended = finished.recv_timeout(HANG_GUARD);
    release(&[blocked]);
    assert!(
        ended.is_ok(),
        "the runtime did not shut down while a read was stuck"
    );
}
