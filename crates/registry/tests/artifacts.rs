//! Compatibility artifacts from registries: the CNCF registry (no referrers API: the
//! `sha256-<hex>` fallback tag) holding artifacts pushed as `oras push`/`oras attach` lay them
//! out, and the fake for what it cannot do (a referrers API with and without
//! `OCI-Filters-Applied`, `Link` paging, a GitLab-style fallback tag resolving to the subject).
//! Request counts are read from the registry's own access log.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use noe_core::selection::{
    candidates, choose, NodeFacts, Spec, NFD_ARTIFACT_TYPE, NFD_MEDIA_TYPE, OCIFIT_MEDIA_TYPE,
};
use noe_registry::artifacts::Artifacts;
use noe_registry::{Config, Resolver, Routed};
use noe_test_support::{
    attach, compat_artifact, fallback_tag, manifest_path, push_artifact, push_image, Behavior,
    CompatArtifact, FakeRegistry, Flavor, Registry, OCIFIT_SPEC_TYPE, ORAS_DEFAULT_ARTIFACT_TYPE,
};
use serde_json::json;

/// `image` routed by a resolver like [`resolver`]'s for its host.
async fn routed(image: &str) -> Routed {
    let host = image.split('/').next().unwrap();
    resolver(host).routed(image).await.unwrap()
}

fn resolver(host: &str) -> Resolver {
    let config = Config {
        insecure_registries: vec![host.to_owned()],
        request_timeout: std::time::Duration::from_secs(5),
        allow_cidrs: noe_test_support::loopback_cidrs(),
        ..Config::default()
    };
    Resolver::new(config, &prometheus::Registry::new()).unwrap()
}

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

fn nfd_spec(tag: &str) -> Vec<u8> {
    format!(
        "version: v1alpha1\ncompatibilities:\n- tag: {tag}\n  rules:\n  - name: r\n    matchFeatures:\n    - feature: kernel.version\n      matchExpressions:\n        major: {{op: Gt, value: [\"5\"]}}\n"
    )
    .into_bytes()
}

fn attached(
    subject: &noe_test_support::Descriptor,
    tag: &str,
    created: Option<&str>,
) -> CompatArtifact {
    compat_artifact(
        NFD_ARTIFACT_TYPE,
        NFD_MEDIA_TYPE,
        &nfd_spec(tag),
        Some((OCI_MANIFEST, &subject.digest, subject.size)),
        created,
    )
}

fn summary(registry: &Registry) -> Vec<String> {
    registry
        .requests()
        .iter()
        .map(|r| format!("{} {} {}", r.method, r.path, r.status))
        .collect()
}

#[tokio::test]
async fn nfd_artifacts_through_the_fallback_tag_cost_4_requests_then_3_then_none() {
    let registry = Registry::start().await.unwrap();
    let pusher = registry.pusher().unwrap();
    let app = push_image(&pusher, "app", Some("1"), "linux/amd64", Flavor::Oci)
        .await
        .unwrap();
    let other = push_image(&pusher, "other", Some("1"), "linux/amd64", Flavor::Oci)
        .await
        .unwrap();
    // Two artifacts on app (the newer wins, whichever spelling of created), one on other.
    let old = attached(&app, "old", Some("2025-01-01T00:00:00Z"));
    attach(&pusher, "app", &app.digest, &old, &[])
        .await
        .unwrap();
    let mut new = attached(&app, "new", None);
    let alt = json!({"oci.opencontainers.image.created": "2025-09-01T00:00:00Z"});
    new.entry["annotations"] = alt;
    attach(
        &pusher,
        "app",
        &app.digest,
        &new,
        std::slice::from_ref(&old.entry),
    )
    .await
    .unwrap();
    let theirs = attached(&other, "theirs", None);
    attach(&pusher, "other", &other.digest, &theirs, &[])
        .await
        .unwrap();

    let resolver = resolver(&registry.host());
    // The webhook resolves the image first (its platforms, and the digest asked about).
    let image = registry.reference("app", "1");
    let resolved = resolver.resolve(&image, &[]).await.unwrap();
    assert_eq!(resolved.digest, app.digest);
    let artifacts = Artifacts::new(resolver.clone());

    registry.reset_requests();
    let found = artifacts
        .discovered(
            &routed(&image).await,
            &app.digest,
            false,
            NFD_ARTIFACT_TYPE,
            NFD_MEDIA_TYPE,
            &[],
            None,
        )
        .await
        .unwrap()
        .first()
        .cloned()
        .expect("an artifact");
    assert_eq!(found.digest, new.digest);
    assert_eq!(&found.spec[..], &nfd_spec("new")[..]);
    assert_eq!(Spec::parse_nfd(&found.spec).unwrap().sets[0].tag, "new");
    let cold = summary(&registry);
    assert_eq!(
        cold,
        vec![
            format!("GET /v2/app/referrers/{} 404", app.digest),
            format!("GET /v2/app/manifests/{} 200", fallback_tag(&app.digest)),
            format!("GET /v2/app/manifests/{} 200", new.digest),
            format!(
                "GET /v2/app/blobs/{} 200",
                noe_test_support::sha256_digest(&nfd_spec("new"))
            ),
        ],
    );

    // The registry is known to lack the referrers API now: 3 requests.
    registry.reset_requests();
    let other_image = registry.reference("other", "1");
    let found = artifacts
        .discovered(
            &routed(&other_image).await,
            &other.digest,
            false,
            NFD_ARTIFACT_TYPE,
            NFD_MEDIA_TYPE,
            &[],
            None,
        )
        .await
        .unwrap()
        .first()
        .cloned()
        .expect("an artifact");
    assert_eq!(found.digest, theirs.digest);
    assert_eq!(registry.request_count(), 3, "{:?}", summary(&registry));

    // Warm: none.
    registry.reset_requests();
    for _ in 0..3 {
        artifacts
            .discovered(
                &routed(&image).await,
                &app.digest,
                false,
                NFD_ARTIFACT_TYPE,
                NFD_MEDIA_TYPE,
                &[],
                None,
            )
            .await
            .unwrap()
            .first()
            .cloned()
            .expect("cached");
    }
    assert_eq!(registry.request_count(), 0, "{:?}", summary(&registry));
}

#[tokio::test]
async fn an_image_without_artifacts_has_none_and_that_is_cached() {
    let registry = Registry::start().await.unwrap();
    let pusher = registry.pusher().unwrap();
    let app = push_image(&pusher, "bare", Some("1"), "linux/arm64", Flavor::Oci)
        .await
        .unwrap();
    let resolver = resolver(&registry.host());
    let image = registry.reference("bare", "1");
    resolver.resolve(&image, &[]).await.unwrap();
    let artifacts = Artifacts::new(resolver);
    registry.reset_requests();
    let found = artifacts
        .discovered(
            &routed(&image).await,
            &app.digest,
            false,
            NFD_ARTIFACT_TYPE,
            NFD_MEDIA_TYPE,
            &[],
            None,
        )
        .await
        .unwrap();
    assert!(found.is_empty());
    assert_eq!(registry.request_count(), 2, "{:?}", summary(&registry));
    registry.reset_requests();
    let again = artifacts
        .discovered(
            &routed(&image).await,
            &app.digest,
            false,
            NFD_ARTIFACT_TYPE,
            NFD_MEDIA_TYPE,
            &[],
            None,
        )
        .await
        .unwrap();
    assert!(again.is_empty());
    assert_eq!(registry.request_count(), 0);
}

fn walkthrough_spec() -> Vec<u8> {
    let set = |tag: &str, flavor: &str| {
        json!({"tag": tag, "rules": [{"matchFeatures": [{"matchExpressions": [
            {"op": "In", "key": "feature.node.ocifit-k8s.flavor", "value": [flavor]}]}]}]})
    };
    json!({"version": "v1alpha1", "compatibilities": [
        set("debian:11", "vanilla"), set("ubuntu:24.04", "chocolate"), set("rockylinux:9", "strawberry")]})
    .to_string()
    .into_bytes()
}

#[tokio::test]
async fn explicit_artifacts_as_oras_pushes_them_by_tag_and_digest() {
    let registry = Registry::start().await.unwrap();
    let pusher = registry.pusher().unwrap();
    let artifact = compat_artifact(
        ORAS_DEFAULT_ARTIFACT_TYPE,
        OCIFIT_SPEC_TYPE,
        &walkthrough_spec(),
        None,
        None,
    );
    push_artifact(
        &pusher,
        "ocifit-k8s-compatibility",
        &artifact,
        Some("kind-example"),
    )
    .await
    .unwrap();
    let artifacts = Artifacts::new(resolver(&registry.host()));
    let by_tag = registry.reference("ocifit-k8s-compatibility", "kind-example");
    let by_digest = format!(
        "{}/ocifit-k8s-compatibility@{}",
        registry.host(),
        artifact.digest
    );
    for reference in [by_tag, by_digest] {
        let fetched = artifacts
            .explicit(&routed(&reference).await, OCIFIT_MEDIA_TYPE, &[], None)
            .await
            .unwrap();
        assert_eq!(fetched.digest, artifact.digest);
        let spec = Spec::parse_ocifit(&fetched.spec).unwrap();
        let nodes = [NodeFacts {
            name: "w1".into(),
            labels: std::sync::Arc::new(
                [(
                    "feature.node.ocifit-k8s.flavor".to_owned(),
                    "chocolate".to_owned(),
                )]
                .into(),
            ),
            features: None,
            schedulable: true,
        }];
        let pod = json!({"spec": {"containers": [{"image": "placeholder:latest"}]}});
        let choice = choose(&pod, &spec, &candidates(&pod, &nodes)).unwrap();
        assert_eq!(choice.tag, "ubuntu:24.04");
    }
    // Without the layer: a clear error.
    let wrong = compat_artifact(ORAS_DEFAULT_ARTIFACT_TYPE, "text/plain", b"{}", None, None);
    push_artifact(&pusher, "wrong", &wrong, Some("1"))
        .await
        .unwrap();
    let error = artifacts
        .explicit(
            &routed(&registry.reference("wrong", "1")).await,
            OCIFIT_MEDIA_TYPE,
            &[],
            None,
        )
        .await
        .unwrap_err();
    assert!(error.to_string().contains(OCIFIT_MEDIA_TYPE), "{error}");
    let missing = artifacts
        .explicit(
            &routed(&registry.reference("nothing", "1")).await,
            OCIFIT_MEDIA_TYPE,
            &[],
            None,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(missing, noe_registry::Error::NotFound { .. }),
        "{missing}"
    );
}

fn subject() -> (String, Vec<u8>) {
    let image = noe_test_support::build_image("subject", "linux/amd64", Flavor::Oci).unwrap();
    (image.descriptor.digest.clone(), image.manifest)
}

#[tokio::test]
async fn referrers_api_pages_and_filters_on_the_fake() {
    let fake = FakeRegistry::start().await.unwrap();
    let (digest, manifest) = subject();
    fake.script_manifest("app", "1", OCI_MANIFEST, &manifest);
    let s = Some((OCI_MANIFEST, digest.as_str(), manifest.len()));
    let older = compat_artifact(
        NFD_ARTIFACT_TYPE,
        NFD_MEDIA_TYPE,
        &nfd_spec("older"),
        s,
        Some("2025-01-01T00:00:00Z"),
    );
    let newer = compat_artifact(
        NFD_ARTIFACT_TYPE,
        NFD_MEDIA_TYPE,
        &nfd_spec("newer"),
        s,
        Some("2025-03-01T00:00:00Z"),
    );
    let sbom = compat_artifact(
        "application/spdx+json",
        "application/spdx+json",
        b"{}",
        s,
        Some("2026-01-01T00:00:00Z"),
    );
    for filtered in [false, true] {
        // Unfiltered, the registry lists the SBOM too (the newest): filtered here.
        let first: Vec<&CompatArtifact> = if filtered {
            vec![&older]
        } else {
            vec![&older, &sbom]
        };
        fake.script_referrers("app", &digest, &[first, vec![&newer]], filtered)
            .unwrap();
        let artifacts = Artifacts::new(resolver(&fake.host()));
        let found = artifacts
            .discovered(
                &routed(&format!("{}/app:1", fake.host())).await,
                &digest,
                false,
                NFD_ARTIFACT_TYPE,
                NFD_MEDIA_TYPE,
                &[],
                None,
            )
            .await
            .unwrap()
            .first()
            .cloned()
            .expect("an artifact");
        assert_eq!(found.digest, newer.digest, "filtered: {filtered}");
    }
    let pages = fake.requests_to(&format!("/v2/app/referrers/{digest}"));
    assert_eq!(pages.len(), 4);
    assert_eq!(
        pages[0].query.as_deref(),
        Some(&*format!(
            "artifactType={}",
            NFD_ARTIFACT_TYPE.replace('/', "%2F").replace('+', "%2B")
        ))
    );
    assert!(pages[1]
        .query
        .as_deref()
        .unwrap_or_default()
        .contains("last=0"));
    // The API answered: the fallback tag was never asked.
    assert!(fake
        .requests_to(&manifest_path("app", &fallback_tag(&digest)))
        .is_empty());
}

#[tokio::test]
async fn a_fallback_tag_resolving_to_the_subject_is_no_index_of_referrers() {
    // GitLab resolves `sha256-<hex>` as the digest itself: the subject comes back.
    let fake = FakeRegistry::start().await.unwrap();
    let (digest, manifest) = subject();
    fake.script_manifest("app", "1", OCI_MANIFEST, &manifest);
    fake.route(
        &manifest_path("app", &fallback_tag(&digest)),
        Behavior::manifest(OCI_MANIFEST, manifest.clone()),
    );
    let artifacts = Artifacts::new(resolver(&fake.host()));
    let found = artifacts
        .discovered(
            &routed(&format!("{}/app:1", fake.host())).await,
            &digest,
            false,
            NFD_ARTIFACT_TYPE,
            NFD_MEDIA_TYPE,
            &[],
            None,
        )
        .await
        .unwrap();
    assert!(found.is_empty());
    assert_eq!(
        fake.requests_to(&format!("/v2/app/referrers/{digest}"))
            .len(),
        1
    );
    assert_eq!(
        fake.requests_to(&manifest_path("app", &fallback_tag(&digest)))
            .len(),
        1
    );
}

#[tokio::test]
async fn a_referrer_naming_another_subject_is_skipped_and_sizes_are_bounded() {
    let fake = FakeRegistry::start().await.unwrap();
    let (digest, manifest) = subject();
    fake.script_manifest("app", "1", OCI_MANIFEST, &manifest);
    let elsewhere = format!("sha256:{}", "e".repeat(64));
    let liar = compat_artifact(
        NFD_ARTIFACT_TYPE,
        NFD_MEDIA_TYPE,
        &nfd_spec("liar"),
        Some((OCI_MANIFEST, &elsewhere, 10)),
        Some("2026-01-01T00:00:00Z"),
    );
    let honest = compat_artifact(
        NFD_ARTIFACT_TYPE,
        NFD_MEDIA_TYPE,
        &nfd_spec("honest"),
        Some((OCI_MANIFEST, &digest, manifest.len())),
        Some("2025-01-01T00:00:00Z"),
    );
    fake.script_referrers("app", &digest, &[vec![&liar, &honest]], true)
        .unwrap();
    let artifacts = Artifacts::new(resolver(&fake.host()));
    let image = format!("{}/app:1", fake.host());
    let found = artifacts
        .discovered(
            &routed(&image).await,
            &digest,
            false,
            NFD_ARTIFACT_TYPE,
            NFD_MEDIA_TYPE,
            &[],
            None,
        )
        .await
        .unwrap()
        .first()
        .cloned()
        .expect("the honest one");
    assert_eq!(found.digest, honest.digest);

    // A spec layer stated larger than 256 KiB is refused before it is fetched.
    let (digest2, manifest2) = {
        let image = noe_test_support::build_image("subject2", "linux/arm64", Flavor::Oci).unwrap();
        (image.descriptor.digest.clone(), image.manifest)
    };
    fake.script_manifest("big", "1", OCI_MANIFEST, &manifest2);
    let mut big = compat_artifact(
        NFD_ARTIFACT_TYPE,
        NFD_MEDIA_TYPE,
        b"x",
        Some((OCI_MANIFEST, &digest2, manifest2.len())),
        None,
    );
    let mut m: serde_json::Value = serde_json::from_slice(&big.manifest).unwrap();
    m["layers"][0]["size"] = json!(300 * 1024);
    big.manifest = m.to_string().into_bytes();
    big.digest = noe_test_support::sha256_digest(&big.manifest);
    big.entry["digest"] = json!(big.digest);
    big.entry["size"] = json!(big.manifest.len());
    fake.script_referrers("big", &digest2, &[vec![&big]], true)
        .unwrap();
    let error = artifacts
        .discovered(
            &routed(&format!("{}/big:1", fake.host())).await,
            &digest2,
            false,
            NFD_ARTIFACT_TYPE,
            NFD_MEDIA_TYPE,
            &[],
            None,
        )
        .await
        .unwrap_err();
    assert!(error.to_string().contains("bytes"), "{error}");
    assert!(fake
        .requests()
        .iter()
        .all(|r| !r.path.ends_with(&noe_test_support::sha256_digest(b"x"))));
}

/// An artifact attached to one platform's manifest rather than to the index: when the index has
/// none, its runnable platform manifests are asked too (the index read once more, then one
/// fallback tag per platform once the registry is known to lack the referrers API); the spec
/// comes back marked with its platform. An artifact on the index itself costs nothing more.
/// The NFD artifacts `artifacts` finds for `image`'s `subject` (`index`: the subject is an index).
async fn discover(
    artifacts: &Artifacts,
    image: &str,
    subject: &str,
    index: bool,
) -> std::sync::Arc<[noe_registry::artifacts::Fetched]> {
    artifacts
        .discovered(
            &routed(image).await,
            subject,
            index,
            NFD_ARTIFACT_TYPE,
            NFD_MEDIA_TYPE,
            &[],
            None,
        )
        .await
        .unwrap()
}

/// An amd64 and an arm64 manifest in `repository`, and their index tagged `1`.
async fn two_platforms(
    pusher: &noe_test_support::Pusher,
    repository: &str,
) -> [noe_test_support::Descriptor; 3] {
    use noe_test_support::{push_index, IndexEntry};
    let amd = push_image(pusher, repository, None, "linux/amd64", Flavor::Oci)
        .await
        .unwrap();
    let arm = push_image(pusher, repository, None, "linux/arm64", Flavor::Oci)
        .await
        .unwrap();
    let index = push_index(
        pusher,
        repository,
        Some("1"),
        Flavor::Oci,
        &[
            IndexEntry::new(&amd, Some("linux/amd64")),
            IndexEntry::new(&arm, Some("linux/arm64")),
        ],
    )
    .await
    .unwrap();
    [amd, arm, index]
}

#[tokio::test]
async fn an_artifact_on_a_platform_manifest_is_found_through_the_index() {
    let registry = Registry::start().await.unwrap();
    let pusher = registry.pusher().unwrap();
    let [amd, arm, index] = two_platforms(&pusher, "multi").await;
    let on_arm = attached(&arm, "arm", None);
    attach(&pusher, "multi", &arm.digest, &on_arm, &[])
        .await
        .unwrap();

    let resolver = resolver(&registry.host());
    let image = registry.reference("multi", "1");
    let resolved = resolver.resolve(&image, &[]).await.unwrap();
    assert_eq!(resolved.digest, index.digest);
    let artifacts = Artifacts::new(resolver.clone());
    registry.reset_requests();
    let found = discover(&artifacts, &image, &index.digest, true).await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].digest, on_arm.digest);
    assert_eq!(
        found[0].platform,
        Some(("linux".to_owned(), "arm64".to_owned()))
    );
    assert_eq!(
        summary(&registry),
        vec![
            format!("GET /v2/multi/referrers/{} 404", index.digest),
            format!(
                "GET /v2/multi/manifests/{} 404",
                fallback_tag(&index.digest)
            ),
            format!("GET /v2/multi/manifests/{} 200", index.digest),
            format!("GET /v2/multi/manifests/{} 404", fallback_tag(&amd.digest)),
            format!("GET /v2/multi/manifests/{} 200", fallback_tag(&arm.digest)),
            format!("GET /v2/multi/manifests/{} 200", on_arm.digest),
            format!(
                "GET /v2/multi/blobs/{} 200",
                noe_test_support::sha256_digest(&nfd_spec("arm"))
            ),
        ],
    );
    // The spec holds only on arm64 nodes.
    let spec = Spec::parse_nfd(&found[0].spec)
        .unwrap()
        .on_platform("linux", "arm64")
        .unwrap();
    let node = |arch: &str| NodeFacts {
        name: arch.to_owned(),
        labels: [
            ("kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", arch),
            ("feature.node.kubernetes.io/kernel-version.major", "6"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect::<std::collections::BTreeMap<_, _>>()
        .into(),
        features: None,
        schedulable: true,
    };
    let nodes = [node("amd64"), node("arm64")];
    let pod = json!({"spec": {"containers": [{"name": "c", "image": "x"}]}});
    let choice = choose(&pod, &spec, &candidates(&pod, &nodes)).unwrap();
    assert_eq!(choice.fitting, ["arm64"]);

    // Warm: none. An index carrying the artifact itself is not looked through.
    registry.reset_requests();
    discover(&artifacts, &image, &index.digest, true).await;
    assert_eq!(registry.request_count(), 0, "{:?}", summary(&registry));
    let on_index = attached(&index, "index", None);
    attach(&pusher, "multi", &index.digest, &on_index, &[])
        .await
        .unwrap();
    let fresh = Artifacts::new(resolver);
    registry.reset_requests();
    let found = discover(&fresh, &image, &index.digest, true).await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].platform, None);
    assert_eq!(registry.request_count(), 4, "{:?}", summary(&registry));
}

/// An image pinned to one platform's manifest beside its tag (`name:tag@sha256:...`) whose
/// artifact is attached to the index: the tag's index is read, holds the manifest, and its
/// artifact is the image's. Pinned by digest alone, no index can be known: none.
#[tokio::test]
async fn a_platform_digest_beside_its_tag_finds_the_artifact_of_its_index() {
    let registry = Registry::start().await.unwrap();
    let pusher = registry.pusher().unwrap();
    let [amd, arm, index] = two_platforms(&pusher, "pinned").await;
    let on_index = attached(&index, "index", None);
    attach(&pusher, "pinned", &index.digest, &on_index, &[])
        .await
        .unwrap();
    let resolver = resolver(&registry.host());
    let artifacts = Artifacts::new(resolver.clone());
    let pinned = format!("{}/pinned:1@{}", registry.host(), arm.digest);
    let resolved = resolver.resolve(&pinned, &[]).await.unwrap();
    assert_eq!(resolved.digest, arm.digest, "the digest wins over the tag");
    registry.reset_requests();
    let found = discover(&artifacts, &pinned, &arm.digest, false).await;
    assert_eq!(found.len(), 1, "{:?}", summary(&registry));
    assert_eq!(found[0].digest, on_index.digest);
    assert_eq!(found[0].platform, None);
    assert_eq!(
        summary(&registry),
        vec![
            format!("GET /v2/pinned/referrers/{} 404", arm.digest),
            format!("GET /v2/pinned/manifests/{} 404", fallback_tag(&arm.digest)),
            "GET /v2/pinned/manifests/1 200".to_owned(),
            format!(
                "GET /v2/pinned/manifests/{} 200",
                fallback_tag(&index.digest)
            ),
            format!("GET /v2/pinned/manifests/{} 200", on_index.digest),
            format!(
                "GET /v2/pinned/blobs/{} 200",
                noe_test_support::sha256_digest(&nfd_spec("index"))
            ),
        ],
    );
    // By digest alone: the registry cannot say which index holds the manifest.
    let alone = format!("{}/pinned@{}", registry.host(), amd.digest);
    let found = discover(&artifacts, &alone, &amd.digest, false).await;
    assert!(found.is_empty());
    // A tag naming an index that does not hold the manifest: none.
    let other = push_image(&pusher, "pinned", Some("2"), "linux/s390x", Flavor::Oci)
        .await
        .unwrap();
    let elsewhere = format!("{}/pinned:1@{}", registry.host(), other.digest);
    let found = discover(&artifacts, &elsewhere, &other.digest, false).await;
    assert!(found.is_empty());
}

/// The absence of an artifact is kept for the negative TTL only (zero here: not at all), so an
/// artifact attached later is seen at once; an artifact found is still kept.
#[tokio::test]
async fn absences_are_kept_for_the_negative_ttl_only() {
    let registry = Registry::start().await.unwrap();
    let pusher = registry.pusher().unwrap();
    let app = push_image(&pusher, "late", Some("1"), "linux/arm64", Flavor::Oci)
        .await
        .unwrap();
    let resolver = resolver(&registry.host());
    let image = registry.reference("late", "1");
    resolver.resolve(&image, &[]).await.unwrap();
    let artifacts = Artifacts::with_negative_ttl(resolver, std::time::Duration::ZERO);
    let late_image = routed(&image).await;
    let ask = || {
        artifacts.discovered(
            &late_image,
            &app.digest,
            false,
            NFD_ARTIFACT_TYPE,
            NFD_MEDIA_TYPE,
            &[],
            None,
        )
    };
    assert!(ask().await.unwrap().is_empty());
    let late = attached(&app, "late", None);
    attach(&pusher, "late", &app.digest, &late, &[])
        .await
        .unwrap();
    let found = ask().await.unwrap();
    assert_eq!(found.first().unwrap().digest, late.digest);
    registry.reset_requests();
    assert_eq!(ask().await.unwrap().len(), 1);
    assert_eq!(registry.request_count(), 0, "{:?}", summary(&registry));
}
