//! `noe inspect` with `--containerd-config-path` holding a `certs.d` mirror, against real
//! registries with different htpasswd users: the flags wire the containerd hosts into the
//! resolver, and the credentials each host gets are the ones matched for that host.

use std::path::Path;

use noe_test_support::{push_standard_fixtures, DockerConfig, Registry};
use serde_json::Value;

async fn inspect(args: &[String]) -> (i32, Value, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_noe"))
        .arg("inspect")
        .arg("--output=json")
        .args(args)
        .env("NOE_LOG_LEVEL", "error")
        .env_remove("RUST_LOG")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let json = stdout
        .lines()
        .next()
        .map_or(Value::Null, |line| serde_json::from_str(line).unwrap());
    (
        output.status.code().unwrap_or(-1),
        json,
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// `DIR/config.toml` with `config_path = DIR/certs.d`, and `DIR/certs.d/<registry>/hosts.toml`.
fn containerd_dir(dir: &Path, registry: &str, hosts_toml: &str) {
    let certs = dir.join("certs.d");
    std::fs::create_dir_all(certs.join(registry)).unwrap();
    std::fs::write(certs.join(registry).join("hosts.toml"), hosts_toml).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = {:?}\n",
            certs.display().to_string()
        ),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_uses_the_mirror_with_the_mirror_credentials() {
    let origin = Registry::builder()
        .htpasswd("alice", "origin-secret")
        .start()
        .await
        .unwrap();
    let mirror = Registry::builder()
        .htpasswd("bob", "mirror-secret")
        .start()
        .await
        .unwrap();
    let fixtures = push_standard_fixtures(&origin).await.unwrap();
    push_standard_fixtures(&mirror).await.unwrap();
    let fixture = &fixtures.docker_list;
    let dir = tempfile::tempdir().unwrap();
    let containerd = dir.path().join("containerd");
    containerd_dir(
        &containerd,
        &origin.host(),
        &format!("[host.\"http://{}\"]\n", mirror.host()),
    );
    let docker = DockerConfig::new()
        .auth(&origin.host(), "alice", "origin-secret")
        .auth(&mirror.host(), "bob", "mirror-secret")
        .write_to(dir.path())
        .unwrap();
    let flags = |containerd: &Path| {
        vec![
            format!("--insecure-registries={},{}", origin.host(), mirror.host()),
            format!(
                "--allow-registry-cidrs={}",
                noe_test_support::LOOPBACK_CIDRS
            ),
            format!("--docker-config-path={}", docker.display()),
            format!("--containerd-config-path={}", containerd.display()),
            fixture.reference(),
        ]
    };
    origin.reset_requests();
    mirror.reset_requests();

    let (code, json, stderr) = inspect(&flags(&containerd)).await;
    assert_eq!(code, 0, "{stderr}");
    let at_mirror = fixture
        .reference()
        .replacen(&origin.host(), &mirror.host(), 1);
    assert_eq!(json["resolved"], at_mirror.as_str(), "{json}");
    assert_eq!(json["image"], fixture.reference().as_str());
    assert_eq!(json["digest"], fixture.digest.as_str());
    assert!(
        json["credentialSource"]
            .as_str()
            .is_some_and(|s| s.starts_with("docker-config:")),
        "{json}"
    );
    assert_eq!(
        origin.requests(),
        vec![],
        "the origin must not be contacted"
    );
    assert!(mirror.request_count() >= 2, "{:?}", mirror.requests());

    // Without an entry for the mirror's host, the mirror gets no credentials, refuses, and the
    // origin answers with alice's.
    let only_origin = DockerConfig::new()
        .auth(&origin.host(), "alice", "origin-secret")
        .write_to(&dir.path().join("containerd"))
        .unwrap();
    origin.reset_requests();
    let mut args = flags(&containerd);
    for arg in args.iter_mut() {
        if arg.starts_with("--docker-config-path=") {
            *arg = format!("--docker-config-path={}", only_origin.display());
        }
    }
    let (code, json, stderr) = inspect(&args).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(json["resolved"], fixture.reference().as_str(), "{json}");
    assert!(origin.request_count() >= 1);
}
