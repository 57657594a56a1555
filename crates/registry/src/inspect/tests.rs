use super::*;

fn spec(text: &str) -> PlatformSpec {
    PlatformSpec::parse(text).unwrap()
}

#[test]
fn platform_specs_parse_like_crane_and_docker() {
    let arm = spec("linux/arm/v7");
    assert_eq!(
        (
            arm.os.as_str(),
            arm.architecture.as_str(),
            arm.variant.as_deref()
        ),
        ("linux", "arm", Some("v7"))
    );
    assert_eq!(spec("Linux/AMD64").to_string(), "linux/amd64");
    let windows = spec("windows/amd64:10.0.20348.2227");
    assert_eq!(windows.os_version.as_deref(), Some("10.0.20348.2227"));
    assert_eq!(windows.to_string(), "windows/amd64:10.0.20348.2227");
    for bad in [
        "",
        "amd64",
        "linux/",
        "/amd64",
        "linux/arm/v7/x",
        "linux/arm/",
        "linux/amd64:",
        "linux/am d64",
        "linux/amd64\n",
        &format!("linux/{}", "a".repeat(100)),
    ] {
        assert!(PlatformSpec::parse(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn platform_specs_match_as_containerd_normalizes() {
    let arm64 = Platform::new("linux", "arm64", None);
    let arm64_v8 = Platform::new("linux", "arm64", Some("v8"));
    let arm_v7 = Platform::new("linux", "arm", Some("v7"));
    let windows = Platform::new("windows", "amd64", None).with_os_version(Some("10.0.1"));
    let cases = [
        ("linux/arm64", &arm64, true),
        ("linux/arm64", &arm64_v8, true),
        ("linux/arm64/v8", &arm64, true),
        ("linux/arm64/v9", &arm64, false),
        ("linux/arm", &arm_v7, true),
        ("linux/arm/v7", &arm_v7, true),
        ("linux/arm/v6", &arm_v7, false),
        ("windows/amd64", &arm64, false),
        ("windows/amd64", &windows, true),
        ("windows/amd64:10.0.1", &windows, true),
        ("windows/amd64:10.0.2", &windows, false),
        ("linux/amd64", &windows, false),
    ];
    for (text, platform, expected) in cases {
        assert_eq!(
            spec(text).matches(platform),
            expected,
            "{text} vs {platform}"
        );
    }
}

fn entry(digest: &str, platform: Option<serde_json::Value>) -> Descriptor {
    let mut value = serde_json::json!({
        "mediaType": crate::manifest::OCI_MANIFEST,
        "digest": digest,
        "size": 42,
    });
    if let Some(platform) = platform {
        value["platform"] = platform;
    }
    serde_json::from_value(value).unwrap()
}

#[test]
fn children_list_what_the_index_states_and_choose_skips_attestations() {
    let entries = vec![
        entry(
            "sha256:aa",
            Some(serde_json::json!({"os": "unknown", "architecture": "unknown"})),
        ),
        entry(
            "sha256:bb",
            Some(serde_json::json!({"os": "linux", "architecture": "arm", "variant": "v7"})),
        ),
        entry(
            "sha256:cc",
            Some(serde_json::json!({"os": "windows", "architecture": "amd64",
                "os.version": "10.0.1", "os.features": ["win32k"]})),
        ),
        entry("sha256:dd", None),
        entry(
            "sha256:ee",
            Some(serde_json::json!({"os": "linux", "architecture": "arm", "variant": "v7"})),
        ),
    ];
    let (children, total) = children(&entries);
    assert_eq!(total, 5);
    assert!(children[0].attestation);
    assert_eq!(children[2].os_version.as_deref(), Some("10.0.1"));
    assert_eq!(children[2].os_features, vec!["win32k".to_owned()]);
    assert_eq!(children[3].platform, None);
    assert_eq!(
        choose(&children, &spec("linux/arm")).map(|c| c.digest.as_str()),
        Some("sha256:bb")
    );
    assert_eq!(choose(&children, &spec("unknown/unknown")), None);
    assert_eq!(choose(&children, &spec("linux/s390x")), None);
    let listed: Vec<String> = available(&children)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(listed, ["linux/arm/v7", "windows/amd64"]);
    let json = serde_json::to_value(&children[2]).unwrap();
    assert_eq!(json["platform"], "windows/amd64");
    assert_eq!(json["os.version"], "10.0.1");
    assert!(json.get("attestation").is_none());
    assert_eq!(
        serde_json::to_value(&children[0]).unwrap()["attestation"],
        true
    );
}

#[test]
fn children_are_capped() {
    let entries: Vec<Descriptor> = (0..MAX_CHILDREN + 5)
        .map(|i| entry(&format!("sha256:{i:064x}"), None))
        .collect();
    let (children, total) = children(&entries);
    assert_eq!(children.len(), MAX_CHILDREN);
    assert_eq!(total, MAX_CHILDREN + 5);
    let long = entry(&"x".repeat(10_000), None);
    let (children, _) = super::children(&[long]);
    assert!(children[0].digest.len() <= MAX_DESCRIPTOR_FIELD + 4);
}

#[test]
fn config_summaries_keep_what_is_useful() {
    let body = serde_json::json!({
        "architecture": "amd64",
        "os": "windows",
        "os.version": "10.0.20348.2227",
        "os.features": ["win32k"],
        "created": "2024-01-02T03:04:05Z",
        "config": {
            "Entrypoint": ["/bin/app"],
            "Cmd": ["--serve"],
            "User": "65532",
            "WorkingDir": "/srv",
            "ExposedPorts": {"8080/tcp": {}, "53/udp": {}},
            "Env": ["TOKEN=secret"],
            "StopSignal": "SIGTERM",
            "Labels": {"org.opencontainers.image.source": "https://example.com/app"},
        },
        "rootfs": {"type": "layers", "diff_ids": []},
    });
    let summary = summarize_config(&serde_json::to_vec(&body).unwrap()).unwrap();
    assert_eq!(summary.os, "windows");
    assert_eq!(summary.os_version.as_deref(), Some("10.0.20348.2227"));
    assert_eq!(summary.os_features, ["win32k"]);
    assert_eq!(summary.entrypoint, Some(vec!["/bin/app".to_owned()]));
    assert_eq!(summary.cmd, Some(vec!["--serve".to_owned()]));
    assert_eq!(summary.user.as_deref(), Some("65532"));
    assert_eq!(summary.exposed_ports, ["53/udp", "8080/tcp"]);
    assert!(!summary.truncated);
    let json = serde_json::to_value(&summary).unwrap();
    assert_eq!(json["os.version"], "10.0.20348.2227");
    assert_eq!(json["workingDir"], "/srv");
    assert!(!json.to_string().contains("secret"), "{json}");

    // Docker's nulls and an empty `config` are fine; a missing architecture is not.
    let minimal =
        br#"{"architecture":"arm64","os":"linux","config":{"Cmd":null,"Entrypoint":null}}"#;
    let summary = summarize_config(minimal).unwrap();
    assert_eq!(summary.cmd, None);
    assert!(summarize_config(br#"{"os":"linux"}"#).is_err());
    assert!(summarize_config(br#"{"architecture":"amd64","config":{"Cmd":"sh"}}"#).is_err());
    assert!(summarize_config(b"not json").is_err());
}

#[test]
fn config_summaries_are_bounded() {
    let many: Vec<String> = (0..MAX_ITEMS * 2).map(|i| format!("arg{i}")).collect();
    let labels: serde_json::Map<String, serde_json::Value> = (0..MAX_ITEMS * 2)
        .map(|i| (format!("l{i:04}"), serde_json::json!("v")))
        .collect();
    let body = serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Cmd": many, "User": "u".repeat(MAX_STRING * 3), "Labels": labels},
    });
    let summary = summarize_config(&serde_json::to_vec(&body).unwrap()).unwrap();
    assert!(summary.truncated);
    assert_eq!(summary.cmd.unwrap().len(), MAX_ITEMS);
    assert_eq!(summary.labels.len(), MAX_ITEMS);
    assert!(summary.user.unwrap().len() <= MAX_STRING + 4);
}
