//! Vectors adapted from distribution/reference's `reference_test.go` and `normalize_test.go`.

use super::*;

/// (input, registry, repository, tag, digest, endpoint)
type Case<'a> = (
    &'a str,
    &'a str,
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
    &'a str,
);

const D: &str = "sha256:ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";

#[test]
fn valid_references_normalize() {
    let long_digest = format!("test:5000/repo@{D}");
    let tag_and_digest = format!("test:5000/repo:tag@{D}");
    let hub_digest = format!("nginx@{D}");
    // (input, registry, repository, tag, digest, endpoint)
    let cases: Vec<Case> = vec![
        (
            "nginx",
            "docker.io",
            "library/nginx",
            Some("latest"),
            None,
            "registry-1.docker.io",
        ),
        (
            "debian",
            "docker.io",
            "library/debian",
            Some("latest"),
            None,
            "registry-1.docker.io",
        ),
        (
            "docker/docker",
            "docker.io",
            "docker/docker",
            Some("latest"),
            None,
            "registry-1.docker.io",
        ),
        (
            "library/debian",
            "docker.io",
            "library/debian",
            Some("latest"),
            None,
            "registry-1.docker.io",
        ),
        (
            "docker.io/debian",
            "docker.io",
            "library/debian",
            Some("latest"),
            None,
            "registry-1.docker.io",
        ),
        (
            "index.docker.io/debian",
            "docker.io",
            "library/debian",
            Some("latest"),
            None,
            "registry-1.docker.io",
        ),
        (
            "index.docker.io/docker/docker",
            "docker.io",
            "docker/docker",
            Some("latest"),
            None,
            "registry-1.docker.io",
        ),
        (
            "127.0.0.1:5000/docker/docker",
            "127.0.0.1:5000",
            "docker/docker",
            Some("latest"),
            None,
            "127.0.0.1:5000",
        ),
        (
            "127.0.0.1:5000/debian",
            "127.0.0.1:5000",
            "debian",
            Some("latest"),
            None,
            "127.0.0.1:5000",
        ),
        (
            "192.168.0.1",
            "docker.io",
            "library/192.168.0.1",
            Some("latest"),
            None,
            "registry-1.docker.io",
        ),
        (
            "192.168.0.1:80",
            "docker.io",
            "library/192.168.0.1",
            Some("80"),
            None,
            "registry-1.docker.io",
        ),
        (
            "192.168.0.1:8/debian",
            "192.168.0.1:8",
            "debian",
            Some("latest"),
            None,
            "192.168.0.1:8",
        ),
        (
            "[fc00::1]:5000/docker",
            "[fc00::1]:5000",
            "docker",
            Some("latest"),
            None,
            "[fc00::1]:5000",
        ),
        (
            "[2001:db8::1]/repo",
            "[2001:db8::1]",
            "repo",
            Some("latest"),
            None,
            "[2001:db8::1]",
        ),
        (
            "[::1]:5000/repo:tag",
            "[::1]:5000",
            "repo",
            Some("tag"),
            None,
            "[::1]:5000",
        ),
        (
            "docker.io/jess/t.a.b.l.e",
            "docker.io",
            "jess/t.a.b.l.e",
            Some("latest"),
            None,
            "registry-1.docker.io",
        ),
        (
            "test_com",
            "docker.io",
            "library/test_com",
            Some("latest"),
            None,
            "registry-1.docker.io",
        ),
        (
            "test.com:tag",
            "docker.io",
            "library/test.com",
            Some("tag"),
            None,
            "registry-1.docker.io",
        ),
        (
            "test.com:5000",
            "docker.io",
            "library/test.com",
            Some("5000"),
            None,
            "registry-1.docker.io",
        ),
        (
            "test.com/repo:tag",
            "test.com",
            "repo",
            Some("tag"),
            None,
            "test.com",
        ),
        (
            "test:5000/repo",
            "test:5000",
            "repo",
            Some("latest"),
            None,
            "test:5000",
        ),
        (
            "test:5000/repo:tag",
            "test:5000",
            "repo",
            Some("tag"),
            None,
            "test:5000",
        ),
        (
            &long_digest,
            "test:5000",
            "repo",
            None,
            Some(D),
            "test:5000",
        ),
        (
            &tag_and_digest,
            "test:5000",
            "repo",
            Some("tag"),
            Some(D),
            "test:5000",
        ),
        (
            &hub_digest,
            "docker.io",
            "library/nginx",
            None,
            Some(D),
            "registry-1.docker.io",
        ),
        (
            "foo/foo_bar.com:8080",
            "docker.io",
            "foo/foo_bar.com",
            Some("8080"),
            None,
            "registry-1.docker.io",
        ),
        (
            "localhost/foo",
            "localhost",
            "foo",
            Some("latest"),
            None,
            "localhost",
        ),
        (
            "localhost:5000/foo/bar:v1.2_3-rc",
            "localhost:5000",
            "foo/bar",
            Some("v1.2_3-rc"),
            None,
            "localhost:5000",
        ),
        (
            "ghcr.io/org/app__x/y-z--w:1",
            "ghcr.io",
            "org/app__x/y-z--w",
            Some("1"),
            None,
            "ghcr.io",
        ),
        (
            "Foo.io/bar",
            "Foo.io",
            "bar",
            Some("latest"),
            None,
            "Foo.io",
        ),
        (
            "quay.io/prometheus/node-exporter:v1.8.0",
            "quay.io",
            "prometheus/node-exporter",
            Some("v1.8.0"),
            None,
            "quay.io",
        ),
    ];
    for (input, registry, repository, tag, digest, endpoint) in cases {
        let r = Reference::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(r.registry, registry, "{input}");
        assert_eq!(r.repository, repository, "{input}");
        assert_eq!(r.tag.as_deref(), tag, "{input}");
        assert_eq!(r.digest.as_deref(), digest, "{input}");
        assert_eq!(r.endpoint(), endpoint, "{input}");
    }
}

#[test]
fn invalid_references_are_refused_with_the_reference_named() {
    let long_name = format!("a/{}", "a".repeat(260));
    let long_tag = format!("repo:{}", "t".repeat(129));
    let cases: Vec<(&str, &str)> = vec![
        ("", "empty"),
        (":justtag", "missing repository"),
        ("@sha256:ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", "missing repository"),
        ("repo@sha256:ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", "invalid sha256 digest"),
        ("validname@invaliddigest:ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", "unsupported digest algorithm"),
        ("repo@sha256:FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "invalid sha256 digest"),
        ("Uppercase:tag", "lowercase"),
        ("docker/Docker", "lowercase"),
        ("docker.io/docker/Docker", "lowercase"),
        ("https://github.com/docker/docker", "invalid"),
        ("-docker", "path component"),
        ("-docker.io/docker/docker", "registry host"),
        ("docker///docker", "path component"),
        ("docker.io/docker///docker", "path component"),
        ("[fc00::1]:5000", "invalid"),
        ("[fe80::1%eth0]:5000/repo", "registry host"),
        ("repo:-tag", "invalid tag"),
        ("repo:", "invalid tag"),
        ("a/b:tag:other", "path component"),
        ("1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5d7c9b1a3f5e7d9c1b3a", "image ID"),
        (&long_name, "255"),
        (&long_tag, "invalid tag"),
        ("foo..bar/x", "registry host"),
        ("foo:bar:baz/x", "registry host"),
        ("a/b__c___d", "path component"),
        ("a/b.", "path component"),
    ];
    for (input, reason) in cases {
        let err = Reference::parse(input)
            .err()
            .unwrap_or_else(|| panic!("{input:?} parsed"));
        let message = err.to_string();
        assert!(message.contains(reason), "{input:?}: {message}");
        // Named as written (escaped, and cut after 160 characters).
        let named: String = input.chars().take(100).collect();
        assert!(message.contains(&named), "{input:?}: {message}");
        assert_eq!(err.kind(), "invalid_reference");
    }
}

#[test]
fn display_object_and_proxies() {
    let r = Reference::parse("nginx").unwrap();
    assert_eq!(r.to_string(), "docker.io/library/nginx:latest");
    assert_eq!(r.object(), "latest");
    assert_eq!(r.name(), "docker.io/library/nginx");
    let d = Reference::parse(&format!("nginx:1.27@{D}")).unwrap();
    assert_eq!(d.to_string(), format!("docker.io/library/nginx:1.27@{D}"));
    assert_eq!(d.object(), D, "a digest wins over the tag");
    let p = r.with_registry("proxy.corp:8443");
    assert_eq!(p.to_string(), "proxy.corp:8443/library/nginx:latest");
    assert_eq!(p.endpoint(), "proxy.corp:8443");
    assert_eq!(
        p.with_registry("index.docker.io").endpoint(),
        "registry-1.docker.io"
    );
}

#[test]
fn the_length_limit_applies_to_the_path_alone() {
    // distribution/reference v0.6.0: 255 characters of repository path, host not counted.
    let path = format!("team/{}", "a".repeat(250));
    assert_eq!(path.len(), 255);
    let long_host = format!("registry.example.com:5000/{path}:tag");
    let r = Reference::parse(&long_host).unwrap();
    assert_eq!(r.repository, path);
    let hub = Reference::parse(&format!("{path}:1")).unwrap();
    assert_eq!(hub.registry, "docker.io");
    // `library/` counts: it is part of the path that is fetched.
    assert!(Reference::parse(&"a".repeat(247)).is_ok());
    assert!(Reference::parse(&"a".repeat(248)).is_err());
    let too_long = format!("registry.example.com/{path}b");
    let err = Reference::parse(&too_long).unwrap_err();
    assert!(err.to_string().contains("255"), "{err}");
}
