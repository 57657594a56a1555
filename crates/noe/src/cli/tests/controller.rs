//! The controller flags: what they turn into, the Lease's identity from the pod's environment,
//! and the contradictions refused with one line naming the flags.

use std::collections::BTreeMap;
use std::time::Duration;

use noe_controller::Remediate;

use super::super::*;
use crate::config::ControllerSettings;

fn parse(argv: &[&str]) -> Args {
    Args::try_parse_normalized(argv.iter().map(OsString::from)).unwrap()
}

/// The controller settings of `argv` in an environment holding `env`.
fn settings(argv: &[&str], env: &[(&str, &str)]) -> Result<ControllerSettings, ConfigError> {
    let args = parse(argv);
    let env: BTreeMap<String, String> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let lookup = |name: &str| env.get(name).cloned();
    args.controller
        .settings(&args.taints, args.policy.schedulable_from_nodes(), &lookup)
}

const POD: &[(&str, &str)] = &[("POD_NAME", "noe-7f9c-x2"), ("POD_NAMESPACE", "noe-system")];

#[test]
fn nothing_runs_by_default() {
    let settings = settings(&["noe"], POD).unwrap();
    assert!(!settings.config.is_enabled());
    assert!(!settings.node_facts);
    assert_eq!(settings.config.leader_election, None);
    assert_eq!(settings.config.instance.as_deref(), Some("noe-7f9c-x2"));
    assert_eq!(settings.config.remediate_rate_per_minute, 10);
    assert_eq!(
        settings.config.evict_exempt_namespaces,
        ["kube-system".to_owned(), "noe-system".to_owned()].into()
    );
}

#[test]
fn evictions_exempt_kube_system_and_our_namespace_unless_told_otherwise() {
    let exempt = |argv: &[&str], env| settings(argv, env).map(|s| s.config.evict_exempt_namespaces);
    let set = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect();
    assert_eq!(exempt(&["noe"], &[]).unwrap(), set(&["kube-system"]));
    assert_eq!(
        exempt(
            &["noe", "--remediate-exempt-namespaces=ops, kube-system"],
            POD
        )
        .unwrap(),
        set(&["kube-system", "ops"])
    );
    assert_eq!(
        exempt(&["noe", "--remediate-exempt-namespaces="], POD).unwrap(),
        set(&[])
    );
    assert_eq!(
        exempt(&["noe", "--remediate-exempt-namespaces"], POD).unwrap(),
        set(&[])
    );
    let error = exempt(&["noe", "--remediate-exempt-namespaces=Team_A"], POD).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("--remediate-exempt-namespaces \"Team_A\""),
        "{error}"
    );
}

#[test]
fn a_user_runs_report_mode_against_a_cluster() {
    let args = parse(&[
        "noe",
        "--kubeconfig",
        "/home/me/.kube/config",
        "--watch-nodes",
        "--remediate=report",
    ]);
    let Ok(Run::Serve(config)) = args.to_run() else {
        panic!("not serve")
    };
    assert_eq!(
        config.kube.kubeconfig.as_deref(),
        Some(std::path::Path::new("/home/me/.kube/config"))
    );
    assert!(config.controllers.node_facts);
    assert!(config.controllers.config.watch_nodes);
    assert_eq!(config.controllers.config.remediate, Remediate::Report);
    assert_eq!(config.controllers.config.leader_election, None);
}

#[test]
fn leader_election_takes_the_pods_name_and_namespace() {
    let argv = &[
        "noe",
        "-remediate=evict",
        "--remediate-rate=3",
        "--taint-arches=arm64, s390x",
        "--leader-elect=true",
    ];
    let settings = settings(argv, POD).unwrap();
    let lease = settings.config.leader_election.unwrap();
    assert_eq!(
        (
            lease.name.as_str(),
            lease.namespace.as_str(),
            lease.identity.as_str()
        ),
        ("noe", "noe-system", "noe-7f9c-x2")
    );
    assert_eq!(
        (
            lease.lease_duration,
            lease.renew_deadline,
            lease.retry_period
        ),
        (
            Duration::from_secs(15),
            Duration::from_secs(10),
            Duration::from_secs(2)
        )
    );
    assert_eq!(settings.config.remediate, Remediate::Evict);
    assert_eq!(settings.config.remediate_rate_per_minute, 3);
    assert_eq!(
        settings.config.taint_arches,
        ["arm64".to_owned(), "s390x".to_owned()].into()
    );

    // Flags win over the environment.
    let lease = self::settings(
        &[
            "noe",
            "--taint-arches=arm64",
            "--leader-elect",
            "--leader-elect-resource-name=noe-controllers",
            "--leader-elect-resource-namespace=ops",
            "--leader-elect-identity=me",
            "--leader-elect-lease-duration=3s",
            "--leader-elect-renew-deadline=2s",
            "--leader-elect-retry-period=500ms",
        ],
        POD,
    )
    .unwrap()
    .config
    .leader_election
    .unwrap();
    assert_eq!(
        (
            lease.name.as_str(),
            lease.namespace.as_str(),
            lease.identity.as_str()
        ),
        ("noe-controllers", "ops", "me")
    );
    assert_eq!(lease.retry_period, Duration::from_millis(500));
}

/// noe's chart passes `--leader-elect=true` with `ha.enabled`: without a writing controller
/// there is nothing to elect, and no identity is needed.
#[test]
fn leader_election_without_a_writing_controller_needs_nothing() {
    for argv in [
        &["noe", "--leader-elect=true"][..],
        &["noe", "--leader-elect", "--watch-nodes"],
    ] {
        let settings = settings(argv, &[]).unwrap();
        assert!(settings.leader_elect);
        assert_eq!(settings.config.leader_election, None, "{argv:?}");
    }
    assert!(parse(&["noe", "--leader-elect=true"]).to_run().is_ok());
}

#[test]
fn auto_schedulable_archs_read_the_nodes() {
    let args = parse(&[
        "noe",
        "--cluster-schedulable-archs=auto,s390x",
        "--watch-nodes",
    ]);
    let Ok(Run::Serve(config)) = args.to_run() else {
        panic!("not serve")
    };
    let policy = &config.decision.policy;
    assert!(policy.schedulable_from_nodes);
    assert_eq!(policy.schedulable_archs, ["s390x".to_owned()].into());
    // The preferred arch (amd64) is not checked against the extra archs: the nodes decide.
    assert!(policy.validate().is_ok());
    assert!(config.controllers.node_facts);
}

#[test]
fn taints_are_tolerated_by_the_server_and_by_explain() {
    let toleration = serde_json::json!({"key": "arch.noe.adevinta.com/arch", "operator": "Equal",
                                        "value": "arm64", "effect": "NoSchedule"});
    let Ok(Run::Serve(serve)) = parse(&["noe", "--taint-arches=arm64"]).to_run() else {
        panic!("not serve")
    };
    assert_eq!(
        serve.decision.policy.architectures["arm64"].tolerations,
        std::slice::from_ref(&toleration)
    );
    let Ok(Run::Explain(explain)) =
        parse(&["noe", "explain", "-f", "pod.yaml", "--taint-arches=arm64"]).to_run()
    else {
        panic!("not explain")
    };
    assert_eq!(
        explain.decision.policy.architectures["arm64"].tolerations,
        [toleration]
    );
}

#[test]
fn image_selection_settings() {
    let on = settings(&["noe", "--watch-nodes", "--image-selection"], POD).unwrap();
    assert_eq!(
        on.image_selection,
        Some(crate::config::ImageSelection {
            all_namespaces: false,
            node_features: false,
            negative_ttl: Duration::from_secs(10),
        })
    );
    let argv = [
        "noe",
        "--watch-nodes",
        "--image-selection",
        "--watch-node-features",
        "--image-compatibility-negative-ttl=0s",
    ];
    let set = settings(&argv, POD).unwrap().image_selection.unwrap();
    assert!(set.node_features);
    assert_eq!(set.negative_ttl, Duration::ZERO);
    assert_eq!(settings(&["noe"], POD).unwrap().image_selection, None);
}

#[test]
fn contradictions_name_the_flags() {
    type Env<'a> = &'a [(&'a str, &'a str)];
    let cases: &[(&[&str], Env, &str)] = &[
        (
            &["noe", "--cluster-schedulable-archs=auto"],
            POD,
            "--cluster-schedulable-archs=auto needs --watch-nodes (the architectures are read from the nodes)",
        ),
        (
            &["noe", "--image-selection"],
            POD,
            "--image-selection needs --watch-nodes (the nodes' labels decide the choice)",
        ),
        (
            &["noe", "--watch-nodes", "--image-compatibility-all-namespaces"],
            POD,
            "--image-compatibility-all-namespaces needs --image-selection",
        ),
        (
            &["noe", "--watch-nodes", "--watch-node-features"],
            POD,
            "--watch-node-features needs --image-selection",
        ),
        (
            &[
                "noe",
                "--watch-nodes",
                "--image-selection",
                "--image-compatibility-negative-ttl=2h",
            ],
            POD,
            "--image-compatibility-negative-ttl must be at most 1h",
        ),
        (
            &["noe", "--remediate=report", "--leader-elect"],
            &[("POD_NAMESPACE", "noe")],
            "--leader-elect needs this replica's identity: set POD_NAME (the chart sets it) or --leader-elect-identity",
        ),
        (
            &["noe", "--taint-arches=arm64", "--leader-elect"],
            &[("POD_NAME", "noe-0"), ("POD_NAMESPACE", "")],
            "--leader-elect needs the Lease's namespace: set POD_NAMESPACE (the chart sets it) or --leader-elect-resource-namespace",
        ),
        (
            &["noe", "--remediate=report", "--leader-elect", "--leader-elect-renew-deadline=20s"],
            POD,
            "--leader-elect-lease-duration (15s) must be above --leader-elect-renew-deadline (20s), itself above --leader-elect-retry-period (2s), and at least 1s",
        ),
        (
            &["noe", "--remediate=report", "--leader-elect", "--leader-elect-resource-name=Noe"],
            POD,
            "--leader-elect-resource-name \"Noe\" is not a Kubernetes object name",
        ),
        (
            &["noe", "--taint-arches=arm64,x/y"],
            POD,
            "--taint-arches \"x/y\" is not an architecture (a node label value)",
        ),
    ];
    for (argv, env, want) in cases {
        let error = settings(argv, env).unwrap_err().to_string();
        assert_eq!(error, *want, "{argv:?}");
    }
    for argv in [
        &["noe", "--remediate=delete"][..],
        &["noe", "--remediate-rate=0"],
        &["noe", "--watch-nodes=maybe"],
        &["noe", "--leader-elect-retry-period=0s"],
    ] {
        assert!(
            Args::try_parse_normalized(argv.iter().map(OsString::from)).is_err(),
            "{argv:?}"
        );
    }
}

#[test]
fn inspect_takes_the_kubeconfig_for_a_service_account() {
    let argv = [
        "noe",
        "inspect",
        "a:1",
        "--kubeconfig=/k",
        "--service-account=team/app",
    ];
    let Ok(Run::Inspect(inspect)) = parse(&argv).to_run() else {
        panic!("not inspect");
    };
    assert_eq!(
        inspect.kube.kubeconfig.as_deref(),
        Some(std::path::Path::new("/k"))
    );
    assert_eq!(
        inspect.service_account,
        Some(("team".to_owned(), "app".to_owned()))
    );
    assert!(
        inspect.registry.sources.service_account_tokens,
        "an account's identity is its tokens"
    );
    for bad in ["team", "Team/app", "team/", "/app", "team/a_b"] {
        let argv = ["noe", "inspect", "a:1", &format!("--service-account={bad}")];
        assert!(
            Args::try_parse_normalized(argv.iter().map(OsString::from)).is_err(),
            "{bad} is not NAMESPACE/NAME"
        );
    }
}

#[test]
fn untaint_takes_the_kubeconfig_and_nothing_of_the_server() {
    let Ok(Run::Untaint(untaint)) = parse(&["noe", "untaint", "--kubeconfig=/k"]).to_run() else {
        panic!("not untaint")
    };
    assert_eq!(
        untaint.kube.kubeconfig.as_deref(),
        Some(std::path::Path::new("/k"))
    );
    let cases: &[(&[&str], &str)] = &[
        (
            &["noe", "untaint", "--watch-nodes"],
            "--watch-nodes does not apply to `noe untaint`",
        ),
        (
            &["noe", "--taint-arches=arm64", "untaint"],
            "--taint-arches does not apply to `noe untaint`",
        ),
        (
            &["noe", "explain", "-f", "pod.yaml", "--remediate=report"],
            "--remediate does not apply to `noe explain`",
        ),
    ];
    for (argv, want) in cases {
        let error = parse(argv).to_run().unwrap_err().to_string();
        assert_eq!(error, *want, "{argv:?}");
    }
}
