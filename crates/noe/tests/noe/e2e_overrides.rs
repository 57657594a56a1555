//! `--platform-overrides` end to end: `noe inspect` and `noe explain` as processes say when an
//! override answered, the server answers an unreachable registry's image from it before any
//! lookup, an invalid file fails start-up naming the entry; and `noe explain` shows the other
//! features (the namespace preference and debug containers from the file's Namespaces and
//! Nodes, audit mode, tolerations, node labels).

use super::harness;

use harness::{apply, patch_of, pod, required_arch_terms, run_noe as noe, selector_arch, Harness};
use serde_json::{json, Value};

const OVERRIDES: &str = "\
- images: [\"127.0.0.1:1/team\"]
  platforms: [linux/arm64, linux/arm/v7]
- images: [\"127.0.0.1:1/wasm\"]
  platforms: [\"*\"]
- images: [\"127.0.0.1:1/debug\"]
  platforms: [linux/s390x]
";

fn files(h: &Harness) -> (String, Vec<String>) {
    let path = h.cert_dir.path().join("overrides.yaml");
    std::fs::write(&path, OVERRIDES).unwrap();
    let absent = h.cert_dir.path().join("absent");
    let flags = vec![
        format!("--platform-overrides={}", path.display()),
        format!("--docker-config-path={}", absent.display()),
        format!("--containerd-config-path={}", absent.display()),
        "--insecure-registries=127.0.0.1:1".to_owned(),
        format!(
            "--allow-registry-cidrs={}",
            noe_test_support::LOOPBACK_CIDRS
        ),
    ];
    (path.display().to_string(), flags)
}

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_says_when_an_override_answered() {
    let h = Harness::start().await;
    let (path, flags) = files(&h);
    let mut args = vec!["inspect".to_owned(), "-o".to_owned(), "json".to_owned()];
    args.extend(flags.clone());
    args.extend([
        "127.0.0.1:1/team/app:1".to_owned(),
        "127.0.0.1:1/wasm/mod".to_owned(),
        h.fixtures.oci_single.reference(),
    ]);
    args.push(format!(
        "--insecure-registries=127.0.0.1:1,{}",
        h.registry.host()
    ));
    args.retain(|a| a != "--insecure-registries=127.0.0.1:1");
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 0, "{stderr}");
    let lines = json_lines(&stdout);
    assert_eq!(
        lines[0],
        json!({"image": "127.0.0.1:1/team/app:1", "resolved": "127.0.0.1:1/team/app:1",
               "digest": "", "mediaType": "", "credentialSource": "none",
               "platforms": ["linux/arm/v7", "linux/arm64"], "answeredBy": "override",
               "override": {"file": path, "entry": 1, "pattern": "127.0.0.1:1/team"}})
    );
    assert_eq!(lines[1]["platforms"], json!(["*"]));
    assert_eq!(lines[1]["override"]["entry"], 2);
    // Not overridden: the registry answers, no `override` key.
    assert_eq!(lines[2]["platforms"], json!(["linux/arm64"]));
    assert!(lines[2].get("override").is_none(), "{}", lines[2]);
    assert_eq!(lines[2]["answeredBy"], "get");

    let mut args = vec!["inspect".to_owned(), "127.0.0.1:1/team/app:1".to_owned()];
    args.extend(flags);
    let (code, stdout, stderr) = noe(&args).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(&format!(
            "override:    {path} entry 1 (pattern 127.0.0.1:1/team): no registry contacted"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("platforms:   linux/arm/v7 linux/arm64"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_overrides_refuse_to_start() {
    let h = Harness::start().await;
    let path = h.cert_dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "- {images: [a.io], platforms: [linux/amd64]}\n- {images: [b.io], platforms: [amd64]}\n",
    )
    .unwrap();
    let args = vec![
        "inspect".to_owned(),
        format!("--platform-overrides={}", path.display()),
        "a.io/x".to_owned(),
    ];
    let (code, _, stderr) = noe(&args).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("entry 2: platform \"amd64\" is not os/arch[/variant]"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_answers_from_the_overrides_before_any_lookup() {
    let h = Harness::start().await;
    let (_, flags) = files(&h);
    let mut argv = h.base_flags();
    argv.retain(|f| {
        !f.starts_with("--docker-config-path")
            && !f.starts_with("--containerd-config-path")
            && !f.starts_with("--insecure-registries")
    });
    argv.extend(flags);
    let running = harness::start_server(argv).await;
    let server = harness::Server {
        url: format!("https://localhost:{}/mutate", running.webhook_addr.port()),
        running,
        client: h.client.clone(),
    };
    // The registry 127.0.0.1:1 is unreachable: only the overrides can answer.
    let overridden = pod(&["127.0.0.1:1/team/app:1", "127.0.0.1:1/wasm/mod:2"]);
    let (_, typed) = apply(&overridden, &server.review(&overridden).await);
    assert_eq!(selector_arch(&typed), None);
    assert_eq!(
        required_arch_terms(&typed),
        vec![(vec!["arm".to_owned(), "arm64".to_owned()], 0)]
    );
    // Not overridden: the lookup fails (fail open, with a warning).
    let other = pod(&["127.0.0.1:1/other/app:1"]);
    let response = server.review(&other).await;
    assert!(patch_of(&response).is_empty());
    assert!(response["warnings"]
        .to_string()
        .contains("127.0.0.1:1/other/app:1"));
    server.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_shows_every_feature() {
    let h = Harness::start().await;
    let (path, flags) = files(&h);
    let file = h.cert_dir.path().join("pods.yaml");
    std::fs::write(
        &file,
        "\
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {arch.noe.adevinta.com/preferred: arm}}
---
apiVersion: v1
kind: Node
metadata: {name: arm-1, labels: {kubernetes.io/arch: arm64, kubernetes.io/os: linux}}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: team-a}
spec:
  containers: [{name: app, image: 127.0.0.1:1/team/app:1}]
---
apiVersion: v1
kind: Pod
metadata: {name: pinned, namespace: team-a, labels: {team: blue}}
spec:
  nodeSelector: {kubernetes.io/arch: arm64}
  containers: [{name: app, image: 127.0.0.1:1/team/app:1}]
---
apiVersion: v1
kind: Pod
metadata: {name: contradiction, namespace: team-a}
spec:
  nodeSelector: {kubernetes.io/arch: s390x}
  containers: [{name: app, image: 127.0.0.1:1/team/app:1}]
---
apiVersion: v1
kind: Pod
metadata: {name: debugged, namespace: team-a}
spec:
  nodeName: arm-1
  containers: [{name: app, image: 127.0.0.1:1/team/app:1}]
  ephemeralContainers: [{name: dbg, image: 127.0.0.1:1/debug/tools:1}]
",
    )
    .unwrap();
    let tolerations = h.cert_dir.path().join("arch.yaml");
    std::fs::write(
        &tolerations,
        "arm64: {tolerations: [{key: arch, value: arm64, effect: NoSchedule}]}\n",
    )
    .unwrap();
    let explain = |extra: &[&str]| {
        let mut args = vec![
            "explain".to_owned(),
            "-o=json".to_owned(),
            format!("-f={}", file.display()),
            format!("--arch-tolerations-file={}", tolerations.display()),
            "--match-node-labels=team".to_owned(),
        ];
        args.extend(flags.clone());
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args
    };
    let (code, stdout, stderr) = noe(&explain(&[])).await;
    assert_eq!(code, 0, "{stderr}");
    let lines = json_lines(&stdout);
    assert_eq!(lines.len(), 6, "{stdout}");
    assert_eq!(lines[0]["name"], "team-a");
    assert!(lines[0]["skipped"]
        .as_str()
        .unwrap()
        .contains("a Namespace"));
    // The namespace prefers arm: required mode pins it, and the message says so (not
    // "constrained to arm,arm64", which the patch does not do).
    let web = &lines[2];
    assert_eq!(
        web["message"], "pinned to the preferred architecture arm (every image supports arm,arm64)",
        "{web}"
    );
    assert!(
        web["patch"]
            .to_string()
            .contains(r#"{"kubernetes.io/arch":"arm"}"#),
        "{web}"
    );
    assert_eq!(
        web["notes"],
        json!([format!("platforms of 127.0.0.1:1/team/app:1 from --platform-overrides {path} entry 1 (pattern 127.0.0.1:1/team): linux/arm/v7 linux/arm64")])
    );
    // A pinned pod: only tolerations and node labels, said so.
    assert_eq!(
        lines[3]["message"],
        "tolerations added; pod labels copied into nodeSelector: team"
    );
    // A pod pinned to an arch its image lacks: warned.
    assert!(
        lines[4]["warnings"]
            .to_string()
            .contains("cannot run on the architectures this pod selects"),
        "{}",
        lines[4]
    );
    // Debug containers checked against the file's node.
    let debugged = &lines[5];
    assert_eq!(
        debugged["message"],
        "debug containers allowed (checked against the pod's node)"
    );
    assert!(
        debugged["warnings"]
            .to_string()
            .contains("cannot run on the pod's node (linux/arm64)"),
        "{debugged}"
    );

    // --on-contradiction=deny: exit 1, the contradiction and the debug image denied.
    let (code, stdout, _) = noe(&explain(&["--on-contradiction=deny"])).await;
    assert_eq!(code, 1);
    let lines = json_lines(&stdout);
    assert_eq!(lines[4]["allowed"], false);
    assert_eq!(lines[5]["allowed"], false);

    // Audit mode: nothing enforced, the annotation says what would be done; never denied.
    let (code, stdout, _) = noe(&explain(&["--mode=audit", "--on-contradiction=deny"])).await;
    assert_eq!(code, 0, "{stdout}");
    let lines = json_lines(&stdout);
    assert_eq!(
        lines[2]["message"],
        "audit mode: nothing enforced, annotated arch.noe.adevinta.com/audit=patch:arm,arm64"
    );
    assert_eq!(
        lines[3]["message"],
        "audit mode: nothing enforced, annotated arch.noe.adevinta.com/audit=patch"
    );
    assert_eq!(
        lines[4]["message"],
        "audit mode: nothing enforced, annotated arch.noe.adevinta.com/audit=deny:contradiction"
    );
    assert!(lines[5]["warnings"]
        .to_string()
        .contains("audit: would deny"));

    // Fallback: an image nothing answers for is taken to be amd64-only.
    let mut args = explain(&["--on-lookup-error=fallback", "--fallback-arch=amd64"]);
    let lone = h.cert_dir.path().join("lone.yaml");
    std::fs::write(
        &lone,
        serde_json::to_string(&pod(&["127.0.0.1:1/nobody/app:1"])).unwrap(),
    )
    .unwrap();
    args.retain(|a| !a.starts_with("-f="));
    args.push(format!("-f={}", lone.display()));
    let (code, stdout, stderr) = noe(&args).await;
    // Decided by the fallback, but the lookup still failed: explain's own exit code.
    assert_eq!(code, 3, "{stderr}");
    let line = &json_lines(&stdout)[0];
    // Required mode pins the preferred arch (amd64), and the message says pinned.
    assert_eq!(
        line["message"],
        "pinned to the preferred architecture amd64 (every image supports amd64)"
    );
    assert!(
        line["warnings"]
            .to_string()
            .contains("taken to support only amd64"),
        "{line}"
    );
}
