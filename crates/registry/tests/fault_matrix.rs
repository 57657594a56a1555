//! The registry fault matrix (docs/benchmarks.md, Fault matrix): a registry that refuses
//! connections, never answers, trickles one byte a second, answers 500, 429 with `Retry-After`,
//! invalid JSON, a 100 MiB body, a manifest that does not match its digest, a redirect to another
//! host, or whose token endpoint hangs; and a hostile one: huge platform strings, too many
//! platforms, nested fan-out, an absurd `Retry-After`, a redirect to a host that challenges. For
//! each: `Resolver::resolve` returns a clear error (naming the image and the registry) within the
//! registry timeout budget, `noe_registry_errors_total` counts it, nothing panics, and the same
//! resolver then resolves healthy images (on the faulty fake and on a real registry).
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// One test per defect of the hostile-registry pass, with its exact counts; the
/// per-host rate limiter and circuit breaker.
mod fault_matrix {
    mod cloud_redirect;
    mod hostile;
    mod targets;
    mod throttle;
}

use std::time::{Duration, Instant};

use noe_credentials::{Credential, CredentialCandidate};
use noe_registry::manifest::{OCI_CONFIG, OCI_INDEX, OCI_MANIFEST};
use noe_registry::resolver::MAX_REQUESTS_PER_LOOKUP;
use noe_registry::{Config, Resolver};
use noe_test_support::{push_image, sha256_digest, Behavior, FakeRegistry, Flavor, Registry};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(2);
/// Fresh healthy images pushed for the checks after each fault (one per check).
const HEALTHY_IMAGES: usize = 32;

fn index_body(arch: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [{
            "mediaType": OCI_MANIFEST,
            "digest": sha256_digest(arch.as_bytes()),
            "size": 100,
            "platform": {"os": "linux", "architecture": arch},
        }],
    }))
    .unwrap()
}

/// An index of `n` platforms with distinct architectures.
fn platforms_index(n: usize) -> Vec<u8> {
    let manifests: Vec<_> = (0..n)
        .map(|i| {
            json!({
                "mediaType": OCI_MANIFEST,
                "digest": sha256_digest(format!("{i}").as_bytes()),
                "size": 100,
                "platform": {"os": "linux", "architecture": format!("arch{i}")},
            })
        })
        .collect();
    serde_json::to_vec(&json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}))
        .unwrap()
}

/// Sum of `noe_registry_errors_total` over `kinds`.
fn errors(metrics: &prometheus::Registry, kinds: &[&str]) -> f64 {
    counter_sum(metrics, "noe_registry_errors_total", "errors", kinds)
}

fn counter_sum(metrics: &prometheus::Registry, name: &str, label: &str, values: &[&str]) -> f64 {
    metrics
        .gather()
        .iter()
        .filter(|family| family.name() == name)
        .flat_map(|family| family.get_metric().iter())
        .filter(|metric| {
            metric
                .get_label()
                .iter()
                .any(|l| l.name() == label && values.contains(&l.value()))
        })
        .map(|metric| metric.get_counter().get_value())
        .sum()
}

struct Fault {
    name: &'static str,
    image: String,
    credentials: Vec<CredentialCandidate>,
    /// Accepted `noe_registry_errors_total{errors}` kinds.
    kinds: &'static [&'static str],
    /// The error names this host (the registry the user wrote, or the one actually contacted).
    host: String,
}

struct Harness {
    fake: FakeRegistry,
    /// A second registry host, for faults that poison the whole host (its token endpoint).
    aux: FakeRegistry,
    /// A third one for the 429, after which the host is held back until its `Retry-After`.
    busy: FakeRegistry,
    real: Registry,
    resolver: Resolver,
    metrics: prometheus::Registry,
    healthy_round: usize,
}

impl Harness {
    async fn start() -> Self {
        let fake = FakeRegistry::start().await.unwrap();
        let aux = FakeRegistry::start().await.unwrap();
        let busy = FakeRegistry::start().await.unwrap();
        let real = Registry::start().await.unwrap();
        let pusher = real.pusher().unwrap();
        for i in 0..HEALTHY_IMAGES {
            push_image(
                &pusher,
                "healthy/app",
                Some(&format!("h{i}")),
                "linux/arm64",
                Flavor::Oci,
            )
            .await
            .unwrap();
        }
        for i in 0..HEALTHY_IMAGES {
            fake.route(
                &format!("/v2/healthy/app/manifests/h{i}"),
                Behavior::manifest(OCI_INDEX, index_body("s390x")),
            );
        }
        let metrics = prometheus::Registry::new();
        let config = Config {
            insecure_registries: vec![
                fake.host(),
                fake.other_host(),
                aux.host(),
                busy.host(),
                real.host(),
            ],
            request_timeout: TIMEOUT,
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        };
        let resolver = Resolver::new(config, &metrics).unwrap();
        Self {
            fake,
            aux,
            busy,
            real,
            resolver,
            metrics,
            healthy_round: 0,
        }
    }

    /// A never-seen healthy image on the fake and on the real registry both resolve.
    async fn assert_healthy(&mut self, after: &str) {
        let round = self.healthy_round;
        self.healthy_round += 1;
        let on_fake = format!("{}/healthy/app:h{round}", self.fake.host());
        let on_real = format!("{}/healthy/app:h{round}", self.real.host());
        for (image, arch) in [(on_fake, "s390x"), (on_real, "arm64")] {
            let started = Instant::now();
            let resolution = self
                .resolver
                .resolve(&image, &[])
                .await
                .unwrap_or_else(|e| panic!("after {after}: healthy {image} failed: {e}"));
            assert_eq!(
                resolution
                    .platforms
                    .iter()
                    .map(|p| p.architecture.as_str())
                    .collect::<Vec<_>>(),
                [arch],
                "after {after}: {image}"
            );
            assert!(
                started.elapsed() < TIMEOUT,
                "after {after}: healthy {image} took {:?}",
                started.elapsed()
            );
        }
    }

    async fn assert_fault(&mut self, fault: &Fault) {
        let before = errors(&self.metrics, fault.kinds);
        let started = Instant::now();
        let result = self
            .resolver
            .resolve(&fault.image, &fault.credentials)
            .await;
        let elapsed = started.elapsed();
        let error = match result {
            Ok(resolution) => panic!("{}: resolved to {resolution:?}", fault.name),
            Err(error) => error,
        };
        // Within the budget of the requests a lookup makes (each bounded by the timeout).
        assert!(
            elapsed <= TIMEOUT * 2 + Duration::from_millis(500),
            "{}: took {elapsed:?}",
            fault.name
        );
        assert!(
            fault.kinds.contains(&error.kind()),
            "{}: error kind {} ({error}), expected one of {:?}",
            fault.name,
            error.kind(),
            fault.kinds
        );
        let message = error.to_string();
        assert!(
            message.contains(&fault.host),
            "{}: {message:?} does not name {}",
            fault.name,
            fault.host
        );
        assert_eq!(
            errors(&self.metrics, fault.kinds) - before,
            1.0,
            "{}: noe_registry_errors_total did not count it once",
            fault.name
        );
        // A second admission within the failure TTL is answered from the failure cache: fast.
        let again = Instant::now();
        let second = self
            .resolver
            .resolve(&fault.image, &fault.credentials)
            .await;
        assert!(second.is_err(), "{}: second attempt succeeded", fault.name);
        assert!(
            again.elapsed() < Duration::from_millis(200),
            "{}: failure not cached ({:?})",
            fault.name,
            again.elapsed()
        );
        self.assert_healthy(fault.name).await;
    }
}

#[tokio::test]
async fn registry_fault_matrix() {
    let mut h = Harness::start().await;
    h.assert_healthy("start").await;
    let fake = h.fake.host();
    let image = |repo: &str| format!("{fake}/{repo}:1");
    let route = |repo: &str, behavior: Behavior| {
        h.fake.route(&format!("/v2/{repo}/manifests/1"), behavior);
    };

    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    route("hang/app", Behavior::Hang);
    route(
        "trickle/app",
        Behavior::trickle(OCI_INDEX, index_body("amd64"), Duration::from_secs(1)),
    );
    route("e500/app", Behavior::status(500));
    h.busy
        .route("/v2/e429/app/manifests/1", Behavior::too_many_requests(1));
    let busy = h.busy.host();
    route("garbage/app", Behavior::invalid_json());
    route("huge/app", Behavior::oversized(OCI_INDEX, 100 << 20, true));
    route(
        "huge-chunked/app",
        Behavior::oversized(OCI_INDEX, 100 << 20, false),
    );
    let served = index_body("amd64");
    let pinned = sha256_digest(b"another manifest");
    h.fake.route(
        &format!("/v2/mismatch/app/manifests/{pinned}"),
        Behavior::manifest(OCI_INDEX, served),
    );
    // The challenge is cached per registry host, so this one gets its own host.
    let aux = h.aux.host();
    h.aux.route(
        "/v2/token-hang/app/manifests/1",
        Behavior::bearer_challenge(&format!("{}/token", h.aux.base_url()), "aux"),
    );
    h.aux.route("/token", Behavior::Hang);

    // Hostile registry.
    h.fake.route(
        "/v2/huge-arch/app/manifests/1",
        Behavior::huge_platform_index("architecture", 4_000_000, 1),
    );
    h.fake.route(
        "/v2/huge-variant/app/manifests/1",
        Behavior::huge_platform_index("variant", 100_000, 2),
    );
    h.fake.route(
        "/v2/huge-os-version/app/manifests/1",
        Behavior::huge_platform_index("os.version", 10_000, 3),
    );
    route(
        "many-platforms/app",
        Behavior::manifest(OCI_INDEX, platforms_index(65)),
    );
    h.fake.script_fan_out("fan-out/app", "1", 8, 4);
    route(
        "absurd-retry/app",
        Behavior::retry_after(503, "18446744073709551615").delayed(Duration::from_millis(1100)),
    );
    h.fake.script_foreign_challenge("foreign/app", "1");

    let fault = |name, image: String, kinds, host: &str| Fault {
        name,
        image,
        credentials: Vec::new(),
        kinds,
        host: host.to_owned(),
    };
    let refused_host = format!("127.0.0.1:{closed}");
    let faults = [
        fault(
            "connection refused",
            format!("{refused_host}/app:1"),
            &["transport"],
            &refused_host,
        ),
        fault("never answers", image("hang/app"), &["timeout"], &fake),
        fault(
            "one byte a second",
            image("trickle/app"),
            &["timeout"],
            &fake,
        ),
        fault("HTTP 500", image("e500/app"), &["http_status"], &fake),
        fault(
            "429 with Retry-After",
            format!("{busy}/e429/app:1"),
            &["http_status"],
            &busy,
        ),
        fault(
            "invalid JSON",
            image("garbage/app"),
            &["invalid_content"],
            &fake,
        ),
        fault(
            "100 MiB body with Content-Length",
            image("huge/app"),
            &["too_large"],
            &fake,
        ),
        fault(
            "100 MiB chunked body",
            image("huge-chunked/app"),
            &["too_large"],
            &fake,
        ),
        fault(
            "digest mismatch",
            format!("{fake}/mismatch/app@{pinned}"),
            &["digest_mismatch"],
            &fake,
        ),
        fault(
            "token endpoint hangs",
            format!("{aux}/token-hang/app:1"),
            &["timeout", "token"],
            &aux,
        ),
        fault(
            "4 MB architecture string",
            image("huge-arch/app"),
            &["invalid_content"],
            &fake,
        ),
        fault(
            "100 kB variant",
            image("huge-variant/app"),
            &["invalid_content"],
            &fake,
        ),
        fault(
            "10 kB os.version",
            image("huge-os-version/app"),
            &["invalid_content"],
            &fake,
        ),
        fault(
            "65 distinct platforms",
            image("many-platforms/app"),
            &["invalid_content"],
            &fake,
        ),
        fault(
            "nested fan-out, 8 entries per level, 4 levels",
            image("fan-out/app"),
            &["request_budget"],
            &fake,
        ),
        fault(
            "Retry-After: u64::MAX after a 1 s answer",
            image("absurd-retry/app"),
            &["http_status"],
            &fake,
        ),
        fault(
            "redirect to a host that challenges with its own realm",
            image("foreign/app"),
            &["redirected_challenge"],
            &fake,
        ),
    ];
    for f in &faults {
        h.assert_fault(f).await;
    }

    // 500 and 429 were retried once (Retry-After: 1 s fits in the 2 s budget), not more.
    assert_eq!(h.fake.requests_to("/v2/e500/app/manifests/1").len(), 2);
    assert_eq!(h.busy.requests_to("/v2/e429/app/manifests/1").len(), 2);
    let statuses = counter_sum(
        &h.metrics,
        "noe_registry_responses_total",
        "http_status",
        &["429", "500"],
    );
    assert!(
        statuses >= 4.0,
        "responses_total counted {statuses} 429/500s"
    );
    // The hanging token endpoint was asked once; the cached failure did not ask again.
    assert_eq!(h.aux.requests_to("/token").len(), 1);
    // The foreign realm was never asked; the fan-out stopped within the lookup's budget.
    assert!(h.fake.requests_to("/foreign/token").is_empty());
    let fan_out = h
        .fake
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/v2/fan-out/"))
        .count();
    assert!(
        fan_out <= MAX_REQUESTS_PER_LOOKUP,
        "fan-out cost {fan_out} requests"
    );
}

#[tokio::test]
async fn retry_after_is_honoured_then_the_image_resolves() {
    let mut h = Harness::start().await;
    let fake = h.fake.host();
    h.fake.route(
        "/v2/busy/app/manifests/1",
        Behavior::Sequence(vec![
            Behavior::too_many_requests(1),
            Behavior::manifest(OCI_INDEX, index_body("ppc64le")),
        ]),
    );
    let started = Instant::now();
    let resolution = h
        .resolver
        .resolve(&format!("{fake}/busy/app:1"), &[])
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "Retry-After ignored"
    );
    assert_eq!(resolution.platforms[0].architecture, "ppc64le");
    h.assert_healthy("retry").await;
}

/// A config blob redirected to another host: the redirect is followed, `Authorization` is not
/// sent there, and the lookup succeeds.
#[tokio::test]
async fn redirect_to_another_host_drops_authorization() {
    let mut h = Harness::start().await;
    let fake = h.fake.host();
    let config = serde_json::to_vec(&json!({"os": "linux", "architecture": "riscv64"})).unwrap();
    let config_digest = sha256_digest(&config);
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": config.len()},
        "layers": [],
    }))
    .unwrap();
    h.fake.route(
        "/v2/private/app/manifests/1",
        Behavior::Sequence(vec![
            Behavior::basic_challenge("fake"),
            Behavior::manifest(OCI_MANIFEST, manifest),
        ]),
    );
    h.fake.route(
        &format!("/v2/private/app/blobs/{config_digest}"),
        Behavior::redirect_to_other("/storage/config"),
    );
    h.fake
        .route("/storage/config", Behavior::body(200, OCI_CONFIG, config));
    let credentials = [CredentialCandidate::new(
        "test",
        Credential::Basic {
            username: "user".into(),
            password: "secret".into(),
        },
    )];
    let resolution = h
        .resolver
        .resolve(&format!("{fake}/private/app:1"), &credentials)
        .await
        .unwrap();
    assert_eq!(resolution.platforms[0].architecture, "riscv64");
    let blob = h
        .fake
        .requests_to(&format!("/v2/private/app/blobs/{config_digest}"));
    assert_eq!(blob.len(), 1);
    assert!(
        blob[0].has_authorization(),
        "same-host blob GET lost its credentials"
    );
    let storage = h.fake.requests_to("/storage/config");
    assert_eq!(storage.len(), 1);
    assert!(
        !storage[0].has_authorization(),
        "Authorization was sent to the redirect target on another host"
    );
    h.assert_healthy("redirect").await;
}
