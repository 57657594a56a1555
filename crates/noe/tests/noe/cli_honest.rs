//! The CLI is honest in CI: `explain` fails when a lookup failed or the file would be refused by
//! the API server, `inspect -o json` gives every image a record, a plain-HTTP registry is named
//! as such, a hung registry host fails fast, `--help` shows only what a subcommand accepts, the
//! kubeconfig is found as kubectl finds it, and a server without a certificate is refused.

use std::path::Path;

use super::harness;

use harness::{pod, run_noe as noe, Harness};
use noe_test_support::{Behavior, FakeRegistry, KubeApi};
use serde_json::Value;

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// `noe` with extra environment variables, and `HOME` set.
async fn noe_env(args: &[String], env: &[(&str, &Path)], home: &Path) -> (i32, String, String) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_noe"));
    command
        .args(args)
        .env("NOE_LOG_LEVEL", "error")
        .env_remove("RUST_LOG")
        .env_remove("KUBECONFIG")
        .env("HOME", home);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().await.unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_fails_a_ci_gate_when_a_lookup_failed() {
    let h = Harness::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pod.yaml");
    let missing = h.missing_image();
    std::fs::write(
        &file,
        yaml_serde::to_string(&pod(&[&h.fixtures.oci_index.reference(), &missing])).unwrap(),
    )
    .unwrap();
    let mut args = vec![
        "explain".to_owned(),
        "-f".to_owned(),
        file.display().to_string(),
        "-o".to_owned(),
        "json".to_owned(),
    ];
    args.extend(h.registry_flags());
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 3, "a failed lookup has its own exit code: {stderr}");
    let record = &json_lines(&stdout)[0];
    assert_eq!(record["allowed"], true, "{record}");
    assert_eq!(record["lookupErrors"][0]["image"], missing.as_str());
    assert!(record["lookupErrors"][0]["error"].is_string(), "{record}");

    args.push("--allow-lookup-errors".to_owned());
    let (code, _, stderr) = noe(&args).await;
    assert_eq!(code, 0, "the user opted out: {stderr}");

    // Text output: the whole lookup error, not cut at the warning limit.
    let args: Vec<String> = args
        .into_iter()
        .filter(|a| a != "-o" && a != "json")
        .collect();
    let (code, stdout, _) = noe(&args).await;
    assert_eq!(code, 0);
    assert!(
        stdout.contains(&format!("lookup failed: {missing}: ")),
        "{stdout}"
    );
}

#[tokio::test]
async fn explain_refuses_what_the_api_server_would_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pod.yaml");
    let cases = [
        (
            "kind: Pod\nmetadata: {name: p}\nspec:\n  containers: {name: a}\n",
            "spec.containers",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: a\n    imagee: nginx\n",
            "\"spec.containers[0].imagee\"",
        ),
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {}\n  template:\n    spec:\n      containers: [{name: a, image: 1.5}]\n",
            "spec.template.spec.containers[0].image",
        ),
    ];
    for (text, field) in cases {
        std::fs::write(&file, text).unwrap();
        let args = [
            "explain".to_owned(),
            "-f".to_owned(),
            file.display().to_string(),
            "--docker-config-path=".to_owned(),
            "--containerd-config-path=".to_owned(),
        ];
        let (code, stdout, stderr) = noe(&args).await;
        assert_eq!(code, 2, "{text}: {stdout} {stderr}");
        assert!(stdout.is_empty(), "{stdout}");
        assert_eq!(stderr.trim().lines().count(), 1, "printed once: {stderr}");
        assert!(stderr.contains(field), "{field}: {stderr}");
        assert!(stderr.contains("API server"), "{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_gives_every_image_a_record_and_names_plain_http() {
    let h = Harness::start().await;
    let mut args = vec!["inspect".to_owned(), "-o".to_owned(), "json".to_owned()];
    args.extend(h.registry_flags());
    args.push(h.missing_image());
    args.push(h.fixtures.oci_single.reference());
    args.push("Not/A:Reference:".to_owned());
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 1, "{stderr}");
    let records = json_lines(&stdout);
    assert_eq!(records.len(), 3, "{stdout}");
    assert_eq!(records[0]["image"], h.missing_image().as_str());
    assert_eq!(records[0]["error"]["kind"], "not_found", "{stdout}");
    assert!(records[0]["error"]["message"].is_string());
    assert_eq!(records[1]["digest"], h.fixtures.oci_single.digest.as_str());
    assert!(records[1].get("error").is_none());
    assert_eq!(records[2]["error"]["kind"], "invalid_reference");
    assert!(
        !records[2]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\\\""),
        "quotes escaped once: {stdout}"
    );
    assert_eq!(stderr.trim().lines().count(), 2, "{stderr}");

    // The same plain-HTTP registry without --insecure-registries: said so, and the flag named.
    let absent = h.cert_dir.path().join("absent");
    let args = vec![
        "inspect".to_owned(),
        format!("--docker-config-path={}", absent.display()),
        format!("--containerd-config-path={}", absent.display()),
        format!(
            "--allow-registry-cidrs={}",
            noe_test_support::LOOPBACK_CIDRS
        ),
        h.fixtures.oci_single.reference(),
    ];
    let (code, _, stderr) = noe(&args).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("answered plain HTTP"), "{stderr}");
    assert!(stderr.contains("--insecure-registries"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_registry_host_fails_fast_after_its_first_timeout() {
    let fake = FakeRegistry::start().await.unwrap();
    for repository in ["a", "b", "c", "d"] {
        fake.route(&format!("/v2/{repository}/manifests/1"), Behavior::Hang);
    }
    let host = fake.host();
    let mut args = vec![
        "inspect".to_owned(),
        "-o".to_owned(),
        "json".to_owned(),
        format!("--insecure-registries={host}"),
        format!(
            "--allow-registry-cidrs={}",
            noe_test_support::LOOPBACK_CIDRS
        ),
        "--registry-timeout=1s".to_owned(),
        "--docker-config-path=".to_owned(),
        "--containerd-config-path=".to_owned(),
    ];
    args.extend(["a", "b", "c", "d"].map(|r| format!("{host}/{r}:1")));
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 1, "{stderr}");
    let records = json_lines(&stdout);
    assert_eq!(records.len(), 4, "{stdout}");
    assert!(
        records.iter().all(|r| r["error"]["kind"] == "timeout"),
        "{stdout}"
    );
    let not_tried = records
        .iter()
        .filter(|r| {
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("not tried")
        })
        .count();
    assert!(
        not_tried >= 2,
        "the host's later images fail at once: {stdout}"
    );
    let asked: std::collections::BTreeSet<String> =
        fake.requests().into_iter().map(|r| r.path).collect();
    assert!(asked.len() <= 2, "{asked:?}");
    // Not a terminal: no progress line.
    assert!(!stderr.contains("images resolved"), "{stderr}");
}

#[test]
fn each_subcommand_help_shows_only_the_flags_it_accepts() {
    let help = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_noe"))
            .args(args)
            .arg("--help")
            .output()
            .unwrap();
        assert!(output.status.success());
        String::from_utf8(output.stdout).unwrap()
    };
    let serve = help(&[]);
    let inspect = help(&["inspect"]);
    let explain = help(&["explain"]);
    let untaint = help(&["untaint"]);
    assert!(serve.contains("--webhook-addr") && serve.contains("--preferred-arch"));
    let about = serve.lines().next().unwrap();
    assert!(
        !about.contains("binary") && !about.contains("wiring"),
        "{about}"
    );
    assert!(inspect.contains("--insecure-registries") && inspect.contains("--log-format"));
    // The API only for a ServiceAccount's identity (`--service-account`).
    assert!(inspect.contains("--kubeconfig") && inspect.contains("--service-account"));
    for flag in ["--preferred-arch", "--webhook-addr", "--leader-elect"] {
        assert!(!inspect.contains(flag), "inspect --help shows {flag}");
    }
    assert!(explain.contains("--preferred-arch") && explain.contains("--allow-lookup-errors"));
    // The API only with `--credential-provider-sa-tokens`.
    assert!(!explain.contains("--webhook-addr") && explain.contains("--kubeconfig"));
    assert!(untaint.contains("--kubeconfig") && !untaint.contains("--registry-timeout"));
    assert!(
        inspect.lines().count() * 3 < serve.lines().count(),
        "inspect {} lines, serve {}",
        inspect.lines().count(),
        serve.lines().count()
    );
    // A hidden flag still parses where it stands, and is refused naming it.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_noe"))
        .args(["inspect", "-preferred-arch=arm64", "a:1"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr)
        .contains("--preferred-arch does not apply to `noe inspect`"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubeconfig_is_found_as_kubectl_finds_it() {
    let api = KubeApi::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("config");
    std::fs::write(&kubeconfig, api.kubeconfig_yaml()).unwrap();
    let missing = dir.path().join("missing");
    let empty_home = dir.path().join("empty-home");
    std::fs::create_dir_all(&empty_home).unwrap();
    let untaint = vec!["untaint".to_owned()];

    // $KUBECONFIG.
    let (code, _, stderr) = noe_env(&untaint, &[("KUBECONFIG", &kubeconfig)], &empty_home).await;
    assert_eq!(code, 0, "{stderr}");
    // ~/.kube/config.
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".kube")).unwrap();
    std::fs::copy(&kubeconfig, home.join(".kube/config")).unwrap();
    let (code, _, stderr) = noe_env(&untaint, &[], &home).await;
    assert_eq!(code, 0, "{stderr}");
    // --kubeconfig first.
    let args = vec![
        "untaint".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
    ];
    let (code, _, stderr) = noe_env(&args, &[("KUBECONFIG", &missing)], &empty_home).await;
    assert_eq!(code, 0, "{stderr}");
    // Nothing at all (and not in a pod): one line saying where it looked, exit 2.
    let (code, _, stderr) = noe_env(&untaint, &[], &empty_home).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("KUBECONFIG"), "{stderr}");
    assert_eq!(
        stderr.lines().filter(|l| l.starts_with("noe: ")).count(),
        1,
        "{stderr}"
    );
}

#[tokio::test]
async fn a_server_without_a_certificate_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let args = vec![format!("--cert-dir={}", dir.path().display())];
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty());
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&dir.path().display().to_string()),
        "{stderr}"
    );
    assert!(stderr.contains("--dev-self-signed-cert"), "{stderr}");
}

/// Without `--allow-registry-cidrs`, a registry on loopback is refused before any connection
/// (it could be noe's own ports or a sidecar); a registry that cannot be connected to is
/// `unreachable` in `explain`'s answer, a refused port and a silent one alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_registries_are_refused_unless_allowed_and_unreachable_is_all_explain_says() {
    let h = Harness::start().await;
    let absent = h.cert_dir.path().join("absent");
    let image = h.fixtures.oci_single.reference();
    let before = h.registry.request_count();
    let (code, _, stderr) = noe(&[
        "inspect".to_owned(),
        format!("--insecure-registries={}", h.registry.host()),
        format!("--docker-config-path={}", absent.display()),
        format!("--containerd-config-path={}", absent.display()),
        image.clone(),
    ])
    .await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("are not registries"), "{stderr}");
    assert_eq!(h.registry.request_count(), before, "nothing reached it");

    let closed = noe_test_support::closed_port().unwrap();
    let silent = noe_test_support::UnansweredPort::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pod.yaml");
    let images = [
        format!("{closed}/app:1"),
        format!("{}/app:1", silent.addr()),
    ];
    let refs: Vec<&str> = images.iter().map(String::as_str).collect();
    std::fs::write(&file, yaml_serde::to_string(&pod(&refs)).unwrap()).unwrap();
    let (code, stdout, stderr) = noe(&[
        "explain".to_owned(),
        "-f".to_owned(),
        file.display().to_string(),
        "-o".to_owned(),
        "json".to_owned(),
        "--registry-timeout=1s".to_owned(),
        format!("--insecure-registries={closed},{}", silent.addr()),
        format!(
            "--allow-registry-cidrs={}",
            noe_test_support::LOOPBACK_CIDRS
        ),
        format!("--docker-config-path={}", absent.display()),
        format!("--containerd-config-path={}", absent.display()),
    ])
    .await;
    assert_eq!(code, 3, "{stderr}");
    let record = &json_lines(&stdout)[0];
    let errors = record["lookupErrors"].as_array().unwrap();
    assert_eq!(errors.len(), 2, "{record}");
    for error in errors {
        let text = error["error"].as_str().unwrap();
        assert!(text.ends_with(": unreachable"), "{text}");
        for word in ["refused", "timed out", "os error", "tcp"] {
            assert!(!text.to_lowercase().contains(word), "{text}");
        }
    }
}
