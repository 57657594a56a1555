use super::*;

#[test]
fn labels_come_from_the_code_or_the_configuration() {
    let configured = ConfiguredHosts::new([
        "harbor.corp",
        "127.0.0.1:5000",
        "https://Quay-Mirror.corp/v1/",
        "registry.corp/team",
        "*.private.corp",
        "*.dkr.ecr.*.amazonaws.com",
        "*",
        "",
    ]);
    let cases = [
        // Configured, exact.
        ("harbor.corp", "harbor.corp"),
        ("HARBOR.corp", "harbor.corp"),
        ("127.0.0.1:5000", "127.0.0.1:5000"),
        ("quay-mirror.corp", "quay-mirror.corp"),
        ("registry.corp", "registry.corp"),
        // Public.
        ("docker.io", "docker.io"),
        ("registry-1.docker.io", "docker.io"),
        ("index.docker.io", "docker.io"),
        ("ghcr.io", "ghcr.io"),
        ("quay.io", "quay.io"),
        ("gcr.io", "gcr.io"),
        ("registry.k8s.io", "registry.k8s.io"),
        ("public.ecr.aws", "public.ecr.aws"),
        // Under a provider wildcard: the provider, never the tenant's host, even when a
        // configured glob covers it.
        ("eu.gcr.io", "gcr.io"),
        ("europe-docker.pkg.dev", "pkg.dev"),
        ("1234.dkr.ecr.eu-west-1.amazonaws.com", "amazonaws.com"),
        ("r1.azurecr.io", "azurecr.io"),
        ("r1.azurecr.io:443", "azurecr.io"),
        // A configured glob: the glob as written.
        ("a.private.corp", "*.private.corp"),
        // Anything else.
        ("evil.example", "other"),
        ("127.0.0.1:5001", "other"),
        ("azurecr.io.evil.example", "other"),
        ("notazurecr.io", "other"),
    ];
    for (host, want) in cases {
        assert_eq!(configured.label(host), want, "{host}");
    }
    // `*` names every host: it configures none.
    assert_eq!(configured.len(), 6);
}

#[test]
fn thousands_of_invented_hosts_make_one_label() {
    let configured = ConfiguredHosts::new(["*.azurecr.io"]);
    let labels: HashSet<String> = (0..3000)
        .map(|n| configured.label(&format!("r{n}.azurecr.io")))
        .collect();
    assert_eq!(labels, HashSet::from(["azurecr.io".to_owned()]));
    let labels: HashSet<String> = (0..3000)
        .map(|n| configured.label(&format!("r{n}.example")))
        .collect();
    assert_eq!(labels, HashSet::from([OTHER.to_owned()]));
}
