#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use super::flags::policy::{
    OnLookupErrorFlag as OnLookupError, PreferenceModeFlag as PreferenceMode,
};

use super::*;

mod controller;

fn parse(argv: &[&str]) -> Result<Args, clap::Error> {
    Args::try_parse_normalized(argv.iter().map(OsString::from))
}

#[test]
fn clap_definition_is_consistent() {
    Args::command().debug_assert();
    super::flags::conventions(Args::command()).debug_assert();
}

/// Every boolean flag, the subcommands' too, takes the Go spellings: `-flag`, `--flag`,
/// `-flag=false`, `--flag=true`.
#[test]
fn every_boolean_flag_is_a_go_boolean() {
    let ungate = |args: &Args| match &args.command {
        Some(super::Command::Ungate(ungate)) => (ungate.force, ungate.all_namespaces),
        other => panic!("not ungate: {other:?}"),
    };
    for (argv, want) in [
        (&["noe", "ungate", "-A"][..], (false, true)),
        (
            &["noe", "ungate", "-force", "-all-namespaces=true"][..],
            (true, true),
        ),
        (
            &["noe", "ungate", "--force=false", "-A=false"][..],
            (false, false),
        ),
    ] {
        assert_eq!(ungate(&parse(argv).unwrap()), want, "{argv:?}");
    }
    for argv in [
        &["noe", "-leader-elect"][..],
        &["noe", "--leader-elect=true"][..],
    ] {
        assert!(parse(argv).unwrap().controller.leader_elect, "{argv:?}");
    }
    assert!(
        !parse(&["noe", "-leader-elect=false"])
            .unwrap()
            .controller
            .leader_elect
    );
    assert!(parse(&["noe", "--leader-elect=maybe"]).is_err());
}

#[test]
fn defaults_match_the_design() {
    let args = parse(&["noe"]).unwrap();
    assert!(args.command.is_none());
    assert_eq!(args.policy.preferred_arch(), Some("amd64".into()));
    assert!(args.policy.schedulable_archs().is_empty());
    assert_eq!(args.policy.system_os, "linux");
    assert_eq!(args.policy.preference_mode, PreferenceMode::Required);
    assert_eq!(args.policy.preference_weight, 50);
    assert_eq!(args.policy.on_lookup_error, OnLookupError::IgnoreImage);
    assert_eq!(args.policy.admission_deadline, Duration::from_secs(8));
    assert_eq!(args.registry.registry_timeout, Duration::from_secs(5));
    assert_eq!(args.registry.cache_ttl, Duration::from_secs(3600));
    assert_eq!(args.registry.cache_max_entries, 100_000);
    assert_eq!(args.registry.verify_max_bytes, 64 << 20);
    assert_eq!(args.registry.verify_concurrency, 2);
    assert_eq!(
        args.server.verify_binaries,
        flags::server::VerifyBinaries::Off
    );
    assert!(!args.controller.gate_verify);
    assert_eq!(
        args.registry.containerd_config_paths(),
        vec![std::path::PathBuf::from("/etc/containerd")]
    );
    // not given: noe's candidate list, from the credentials module
    assert_eq!(args.registry.docker_config_paths_setting(), None);
    assert_eq!(args.server.webhook_addr.port(), 8443);
    assert_eq!(args.server.metrics_addr.port(), 8080);
    assert_eq!(args.server.health_probe_addr.port(), 8081);
    assert_eq!(args.server.cert_dir, std::path::PathBuf::from("./"));
    assert!(!args.server.dev_self_signed_cert);
    assert!(!args.controller.leader_elect);
    assert_eq!(args.log.log_format, LogFormat::Json);
    assert_eq!(args.log.log_level, "info");
    assert!(args.to_run().is_ok());
}

#[test]
fn go_spellings_all_parse_the_same() {
    for argv in [
        &["noe", "-preferred-arch", "arm64"][..],
        &["noe", "-preferred-arch=arm64"],
        &["noe", "--preferred-arch", "arm64"],
        &["noe", "--preferred-arch=arm64"],
    ] {
        let args = parse(argv).unwrap();
        assert_eq!(
            args.policy.preferred_arch(),
            Some("arm64".into()),
            "{argv:?}"
        );
    }
}

#[test]
fn booleans_accept_go_forms() {
    let cases: &[(&[&str], bool)] = &[
        (&["noe", "--leader-elect=true"], true),
        (&["noe", "-leader-elect=true"], true),
        (&["noe", "--leader-elect"], true),
        (&["noe", "-leader-elect"], true),
        (&["noe", "--leader-elect=false"], false),
        (&["noe", "-leader-elect=0"], false),
        (&["noe", "-leader-elect=1"], true),
        (&["noe"], false),
    ];
    for (argv, want) in cases {
        assert_eq!(
            parse(argv).unwrap().controller.leader_elect,
            *want,
            "{argv:?}"
        );
    }
    let args = parse(&[
        "noe",
        "-dev-self-signed-cert",
        "-webhook-addr",
        "127.0.0.1:9443",
    ])
    .unwrap();
    assert!(args.server.dev_self_signed_cert);
    assert_eq!(args.server.webhook_addr.to_string(), "127.0.0.1:9443");
}

#[test]
fn lists_durations_and_repeatable_paths() {
    let args = parse(&[
        "noe",
        "-cluster-schedulable-archs=amd64,arm64",
        "--match-node-labels",
        "team,example.com/zone",
        "--registry-proxies=docker.io=proxy.corp,quay.io=quay-proxy.corp",
        "--docker-config-path",
        "/a/config.json",
        "--docker-config-path=/b/config.json",
        "-containerd-config-path",
        "/etc/containerd/config.toml",
        "--containerd-config-path=/etc/containerd/certs.d",
        "--insecure-registries=127.0.0.1:5000,localhost:5001",
        "--allow-registry-cidrs=10.0.0.0/8,169.254.169.254",
        "--registry-timeout=1m30s",
        "--admission-deadline",
        "500ms",
        "--cache-ttl=2h",
        "--cache-max-entries=10",
        "-registry-qps=2.5",
        "--registry-burst",
        "7",
        "--preference-mode=preferred",
        "--preference-weight=80",
        "--on-lookup-error",
        "deny",
    ])
    .unwrap();
    assert_eq!(args.policy.schedulable_archs(), ["amd64", "arm64"]);
    assert_eq!(
        (args.registry.registry_qps, args.registry.registry_burst),
        (2.5, 7)
    );
    assert_eq!(
        flags::parse::non_empty(&args.policy.match_node_labels),
        ["team", "example.com/zone"]
    );
    assert_eq!(
        args.registry.proxies(),
        [
            ("docker.io".to_owned(), "proxy.corp".to_owned()),
            ("quay.io".to_owned(), "quay-proxy.corp".to_owned())
        ]
    );
    assert_eq!(
        args.registry.docker_config_paths(),
        [
            std::path::PathBuf::from("/a/config.json"),
            "/b/config.json".into()
        ]
    );
    assert_eq!(args.registry.containerd_config_paths().len(), 2);
    assert_eq!(
        args.registry.insecure_registries,
        ["127.0.0.1:5000", "localhost:5001"]
    );
    assert_eq!(args.registry.allow_cidrs().len(), 2);
    assert_eq!(args.registry.registry_timeout, Duration::from_secs(90));
    assert_eq!(args.policy.admission_deadline, Duration::from_millis(500));
    assert_eq!(args.registry.cache_ttl, Duration::from_secs(7200));
    assert_eq!(args.policy.preference_mode, PreferenceMode::Preferred);
    assert_eq!(args.policy.preference_weight, 80);
    assert_eq!(args.policy.on_lookup_error, OnLookupError::Deny);
    assert!(args.to_run().is_ok());
}

#[test]
fn empty_values_disable() {
    let args = parse(&[
        "noe",
        "--preferred-arch=",
        "--cluster-schedulable-archs=",
        "--registry-proxies=",
        "--allow-registry-cidrs=",
        "--docker-config-path=",
        "--containerd-config-path=",
        "--kubeconfig=",
        "--registry-ca-file=",
    ])
    .unwrap();
    assert_eq!(args.policy.preferred_arch(), None);
    assert!(args.policy.schedulable_archs().is_empty());
    // the chart passes empty path flags for "no files", not the defaults
    assert_eq!(args.registry.docker_config_paths_setting(), Some(vec![]));
    assert!(args.registry.containerd_config_paths().is_empty());
    assert!(args.registry.proxies().is_empty());
    assert!(args.registry.allow_cidrs().is_empty());
}

#[test]
fn bad_values_are_refused_by_clap() {
    for argv in [
        &["noe", "--registry-timeout=5"][..],
        &["noe", "--registry-proxies=docker.io"],
        &["noe", "--on-lookup-error=maybe"],
        &["noe", "--webhook-addr=8443"],
        &["noe", "--allow-registry-cidrs=10.0.0.0/99"],
        &["noe", "--log-format=xml"],
        &["noe", "--leader-elect=perhaps"],
        &["noe", "--preference-weight=0"],
        &["noe", "--preference-weight=101"],
        &["noe", "--registry-timeout=0s"],
        &["noe", "--admission-deadline=0"],
        &["noe", "--cache-max-entries=0"],
        &["noe", "--registry-qps=-1"],
        &["noe", "--registry-qps=inf"],
        &["noe", "--registry-qps=NaN"],
        &["noe", "--registry-burst=0"],
        &["noe", "--system-os="],
    ] {
        assert!(parse(argv).is_err(), "{argv:?}");
    }
}

#[test]
fn contradictions_are_refused_with_one_line() {
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "noe",
                "--preferred-arch=s390x",
                "--cluster-schedulable-archs=amd64,arm64",
            ],
            "--preferred-arch s390x is not in --cluster-schedulable-archs amd64,arm64",
        ),
        (
            &["noe", "--image-credential-provider-bin-dir=/bin"],
            "--image-credential-provider-bin-dir needs --image-credential-provider-config",
        ),
        (
            &[
                "noe",
                "explain",
                "-f",
                "x",
                "--preferred-arch=ppc64le",
                "--cluster-schedulable-archs=amd64",
            ],
            "--preferred-arch ppc64le is not in --cluster-schedulable-archs amd64",
        ),
        (
            &["noe", "--lookup-mode=gate", "--gate-verify"],
            "--gate-verify needs --verify-binaries=background",
        ),
        (
            &["noe", "--verify-binaries=background", "-gate-verify=true"],
            "--gate-verify needs --lookup-mode=gate or hybrid",
        ),
    ];
    for (argv, want) in cases {
        let reason = parse(argv).unwrap().to_run().unwrap_err().to_string();
        assert_eq!(reason, *want);
        assert!(!reason.contains('\n'));
    }
    // an empty preferred arch is never contradictory
    assert!(parse(&[
        "noe",
        "--preferred-arch=",
        "--cluster-schedulable-archs=arm64"
    ])
    .unwrap()
    .to_run()
    .is_ok());
}

#[test]
fn every_flag_has_its_env_var() {
    fn check(command: &clap::Command) {
        for arg in command.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if ["help", "version"].contains(&long) {
                continue;
            }
            let want = format!("NOE_{}", long.to_uppercase().replace('-', "_"));
            assert_eq!(
                arg.get_env().and_then(|e| e.to_str()),
                Some(want.as_str()),
                "--{long} in `{}`",
                command.get_name()
            );
        }
        for sub in command.get_subcommands() {
            check(sub);
        }
    }
    check(&super::flags::conventions(Args::command()));
}

/// The registry settings `inspect` would run with.
fn inspect_registry(argv: &[&str]) -> crate::config::RegistrySettings {
    match parse(argv).unwrap().to_run().unwrap() {
        Run::Inspect(config) => config.registry,
        other => panic!("not inspect: {other:?}"),
    }
}

#[test]
fn subcommands_share_registry_flags() {
    let argv = &[
        "noe",
        "inspect",
        "-insecure-registries=127.0.0.1:5000",
        "--output=json",
        "127.0.0.1:5000/a:1",
        "127.0.0.1:5000/b:1",
    ];
    let Some(Command::Inspect(inspect)) = parse(argv).unwrap().command else {
        panic!("not inspect")
    };
    assert_eq!(inspect.images, ["127.0.0.1:5000/a:1", "127.0.0.1:5000/b:1"]);
    assert_eq!(inspect.output, crate::config::Output::Json);
    assert_eq!(
        inspect_registry(argv).resolver.insecure_registries,
        ["127.0.0.1:5000"]
    );

    let run = parse(&[
        "noe",
        "explain",
        "-f",
        "pod.yaml",
        "-preferred-arch",
        "arm64",
    ])
    .unwrap()
    .to_run()
    .unwrap();
    let Run::Explain(explain) = run else {
        panic!("not explain")
    };
    assert_eq!(explain.file, std::path::PathBuf::from("pod.yaml"));
    assert_eq!(
        explain.decision.policy.preferred_arch.as_deref(),
        Some("arm64")
    );
}

/// Flags given before the subcommand used to be parsed and then dropped.
#[test]
fn flags_before_the_subcommand_apply_to_it() {
    for argv in [
        &[
            "noe",
            "--insecure-registries=127.0.0.1:1",
            "inspect",
            "127.0.0.1:1/a:1",
        ][..],
        &[
            "noe",
            "-insecure-registries",
            "127.0.0.1:1",
            "inspect",
            "127.0.0.1:1/a:1",
        ],
        &[
            "noe",
            "inspect",
            "127.0.0.1:1/a:1",
            "--insecure-registries=127.0.0.1:1",
        ],
    ] {
        let registry = inspect_registry(argv);
        assert_eq!(
            registry.resolver.insecure_registries,
            ["127.0.0.1:1"],
            "{argv:?}"
        );
    }
    let run = parse(&["noe", "--preferred-arch=arm64", "explain", "-f", "pod.yaml"])
        .unwrap()
        .to_run()
        .unwrap();
    let Run::Explain(explain) = run else {
        panic!("not explain")
    };
    assert_eq!(
        explain.decision.policy.preferred_arch.as_deref(),
        Some("arm64")
    );
}

/// A flag the subcommand does not use is refused, before or after it, instead of ignored.
#[test]
fn flags_a_subcommand_does_not_use_are_refused() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["noe", "--webhook-addr=:9443", "inspect", "a:1"],
            "--webhook-addr does not apply to `noe inspect`",
        ),
        (
            &["noe", "inspect", "a:1", "--preferred-arch=arm64"],
            "--preferred-arch does not apply to `noe inspect`",
        ),
        (
            &["noe", "explain", "-f", "pod.yaml", "-cert-dir", "/certs"],
            "--cert-dir does not apply to `noe explain`",
        ),
    ];
    for (argv, want) in cases {
        let error = parse(argv).unwrap().to_run().unwrap_err().to_string();
        assert_eq!(error, *want, "{argv:?}");
    }
    // The environment is not the command line: a server's NOE_* variables do not break
    // `noe inspect` run in its container.
    assert!(parse(&["noe", "serve", "--webhook-addr=:9443"])
        .unwrap()
        .to_run()
        .is_ok());
}

#[test]
fn the_charts_argument_list_parses_and_validates() {
    // As rendered by charts/noe/templates/_args.tpl with most values set.
    let args = parse(&[
        "noe",
        "--webhook-addr=:8443",
        "--metrics-addr=:8080",
        "--health-probe-addr=:8081",
        "--cert-dir=/certs",
        "--preferred-arch=amd64",
        "--preference-mode=required",
        "--preference-weight=50",
        "--on-lookup-error=ignore-image",
        "--system-os=linux",
        "--admission-deadline=8s",
        "--registry-timeout=5s",
        "--cache-ttl=1h",
        "--cache-max-entries=100000",
        "--log-level=info",
        "--log-format=json",
        "--cluster-schedulable-archs=amd64,arm64",
        "--registry-proxies=docker.io=proxy.corp",
        "--match-node-labels=team",
        "--private-registries=registry.corp",
        "--insecure-registries=registry.local:5000",
        "--allow-registry-cidrs=10.0.0.0/8",
        "--docker-config-path=/etc/noe/docker-config-0/config.json",
        "--containerd-config-path=/etc/containerd/config.toml",
        "--image-credential-provider-bin-dir=/usr/libexec/kubernetes/kubelet-plugins",
        "--image-credential-provider-config=/etc/kubernetes/credential-provider.yaml",
        "--leader-elect=true",
    ])
    .unwrap();
    assert!(args.to_run().is_ok());
    assert!(args.controller.leader_elect);
    let Ok(Run::Serve(config)) = args.to_run() else {
        panic!("not serve")
    };
    assert_eq!(
        config.registry.sources.docker_config_paths,
        Some(vec![std::path::PathBuf::from(
            "/etc/noe/docker-config-0/config.json"
        )])
    );
    assert!(config.registry.sources.provider_bin_dir.is_some());
    assert!(config.registry.sources.provider_config.is_some());
}

#[test]
fn the_shared_cache_takes_its_secrets_from_files_never_from_flags() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    let password = dir.path().join("password");
    std::fs::write(&key, "0123456789abcdef0123\n").unwrap();
    std::fs::write(&password, "s3cret\n").unwrap();
    let key_flag = format!("--shared-cache-key-file={}", key.display());
    let password_flag = format!("--shared-cache-password-file={}", password.display());
    let settings = inspect_registry(&[
        "noe",
        "--shared-cache=redis://valkey.noe:6379/0",
        &key_flag,
        &password_flag,
        "--shared-cache-timeout=25ms",
        "inspect",
        "nginx",
    ]);
    let shared = settings.resolver.shared_cache.unwrap();
    assert_eq!(shared.url, "redis://valkey.noe:6379/0");
    assert_eq!(shared.key, b"0123456789abcdef0123");
    assert_eq!(shared.password.as_deref(), Some("s3cret"));
    assert_eq!(shared.timeout, Duration::from_millis(25));
    assert!(!format!("{shared:?}").contains("s3cret"));
    // Off by default.
    assert!(inspect_registry(&["noe", "inspect", "nginx"])
        .resolver
        .shared_cache
        .is_none());

    // No flag for the password; a key too short (or none) is refused with one line.
    assert!(parse(&["noe", "--shared-cache-password=x"]).is_err());
    std::fs::write(&key, "short").unwrap();
    let error = parse(&[
        "noe",
        "--shared-cache=redis://r:6379",
        &key_flag,
        "inspect",
        "x",
    ])
    .unwrap()
    .to_run()
    .unwrap_err()
    .to_string();
    assert!(error.contains("--shared-cache-key-file"), "{error}");
}

#[cfg(unix)]
#[test]
fn a_fifo_as_the_shared_cache_password_file_is_refused_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, "0123456789abcdef0123\n").unwrap();
    let fifo = dir.path().join("password");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let key_flag = format!("--shared-cache-key-file={}", key.display());
    let password_flag = format!("--shared-cache-password-file={}", fifo.display());
    // Opening the FIFO would block until a writer came: read on a thread, bounded.
    let (sent, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let run = parse(&[
            "noe",
            "--shared-cache=redis://r:6379",
            &key_flag,
            &password_flag,
            "inspect",
            "x",
        ])
        .unwrap()
        .to_run()
        .map(|_| ());
        let _ = sent.send(run.map_err(|e| e.to_string()));
    });
    let error = received
        .recv_timeout(Duration::from_secs(30))
        .expect("the password file read returned")
        .unwrap_err();
    assert!(
        error.contains("--shared-cache-password-file") && error.contains("not a regular file"),
        "{error}"
    );
}

#[test]
fn cloud_credentials_flag() {
    use noe_cloud::Provider;
    let settings = inspect_registry(&["noe", "inspect", "--cloud-credentials=ecr,acr,ecr,", "x"]);
    assert_eq!(settings.cloud, [Provider::Ecr, Provider::Acr]);
    let settings = inspect_registry(&["noe", "inspect", "--cloud-credentials=", "x"]);
    assert!(settings.cloud.is_empty());
    let error = parse(&["noe", "inspect", "--cloud-credentials=aws", "x"]).map(|_| ());
    assert!(error.is_err_and(|e| e.to_string().contains("expected ecr, gcp or acr")));
}

#[test]
fn credential_provider_sa_tokens_flag() {
    for (args, on) in [
        (&["noe", "inspect", "x"][..], false),
        (
            &["noe", "inspect", "--credential-provider-sa-tokens", "x"][..],
            true,
        ),
        (
            &["noe", "inspect", "-credential-provider-sa-tokens=true", "x"][..],
            true,
        ),
        (
            &[
                "noe",
                "inspect",
                "--credential-provider-sa-tokens=false",
                "x",
            ][..],
            false,
        ),
    ] {
        let settings = inspect_registry(args);
        assert_eq!(settings.sources.service_account_tokens, on, "{args:?}");
    }
}

#[test]
fn a_glob_in_the_path_of_a_private_registry_is_refused() {
    let args = parse(&[
        "noe",
        "inspect",
        "--private-registries=127.0.0.1:5000/glob/*",
        "127.0.0.1:5000/glob/app:1",
    ])
    .unwrap();
    let Err(error) = args.to_run() else {
        panic!("accepted")
    };
    let error = error.to_string();
    assert!(
        error.contains("--private-registries") && error.contains("127.0.0.1:5000/glob/*"),
        "{error}"
    );
}
