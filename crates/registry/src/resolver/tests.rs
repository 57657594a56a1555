use super::*;

#[test]
fn private_patterns() {
    let cases = [
        ("*.corp.example", "registry.corp.example/team/app", true),
        ("*.corp.example", "a.b.corp.example/team/app", false),
        (
            "registry.corp.example:5000",
            "registry.corp.example/app",
            false,
        ),
        (
            "registry.corp.example/team",
            "registry.corp.example/team/app",
            true,
        ),
        (
            "registry.corp.example/team",
            "registry.corp.example/other/app",
            false,
        ),
        ("docker.io/acme", "docker.io/acme/app", true),
    ];
    for (pattern, image, expected) in cases {
        assert_eq!(is_private(pattern, image), expected, "{pattern} {image}");
    }
}

#[test]
fn resolution_serializes_like_inspect_json() {
    let resolution = Resolution {
        image: "docker.io/library/nginx:latest".into(),
        resolved: "docker.io/library/nginx:latest".into(),
        digest: "sha256:0".into(),
        media_type: crate::manifest::OCI_INDEX.into(),
        credential_source: None,
        platforms: vec![Platform::new("linux", "arm", Some("v7"))],
        answered_by: Answered::Get,
    };
    let json = serde_json::to_value(&resolution).unwrap();
    assert_eq!(json["mediaType"], crate::manifest::OCI_INDEX);
    assert_eq!(json["credentialSource"], "anonymous");
    assert_eq!(json["platforms"], serde_json::json!(["linux/arm/v7"]));
    assert_eq!(json["answeredBy"], "get");
}

#[test]
fn host_headers_skip_what_http_cannot_carry() {
    let hosts = HostsConfig::parse(
        "docker.io",
        "[header]\n  x-ok = [\"1\", \"2\"]\n  \"bad name\" = \"x\"\n  x-bad-value = \"a\\nb\"\n",
        std::path::Path::new("/"),
    )
    .unwrap();
    let headers = header_map(hosts.server().unwrap());
    assert_eq!(headers.len(), 2, "{headers:?}");
    assert_eq!(headers.get_all("x-ok").iter().count(), 2);
    assert!(headers.get("x-ok").unwrap().is_sensitive());
}

#[test]
fn bad_proxy_rules_are_refused() {
    let config = Config {
        proxies: vec![("docker.io".into(), "proxy.corp/path".into())],
        ..Config::default()
    };
    assert!(matches!(
        Resolver::new(config, &prometheus::Registry::new()),
        Err(Error::Config { .. })
    ));
}
