use super::*;

#[test]
fn a_glob_in_the_path_is_refused() {
    for pattern in [
        "host.io/repo/*",
        "host.io/re?o",
        "127.0.0.1:5000/glob/*",
        "h.io/[ab]",
    ] {
        let error = check_pattern(pattern).unwrap_err();
        assert!(error.contains("glob in its path"), "{pattern}: {error}");
    }
    assert!(check_pattern("host.io/repo/*")
        .unwrap_err()
        .contains("\"host.io/repo\""));
    for pattern in ["*.k8s.io", "reg[0-9].io/team", "host.io:5000/a/b", "h?.io"] {
        assert_eq!(check_pattern(pattern), Ok(()), "{pattern}");
    }
}

proptest::proptest! {
    /// A host pattern without globs, compared whole, matches as label by label.
    #[test]
    fn literal_hosts_match_label_by_label(
        pattern in proptest::collection::vec("[a-zA-Z0-9-]{0,4}", 1..4),
        other in proptest::collection::vec("[a-zA-Z0-9-]{0,4}", 1..4),
        same in proptest::bool::ANY,
    ) {
        let pattern_host = pattern.join(".");
        let image_host = if same { pattern_host.to_ascii_uppercase() } else { other.join(".") };
        let pattern_labels: Vec<&str> = pattern_host.split('.').collect();
        let image_labels: Vec<&str> = image_host.split('.').collect();
        let label_by_label = pattern_labels.len() == image_labels.len()
            && pattern_labels
                .iter()
                .zip(&image_labels)
                .all(|(p, i)| p.eq_ignore_ascii_case(i));
        proptest::prop_assert_eq!(
            image_matches(&format!("{pattern_host}/team"), &format!("{image_host}/team/app:v1")),
            label_by_label
        );
    }
}

#[test]
fn kubelet_match_images_table() {
    // (pattern, image, expected)
    let cases: &[(&str, &str, bool)] = &[
        // Plain hosts.
        ("gcr.io", "gcr.io/project/app:1", true),
        ("gcr.io", "us.gcr.io/project/app", false),
        ("registry.k8s.io", "registry.k8s.io/pause:3.9", true),
        ("docker.io", "docker.io/library/nginx:latest", true),
        ("docker.io", "index.docker.io/library/nginx", false),
        // Globs per DNS label.
        ("*.k8s.io", "registry.k8s.io/pause", true),
        ("*.k8s.io", "k8s.io/pause", false),
        ("*.k8s.io", "a.b.k8s.io/pause", false),
        ("k8s.*.io", "k8s.gcr.io/pause", true),
        ("k8s.*.io", "k8s.gcr.com/pause", false),
        ("app*.k8s.io", "app1.k8s.io/x", true),
        ("app*.k8s.io", "apps-prod.k8s.io/x", true),
        ("app*.k8s.io", "web.k8s.io/x", false),
        ("k8s.*", "k8s.io/x", true),
        ("*.*.registry.io", "a.b.registry.io/x", true),
        ("*.*.registry.io", "a.registry.io/x", false),
        (
            "*.azurecr.io",
            "myreg.azurecr.io/team/app@sha256:abcd",
            true,
        ),
        (
            "*.dkr.ecr.*.amazonaws.com",
            "123456789012.dkr.ecr.us-east-1.amazonaws.com/app:1",
            true,
        ),
        ("reg?.io", "reg1.io/x", true),
        ("reg?.io", "reg12.io/x", false),
        ("reg[0-9].io", "reg7.io/x", true),
        ("reg[^0-9].io", "reg7.io/x", false),
        ("reg[^0-9].io", "regx.io/x", true),
        // Malformed glob matches nothing.
        ("reg[.io", "reg[.io/x", false),
        ("reg[]].io", "reg].io/x", false),
        ("reg[\\]].io", "reg].io/x", true),
        ("reg\\?.io", "reg?.io/x", true),
        ("reg\\?.io", "regx.io/x", false),
        // Case-insensitive hosts.
        ("GCR.io", "gcr.io/x", true),
        // Ports must match exactly.
        ("registry.io:8080", "registry.io:8080/app", true),
        ("registry.io:8080", "registry.io/app", false),
        ("registry.io", "registry.io:8080/app", false),
        ("registry.io:8080", "registry.io:5000/app", false),
        ("127.0.0.1:5000", "127.0.0.1:5000/app:1", true),
        ("*.0.0.1:5000", "127.0.0.1:5000/app:1", true),
        ("localhost:5000", "localhost:5000/app", true),
        ("[::1]:5000", "[::1]:5000/app", true),
        ("[::1]:5000", "[::1]:5001/app", false),
        // The pattern path is a string prefix of the image path.
        ("registry.io:8080/path", "registry.io:8080/path/app:1", true),
        ("registry.io:8080/path", "registry.io:8080/other/app", false),
        ("quay.io/team", "quay.io/team/app:1", true),
        ("quay.io/team", "quay.io/teammate/app", true),
        ("quay.io/team/", "quay.io/teammate/app", false),
        ("quay.io/team/app", "quay.io/team", false),
        (
            "docker.io/library/nginx",
            "docker.io/library/nginx:1.27",
            true,
        ),
        (
            "docker.io/library/nginx:1.27",
            "docker.io/library/nginx:1.27",
            true,
        ),
        (
            "docker.io/library/nginx:1.27",
            "docker.io/library/nginx:1.28",
            false,
        ),
        // Degenerate inputs.
        ("", "gcr.io/x", false),
        ("   ", "gcr.io/x", false),
        ("gcr.io", "", false),
    ];
    for (pattern, image, expected) in cases {
        assert_eq!(
            image_matches(pattern, image),
            *expected,
            "pattern {pattern:?} image {image:?}"
        );
    }
}

/// Where adevinta/noe answers differently, and why we follow the kubelet.
#[test]
fn noe_bugs_are_not_reproduced() {
    // noe rejects an image whose path starts with the pattern's path (inverted check) ...
    assert!(image_matches("registry.io/team", "registry.io/team/app:1"));
    // ... and accepts one whose path does not.
    assert!(!image_matches(
        "registry.io/team",
        "registry.io/other/app:1"
    ));
    // noe matches the whole host with one filepath.Match, so its `*` spans dots.
    assert!(!image_matches("*.io", "registry.k8s.io/pause"));
    assert!(!image_matches("*", "registry.k8s.io/pause"));
    // noe drops the image port when the pattern has none.
    assert!(!image_matches("registry.io", "registry.io:5000/app"));
    // noe only looks at the first path segment of the pattern.
    assert!(!image_matches("quay.io/team/app", "quay.io/team/other"));
}

#[test]
fn config_keys_table() {
    // (config key, normalized pattern)
    let cases: &[(&str, &str)] = &[
        ("https://index.docker.io/v1/", "docker.io"),
        ("index.docker.io", "docker.io"),
        ("docker.io", "docker.io"),
        ("https://registry-1.docker.io/v2/", "docker.io"),
        ("registry.hub.docker.com", "docker.io"),
        ("https://docker.io/myorg", "docker.io/myorg"),
        ("ghcr.io", "ghcr.io"),
        ("https://ghcr.io", "ghcr.io"),
        ("http://127.0.0.1:5000", "127.0.0.1:5000"),
        ("HTTPS://Quay.io/v1/", "quay.io"),
        ("quay.io/v2/team", "quay.io/team"),
        ("quay.io/team", "quay.io/team"),
        ("*.azurecr.io", "*.azurecr.io"),
        ("  gcr.io  ", "gcr.io"),
    ];
    for (key, expected) in cases {
        assert_eq!(normalize_config_key(key), *expected, "key {key:?}");
    }
}

#[test]
fn config_key_matching_table() {
    let cases: &[(&str, &str, bool)] = &[
        (
            "https://index.docker.io/v1/",
            "docker.io/library/nginx:latest",
            true,
        ),
        ("index.docker.io", "docker.io/user/app:1", true),
        ("https://index.docker.io/v1/", "ghcr.io/user/app:1", false),
        ("docker.io/user", "docker.io/user/app:1", true),
        ("docker.io/user", "docker.io/library/nginx", false),
        ("http://127.0.0.1:5000", "127.0.0.1:5000/app:1", true),
        ("127.0.0.1:5000", "127.0.0.1:5001/app:1", false),
        ("https://ghcr.io/v2/", "ghcr.io/o/a@sha256:00", true),
        ("*.azurecr.io", "x.azurecr.io/a", true),
    ];
    for (key, image, expected) in cases {
        assert_eq!(
            config_key_matches(key, image),
            *expected,
            "key {key:?} image {image:?}"
        );
    }
}

#[test]
fn helper_server_urls() {
    assert_eq!(helper_server_url("docker.io"), DOCKER_HUB_CONFIG_KEY);
    assert_eq!(helper_server_url("index.docker.io"), DOCKER_HUB_CONFIG_KEY);
    assert_eq!(helper_server_url("ghcr.io"), "ghcr.io");
    assert_eq!(helper_server_url("127.0.0.1:5000"), "127.0.0.1:5000");
}

#[test]
fn image_hosts() {
    assert_eq!(image_host("docker.io/library/nginx:1"), "docker.io");
    assert_eq!(image_host("127.0.0.1:5000/app:1"), "127.0.0.1:5000");
    assert_eq!(image_host("localhost"), "localhost");
}

#[test]
fn most_specific_first() {
    let mut keys = vec![
        "quay.io".to_owned(),
        "quay.io/coreos".to_owned(),
        "*.quay.io".to_owned(),
        "gcr.io".to_owned(),
    ];
    sort_most_specific_first(&mut keys);
    assert_eq!(keys, ["quay.io/coreos", "quay.io", "gcr.io", "*.quay.io"]);
}
