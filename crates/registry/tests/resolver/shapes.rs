//! Manifest shapes a real registry will store but that need care: deep nesting, indexes of
//! attestations only, schema1, artifacts (no platform), configs without an architecture; and
//! the `Accept` list actually sent.

use std::time::Duration;

use noe_registry::{Config, Error};
use noe_test_support::{
    build_artifact, build_image_with_config, push_built, sha256_digest, Behavior, FakeRegistry,
    Flavor, Registry,
};

use super::support::{platforms, resolver_with};

const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

fn fake_resolver(fake: &FakeRegistry) -> noe_registry::Resolver {
    resolver_with(Config {
        insecure_registries: vec![fake.host()],
        request_timeout: Duration::from_secs(2),
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    })
}

/// Routes a chain of `levels` indexes under `repo:top`, each holding the next without a
/// platform; the innermost one lists linux/arm64.
fn nested_chain(fake: &FakeRegistry, repo: &str, levels: usize) {
    let mut body = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [{"mediaType": OCI_MANIFEST, "size": 1,
                       "digest": format!("sha256:{}", "a".repeat(64)),
                       "platform": {"os": "linux", "architecture": "arm64"}}]
    })
    .to_string();
    for _ in 1..levels {
        let digest = sha256_digest(body.as_bytes());
        fake.route(
            &format!("/v2/{repo}/manifests/{digest}"),
            Behavior::manifest(OCI_INDEX, body),
        );
        body = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [{"mediaType": OCI_INDEX, "size": 1, "digest": digest}]
        })
        .to_string();
    }
    fake.route(
        &format!("/v2/{repo}/manifests/top"),
        Behavior::manifest(OCI_INDEX, body),
    );
}

#[tokio::test]
async fn nested_indexes_are_followed_to_a_bound() {
    let fake = FakeRegistry::start().await.unwrap();
    nested_chain(&fake, "ok", 5);
    nested_chain(&fake, "deep", 6);
    let resolver = fake_resolver(&fake);
    let resolution = resolver
        .resolve(&format!("{}/ok:top", fake.host()), &[])
        .await
        .unwrap();
    assert_eq!(platforms(&resolution), ["linux/arm64"]);
    let error = resolver
        .resolve(&format!("{}/deep:top", fake.host()), &[])
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::TooDeep { limit: 4, .. }),
        "{error:?}"
    );
    assert_eq!(fake.requests_to("/v2/deep/manifests/top").len(), 1);
    assert!(
        fake.request_count() <= 5 + 5,
        "bounded: {}",
        fake.request_count()
    );
}

#[tokio::test]
async fn an_index_of_attestations_only_has_no_platform() {
    let fake = FakeRegistry::start().await.unwrap();
    let body = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [{"mediaType": OCI_MANIFEST, "size": 1,
                       "digest": format!("sha256:{}", "a".repeat(64)),
                       "platform": {"os": "unknown", "architecture": "unknown"}}]
    });
    fake.route(
        "/v2/att/manifests/1",
        Behavior::manifest(OCI_INDEX, body.to_string()),
    );
    let error = fake_resolver(&fake)
        .resolve(&format!("{}/att:1", fake.host()), &[])
        .await
        .unwrap_err();
    assert!(matches!(error, Error::NoPlatforms { .. }), "{error:?}");
    assert_eq!(fake.request_count(), 1, "attestations are never fetched");
}

#[tokio::test]
async fn schema1_is_unsupported_and_an_artifact_has_no_platform() {
    let fake = FakeRegistry::start().await.unwrap();
    fake.route(
        "/v2/old/manifests/1",
        Behavior::manifest(
            "application/vnd.docker.distribution.manifest.v1+prettyjws",
            r#"{"schemaVersion":1,"name":"old","tag":"1","architecture":"amd64","fsLayers":[]}"#,
        ),
    );
    let helm = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.cncf.helm.config.v1+json", "size": 1,
                   "digest": format!("sha256:{}", "b".repeat(64))},
        "layers": []
    });
    fake.route(
        "/v2/chart/manifests/1",
        Behavior::manifest(OCI_MANIFEST, helm.to_string()),
    );
    let resolver = fake_resolver(&fake);
    let error = resolver
        .resolve(&format!("{}/old:1", fake.host()), &[])
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::UnsupportedMediaType { .. }),
        "{error:?}"
    );
    let chart = resolver
        .resolve(&format!("{}/chart:1", fake.host()), &[])
        .await
        .unwrap();
    assert!(chart.platforms.is_empty(), "{chart:?}");
    assert_eq!(
        fake.request_count(),
        2,
        "no config blob fetched for an artifact"
    );
}

/// OCI artifacts (image volumes may reference one) resolve to no platform: arch-neutral. A
/// single image whose config states no architecture stays an error: never assume amd64.
#[tokio::test]
async fn artifacts_are_arch_neutral_and_configs_without_architecture_fail_on_a_real_registry() {
    let registry = Registry::start().await.unwrap();
    let pusher = registry.pusher().unwrap();
    let artifact = build_artifact("data", "application/vnd.example.data.v1").unwrap();
    push_built(&pusher, "volumes/data", Some("1"), &artifact)
        .await
        .unwrap();
    let chart =
        build_image_with_config("chart", &serde_json::json!({"name": "chart"}), Flavor::Oci)
            .unwrap();
    let mut chart_manifest: serde_json::Value = serde_json::from_slice(&chart.manifest).unwrap();
    chart_manifest["config"]["mediaType"] = "application/vnd.cncf.helm.config.v1+json".into();
    pusher.push_blob("charts/app", &chart.layer).await.unwrap();
    pusher.push_blob("charts/app", &chart.config).await.unwrap();
    pusher
        .push_manifest_json("charts/app", "1", OCI_MANIFEST, &chart_manifest)
        .await
        .unwrap();
    let unplatformed = build_image_with_config(
        "bare",
        &serde_json::json!({"os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}),
        Flavor::Docker,
    )
    .unwrap();
    push_built(&pusher, "bare/app", Some("1"), &unplatformed)
        .await
        .unwrap();

    let resolver = resolver_with(Config {
        insecure_registries: vec![registry.host()],
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    });
    for repository in ["volumes/data", "charts/app"] {
        registry.reset_requests();
        let resolution = resolver
            .resolve(&registry.reference(repository, "1"), &[])
            .await
            .unwrap_or_else(|e| panic!("{repository}: {e}"));
        assert!(
            resolution.platforms.is_empty(),
            "{repository}: {resolution:?}"
        );
        assert_eq!(resolution.media_type, OCI_MANIFEST);
        assert_eq!(
            registry.request_count(),
            1,
            "{repository}: only the manifest"
        );
    }
    let error = resolver
        .resolve(&registry.reference("bare/app", "1"), &[])
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::InvalidContent { reason, .. } if reason.contains("no architecture")),
        "{error:?}"
    );
}

#[tokio::test]
async fn the_accept_list_has_the_four_types_and_never_schema1() {
    let fake = FakeRegistry::start().await.unwrap();
    let body = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [{"mediaType": OCI_MANIFEST, "size": 1,
                       "digest": format!("sha256:{}", "a".repeat(64)),
                       "platform": {"os": "linux", "architecture": "amd64"}}]
    });
    fake.route(
        "/v2/app/manifests/1",
        Behavior::manifest(OCI_INDEX, body.to_string()),
    );
    fake_resolver(&fake)
        .resolve(&format!("{}/app:1", fake.host()), &[])
        .await
        .unwrap();
    let requests = fake.requests_to("/v2/app/manifests/1");
    let accept = requests[0].header("accept").unwrap();
    for media_type in [
        OCI_INDEX,
        "application/vnd.docker.distribution.manifest.list.v2+json",
        OCI_MANIFEST,
        "application/vnd.docker.distribution.manifest.v2+json",
    ] {
        assert!(accept.contains(media_type), "{accept}");
    }
    assert!(!accept.contains("distribution.manifest.v1"), "{accept}");
}

#[tokio::test]
async fn platformless_entries_are_resolved_up_to_a_bound() {
    let fake = FakeRegistry::start().await.unwrap();
    let mut entries = Vec::new();
    for i in 0..10 {
        let config =
            serde_json::json!({"os": "linux", "architecture": format!("arch{i}")}).to_string();
        let config_digest = sha256_digest(config.as_bytes());
        fake.route(
            &format!("/v2/many/blobs/{config_digest}"),
            Behavior::body(200, "application/octet-stream", config),
        );
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "size": 1, "digest": config_digest},
            "layers": []
        })
        .to_string();
        let digest = sha256_digest(manifest.as_bytes());
        fake.route(
            &format!("/v2/many/manifests/{digest}"),
            Behavior::manifest(OCI_MANIFEST, manifest),
        );
        entries.push(serde_json::json!({"mediaType": OCI_MANIFEST, "size": 1, "digest": digest}));
    }
    entries.push(serde_json::json!({"mediaType": OCI_MANIFEST, "size": 1,
        "digest": format!("sha256:{}", "e".repeat(64)),
        "platform": {"os": "linux", "architecture": "s390x"}}));
    let index =
        serde_json::json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries});
    fake.route(
        "/v2/many/manifests/1",
        Behavior::manifest(OCI_INDEX, index.to_string()),
    );
    let resolution = fake_resolver(&fake)
        .resolve(&format!("{}/many:1", fake.host()), &[])
        .await
        .unwrap();
    let found = platforms(&resolution);
    assert_eq!(
        found.len(),
        9,
        "8 resolved entries + the stated one: {found:?}"
    );
    assert!(found.contains(&"linux/s390x".to_owned()), "{found:?}");
    assert_eq!(fake.request_count(), 1 + 8 + 8);
}
