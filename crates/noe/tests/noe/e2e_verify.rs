//! Verification end to end: `noe inspect --verify` as a process against the real registry,
//! on the image that lies about its platforms (an arm64 manifest whose `/app` is x86-64).

use super::harness;

use harness::{run_noe as noe, Harness};
use noe_test_support::{push_mislabelled_index, LayerEntry, RunnableImage};
use serde_json::Value;

fn inspect(h: &Harness, extra: &[&str]) -> Vec<String> {
    let absent = h.cert_dir.path().join("absent");
    let mut args = vec![
        "inspect".to_owned(),
        "--verify".to_owned(),
        format!("--insecure-registries={}", h.registry.host()),
        format!(
            "--allow-registry-cidrs={}",
            noe_test_support::LOOPBACK_CIDRS
        ),
        format!("--docker-config-path={}", absent.display()),
        format!("--containerd-config-path={}", absent.display()),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_verify_names_the_lying_platform_and_fails() {
    let h = Harness::start().await;
    let pusher = h.registry.pusher().unwrap();
    let lies = push_mislabelled_index(&pusher, "verify/lies", "1", "e2e")
        .await
        .unwrap();
    let reference = h.registry.reference("verify/lies", "1");

    let (code, stdout, stderr) = noe(&inspect(&h, &[&reference])).await;
    assert_eq!(code, 1, "a mismatch fails the run: {stdout}{stderr}");
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("verify:"))
        .collect();
    assert_eq!(
        lines,
        [
            "verify: linux/amd64 verified: /app is an x86-64 ELF (EM_X86_64)",
            "verify: linux/arm64 mismatch: /app is an x86-64 ELF (EM_X86_64)",
        ],
        "{stdout}"
    );
    assert!(
        stdout.contains("platforms:"),
        "the usual record too: {stdout}"
    );

    let (code, stdout, stderr) = noe(&inspect(&h, &["-o", "json", &reference])).await;
    assert_eq!(code, 1, "{stderr}");
    let record: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(record["digest"], lies.index.digest);
    let verification = record["verification"].as_array().unwrap();
    assert_eq!(verification.len(), 2);
    let arm64 = &verification[1];
    assert_eq!(arm64["platform"], "linux/arm64");
    assert_eq!(arm64["digest"], lies.arm64.digest);
    assert_eq!(arm64["verdict"], "mismatch");
    assert_eq!(arm64["program"], "/app");
    assert_eq!(arm64["machine"], "x86-64");
    assert_eq!(arm64["reason"], Value::Null);
    assert_eq!(verification[0]["verdict"], "verified");

    // Honest images, and an unverifiable one, pass.
    let jar = RunnableImage::new(
        "linux/amd64",
        serde_json::json!({"Entrypoint": ["/app.jar"]}),
        vec![noe_test_support::LayerBlob::new(
            &[LayerEntry::program("app.jar", b"PK\x03\x04".to_vec())],
            noe_test_support::Compression::Gzip,
        )
        .unwrap()],
        noe_test_support::Flavor::Oci,
    )
    .unwrap();
    jar.push(&pusher, "verify/jar", Some("1")).await.unwrap();
    let honest = h.fixtures.oci_single.reference();
    let jar_ref = h.registry.reference("verify/jar", "1");
    let (code, stdout, stderr) = noe(&inspect(&h, &[&jar_ref, &honest])).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout
            .contains("verify: linux/amd64 unverifiable (not-elf): /app.jar is not an ELF program"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_verify_counts_no_mismatch_as_support() {
    let h = Harness::start().await;
    let pusher = h.registry.pusher().unwrap();
    push_mislabelled_index(&pusher, "verify/report", "1", "report")
        .await
        .unwrap();
    let image = h.registry.reference("verify/report", "1");
    let file = h.cert_dir.path().join("workloads.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: shop}}\n\
             spec:\n  replicas: 2\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    \
             metadata: {{labels: {{app: web}}}}\n    spec:\n      containers:\n      - {{name: app, image: \"{image}\"}}\n"
        ),
    )
    .unwrap();
    let absent = h.cert_dir.path().join("absent");
    let run = |verify: bool| {
        let mut args = vec![
            "report".to_owned(),
            "-f".to_owned(),
            file.display().to_string(),
            "-o".to_owned(),
            "json".to_owned(),
            "--target-arch=arm64,amd64".to_owned(),
            format!("--insecure-registries={}", h.registry.host()),
            format!(
                "--allow-registry-cidrs={}",
                noe_test_support::LOOPBACK_CIDRS
            ),
            format!("--docker-config-path={}", absent.display()),
            format!("--containerd-config-path={}", absent.display()),
        ];
        if verify {
            args.push("--verify".to_owned());
        }
        args
    };
    // By the claim: ready for arm64, and no "corrections" key.
    let (code, stdout, stderr) = noe(&run(false)).await;
    assert_eq!(code, 0, "{stderr}");
    let claimed: Value = serde_json::from_str(&stdout).unwrap();
    let item = &claimed["items"][0];
    assert_eq!(item["verdicts"]["arm64"], "ready", "{item}");
    assert!(item["images"][0].get("corrections").is_none());

    // Verified: arm64 is blocked by the image, whose arm64 platform is listed as corrected.
    let (code, stdout, stderr) = noe(&run(true)).await;
    assert_eq!(code, 0, "{stderr}");
    let verified: Value = serde_json::from_str(&stdout).unwrap();
    let item = &verified["items"][0];
    assert_eq!(item["verdicts"]["arm64"], "blocked", "{item}");
    assert_eq!(item["verdicts"]["amd64"], "ready", "{item}");
    assert_eq!(
        item["images"][0]["platforms"],
        serde_json::json!(["linux/amd64"])
    );
    assert_eq!(
        item["images"][0]["corrections"],
        serde_json::json!([{
            "evidence": "/app is an x86-64 ELF (EM_X86_64)",
            "platform": "linux/arm64",
            "source": "verification",
        }])
    );
}

/// The server's mismatches so far (`noe_verifications_total{verdict="mismatch"}`).
async fn mismatches(s: &super::harness::Server) -> f64 {
    let metrics = s.metrics().await;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("noe_verifications_total{verdict=\"mismatch\"} "))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// The lying platform's warning, as the decision writes it.
fn lie_warning(image: &str) -> String {
    format!(
        "image {image}: linux/arm64 is not used: verification: /app is an x86-64 ELF (EM_X86_64)"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_admits_by_the_claim_then_by_what_verification_proved() {
    let h = Harness::start().await;
    let pusher = h.registry.pusher().unwrap();
    push_mislabelled_index(&pusher, "verify/server", "1", "server")
        .await
        .unwrap();
    let image = h.registry.reference("verify/server", "1");
    // arm64 preferred: a pod placed by the claim goes there.
    let s = h
        .server(&["--verify-binaries=background", "--preferred-arch=arm64"])
        .await;
    let first = s.review(&super::harness::pod(&[&image])).await;
    assert_eq!(first["allowed"], true);
    let (_, placed) = super::harness::apply(&super::harness::pod(&[&image]), &first);
    assert_eq!(
        super::harness::platforms_annotation(&placed).as_deref(),
        Some("amd64,arm64"),
        "the first pod is admitted by the claim: {first}"
    );
    assert_eq!(
        super::harness::selector_arch(&placed).as_deref(),
        Some("arm64")
    );

    // The cold lookup queued the image; once verified, its arm64 platform is absent.
    for _ in 0..1500 {
        if mismatches(&s).await >= 1.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(mismatches(&s).await, 1.0, "verified in the background");
    let next = s.review(&super::harness::pod(&[&image])).await;
    assert_eq!(next["allowed"], true);
    let (_, placed) = super::harness::apply(&super::harness::pod(&[&image]), &next);
    assert_eq!(
        super::harness::platforms_annotation(&placed).as_deref(),
        Some("amd64"),
        "{next}"
    );
    assert_ne!(
        super::harness::selector_arch(&placed).as_deref(),
        Some("arm64")
    );
    let warnings: Vec<&str> = next["warnings"]
        .as_array()
        .map(|w| w.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        warnings.contains(&lie_warning(&image).as_str()),
        "{warnings:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_gate_verify_the_first_pod_is_released_already_constrained() {
    use super::e2e_gate::{eventually, gates, server, stored, Setup};
    let Setup { h, api, dir } = Setup::start().await;
    let pusher = h.registry.pusher().unwrap();
    push_mislabelled_index(&pusher, "verify/gated", "1", "gated")
        .await
        .unwrap();
    let image = h.registry.reference("verify/gated", "1");
    let insecure = format!("--insecure-registries={}", h.registry.host());
    let s = server(
        &h,
        &api,
        dir.path(),
        &[
            "--lookup-mode=gate",
            "--verify-binaries=background",
            "--gate-verify",
            "--preferred-arch=arm64",
            &insecure,
        ],
    )
    .await;
    let created = super::harness::pod(&[&image]);
    let response = s.review(&created).await;
    assert_eq!(response["allowed"], true);
    api.put_pod(stored("web", &created, &response));
    eventually("released", || gates(&api, "web") == serde_json::json!([])).await;
    let web = api
        .get(noe_test_support::Resource::Pods, "shop", "web")
        .unwrap();
    assert_eq!(
        web["metadata"]["annotations"]["arch.noe.adevinta.com/platforms"], "amd64",
        "released constrained by the verification: {web}"
    );
    assert_ne!(
        web["spec"]["nodeSelector"]["kubernetes.io/arch"], "arm64",
        "{web}"
    );
    assert!(mismatches(&s).await >= 1.0);
    let reasons: Vec<String> = api
        .writes()
        .into_iter()
        .filter(|w| w.method == "POST" && w.path.contains("/events"))
        .filter_map(|w| w.body["reason"].as_str().map(str::to_owned))
        .collect();
    assert!(
        reasons.iter().any(|r| r == "VerificationPending"),
        "held while verified: {reasons:?}"
    );
}
