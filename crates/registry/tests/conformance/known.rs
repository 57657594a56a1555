//! Cases where this crate deliberately answers differently from upstream, each with the reason
//! docs/compatibility.md ("Registry conformance") gives: `(table, case id, reason)`.

pub const DIFFERENCES: &[(&str, &str, &str)] = &[
    (
        "distribution-reference",
        "TestReferenceParse: validname@sha512:fffffffffffffffffffffffffffffffffffffffffff... (145 chars)",
        "sha512 digests are accepted and verified (the OCI image spec registers sha512; upstream's go-digest links sha256 alone)",
    ),
    (
        "distribution-reference",
        "TestParseAnyReference: dbcc1c35ac38df41fd2f5e4130b32ffdb93ebae8b3dbe638c23575912276... (64 chars)",
        "a bare image ID names no repository to fetch: refused as a reference",
    ),
    (
        "distribution-reference",
        "TestParseAnyReference: sha256:dbcc1c35ac38df41fd2f5e4130b32ffdb93ebae8b3dbe638c2357... (71 chars)",
        "a bare digest names no repository to fetch: read as the repository `sha256` with a tag",
    ),
    (
        "distribution-reference",
        "TestParseDockerRef: gcr.io/library/busybox:latest@sha256:e6693c20186f837fc393390... (101 chars)",
        "a tag beside a digest is kept for display (the digest is what is fetched), as ParseNormalizedNamed keeps it",
    ),
    (
        "containerd-hosts",
        "TestHTTPFallback: localhost:8080",
        "no plain-HTTP fallback after a failed TLS handshake: plain HTTP is opt-in per host (--insecure-registries)",
    ),
    (
        "containerd-hosts",
        "TestHTTPFallback: localhost:80",
        "no plain-HTTP fallback after a failed TLS handshake: plain HTTP is opt-in per host (--insecure-registries)",
    ),
    (
        "containerd-hosts",
        "TestHTTPFallback: localhost:5000",
        "no plain-HTTP fallback after a failed TLS handshake: plain HTTP is opt-in per host (--insecure-registries)",
    ),
    (
        "containerd-hosts",
        "TestHTTPFallback: 127.0.0.254:5000",
        "no plain-HTTP fallback after a failed TLS handshake: plain HTTP is opt-in per host (--insecure-registries)",
    ),
    (
        "containerd-hosts",
        "TestHTTPFallback: [::1]:5000",
        "no plain-HTTP fallback after a failed TLS handshake: plain HTTP is opt-in per host (--insecure-registries)",
    ),
    (
        "containerd-hosts",
        "TestHTTPFallback: ::1",
        "an unbracketed IPv6 address is not a registry host (image references write [::1])",
    ),
    (
        "docker-cli-convert-to-hostname",
        "TestConvertToHostname: unix:///var/run/docker.sock",
        "config keys with a scheme other than http(s) are kept as written, as the kubelet keyring keeps them",
    ),
    (
        "docker-cli-convert-to-hostname",
        "TestConvertToHostname: ftp://example.com",
        "config keys with a scheme other than http(s) are kept as written, as the kubelet keyring keeps them",
    ),
    (
        "docker-cli-convert-to-hostname",
        "TestConvertToHostname: https://::1:6555/v2/",
        "an unbracketed IPv6 host in a config key is kept as written (write [::1]:6555)",
    ),
    (
        "kubelet-provider-config",
        "Test_validateCredentialProviderConfig: valid config with KubeletServiceAccountTokenForCredentialProviders feature gate enabled",
        "tokenAttributes without cacheType are refused, as Kubernetes 1.34 refuses them (the case predates the field)",
    ),
];
