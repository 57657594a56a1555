use super::*;

#[test]
fn image_registry_labels_are_bounded() {
    let configured = vec!["127.0.0.1:5000".to_owned(), "registry.corp".to_owned()];
    let cases = [
        ("nginx", "docker.io"),
        ("library/nginx:1", "docker.io"),
        ("docker.io/library/nginx", "docker.io"),
        ("index.docker.io/x/y", "docker.io"),
        ("ghcr.io/org/app:1", "ghcr.io"),
        ("eu.gcr.io/p/app:1", "gcr.io"),
        ("europe-docker.pkg.dev/p/r/i", "pkg.dev"),
        ("1234.dkr.ecr.eu-west-1.amazonaws.com/app", "amazonaws.com"),
        ("127.0.0.1:5000/a:1", "127.0.0.1:5000"),
        ("registry.corp/team/app", "registry.corp"),
        ("random.example.com/app", "other"),
        ("localhost:9999/app", "other"),
        ("Not A Reference!", "other"),
    ];
    for (image, want) in cases {
        assert_eq!(image_registry_label(image, &configured), want, "{image}");
    }
}

#[test]
fn registry_labels_are_bounded() {
    let config = Config {
        proxies: vec![("docker.io".into(), "proxy.corp".into())],
        insecure_registries: vec!["127.0.0.1:5000".into()],
        private_registries: vec!["*.private.corp/team".into()],
        ..Config::default()
    };
    let metrics = Metrics::new(&prometheus::Registry::new(), &config).unwrap();
    assert_eq!(metrics.registry_label("harbor.corp"), "other");
    metrics.set_configured_hosts(vec!["harbor.corp".to_owned()]);
    metrics.add_mirror_hosts(["mirror.corp:5000".to_owned()]);
    assert_eq!(
        metrics.registry_label("mirror.corp:5000"),
        "mirror.corp:5000"
    );
    let cases = [
        ("docker.io", "docker.io"),
        ("registry-1.docker.io", "docker.io"),
        ("ghcr.io", "ghcr.io"),
        ("europe-docker.pkg.dev", "pkg.dev"),
        ("123.dkr.ecr.eu-west-1.amazonaws.com", "amazonaws.com"),
        ("x.azurecr.io", "azurecr.io"),
        ("proxy.corp", "proxy.corp"),
        ("127.0.0.1:5000", "127.0.0.1:5000"),
        ("a.private.corp", "*.private.corp"),
        ("harbor.corp", "harbor.corp"),
        ("evil.example", "other"),
        ("127.0.0.1:5001", "other"),
    ];
    for (host, label) in cases {
        assert_eq!(metrics.registry_label(host), label, "{host}");
    }
}

#[test]
fn names_match_the_design() {
    let registry = prometheus::Registry::new();
    let metrics = Metrics::new(&registry, &Config::default()).unwrap();
    metrics
        .responses
        .with_label_values(&["manifest", "200"])
        .inc();
    metrics.errors.with_label_values(&["timeout"]).inc();
    metrics.count_revalidation("unchanged");
    metrics
        .throttled
        .with_label_values(&["docker.io", "circuit_open"])
        .inc();
    metrics
        .circuit_opened
        .with_label_values(&["docker.io", "too_many_requests"])
        .inc();
    metrics.shared_reads.with_label_values(&["hit"]).inc();
    metrics.shared_writes.with_label_values(&["ok"]).inc();
    metrics
        .credential_renewals
        .with_label_values(&["ecr", "renewed"])
        .inc();
    metrics.cache_responses.with_label_values(&["hit"]).inc();
    metrics
        .auth_cache_responses
        .with_label_values(&["miss"])
        .inc();
    metrics
        .request_duration
        .with_label_values(&["docker.io", "manifest"])
        .observe(0.1);
    let mut headers = http::HeaderMap::new();
    headers.insert("ratelimit-limit", "100;w=21600".parse().unwrap());
    headers.insert("ratelimit-remaining", "76;w=21600".parse().unwrap());
    metrics.record_rate_limit("registry-1.docker.io", &headers);
    let names: Vec<String> = registry
        .gather()
        .iter()
        .map(|f| f.name().to_owned())
        .collect();
    for name in [
        "noe_registry_requests_total",
        "noe_registry_responses_total",
        "noe_registry_errors_total",
        "noe_registry_rate_limit_remaining",
        "noe_registry_rate_limit_limit",
        "noe_registry_rate_limit_window_seconds",
        "noe_registry_cache_requests_total",
        "noe_registry_cache_responses_total",
        "noe_registry_authentication_cache_requests_total",
        "noe_registry_authentication_cache_responses_total",
        "noe_registry_request_duration_seconds",
        "noe_registry_cache_entries",
        "noe_registry_revalidations_total",
        "noe_registry_throttled_total",
        "noe_registry_circuit_opened_total",
        "noe_registry_shared_cache_reads_total",
        "noe_registry_shared_cache_writes_total",
        "noe_registry_credential_renewals_total",
    ] {
        assert!(
            names.iter().any(|n| n == name),
            "{name} missing from {names:?}"
        );
    }
    assert_eq!(
        metrics
            .rate_limit_window
            .with_label_values(&["docker.io"])
            .get(),
        21600.0
    );
    assert_eq!(
        metrics
            .rate_limit_remaining
            .with_label_values(&["docker.io"])
            .get(),
        76.0
    );
}
