//! The bounds of verification: bombs, budgets, lying sizes, layer counts, wall time,
//! concurrency, and credentials that must not follow a redirect to blob storage.

use std::time::Duration;

use noe_credentials::{Credential, CredentialCandidate};
use noe_registry::verify::{Options, VerifyConfig};
use noe_registry::{Config, Resolver};
use noe_test_support::{
    build_index, media_types, tar_archive, Behavior, Compression, FakeRegistry, Flavor, IndexEntry,
    LayerBlob, LayerEntry as E, Listener,
};
use serde_json::json;

use super::support::{elf, image_of, summary, Setup};

/// A tar whose first file holds `zeros` zero bytes, then `/app`: compressed, a bomb.
fn bomb_tar_into(out: &mut dyn std::io::Write, zeros: u64) {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_mode(0o644);
    header.set_size(zeros);
    header.set_path("big").unwrap();
    header.set_cksum();
    out.write_all(header.as_bytes()).unwrap();
    let block = vec![0u8; 1 << 20];
    let mut left = zeros;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        out.write_all(&block[..n]).unwrap();
        left -= n as u64;
    }
    let app = tar_archive(&[E::program("app", elf("amd64"))]).unwrap();
    out.write_all(&app).unwrap();
}

#[tokio::test]
async fn a_decompression_bomb_stops_at_the_ratio_never_at_memory() {
    let setup = Setup::start().await;
    // gzip: 48 MiB of zeros in about 50 KiB.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    bomb_tar_into(&mut gz, 48 << 20);
    let gz = LayerBlob::raw(gz.finish().unwrap(), media_types::OCI_LAYER);
    // zstd: 256 MiB of zeros in a few KiB.
    let mut zs = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    bomb_tar_into(&mut zs, 256 << 20);
    let zs = LayerBlob::raw(
        zs.finish().unwrap(),
        "application/vnd.oci.image.layer.v1.tar+zstd",
    );
    for (tag, layer) in [("gzip", gz), ("zstd", zs)] {
        let size = layer.bytes.len() as u64;
        let built = image_of("linux/amd64", &["/app"], json!({}), vec![layer]);
        let reference = setup.push("bounds/bomb", tag, &built).await;
        let verified = setup.verify_one(&reference).await;
        assert_eq!(
            summary(&verified),
            "unverifiable: budget",
            "{tag}: {verified:?}"
        );
        assert!(
            verified.report.evidence.contains("decompresses"),
            "{}",
            verified.report.evidence
        );
        assert!(
            verified.bytes <= size,
            "{tag}: {} of {size}",
            verified.bytes
        );
    }
}

/// Bytes that do not compress (xorshift).
pub fn noise(len: usize) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

#[tokio::test]
async fn a_layer_larger_than_the_budget_stops_at_the_budget() {
    let budget = 256 * 1024;
    let setup = Setup::with(VerifyConfig {
        max_bytes: budget,
        ..VerifyConfig::default()
    })
    .await;
    // 2 MiB that do not compress, then the program.
    let noise = noise(2 << 20);
    let layer = LayerBlob::new(
        &[E::data("noise", &noise), E::program("app", elf("amd64"))],
        Compression::Gzip,
    )
    .unwrap();
    let built = image_of("linux/amd64", &["/app"], json!({}), vec![layer]);
    let reference = setup.push("bounds/budget", "1", &built).await;
    let verified = setup.verify_one(&reference).await;
    assert_eq!(summary(&verified), "unverifiable: budget");
    assert!(
        verified.report.evidence.contains("--verify-max-bytes"),
        "{}",
        verified.report.evidence
    );
    // At most one chunk past the budget.
    assert!(verified.bytes <= budget + 512 * 1024, "{}", verified.bytes);
    assert!(verified.bytes > budget);
}

#[tokio::test]
async fn more_layers_than_the_bound_are_not_read() {
    let setup = Setup::start().await;
    let layer = LayerBlob::new(&[E::program("app", elf("amd64"))], Compression::Gzip).unwrap();
    let built = image_of("linux/amd64", &["/app"], json!({}), vec![layer; 129]);
    let reference = setup.push("bounds/layers", "1", &built).await;
    setup.registry.reset_requests();
    let verified = setup.verify_one(&reference).await;
    assert_eq!(summary(&verified), "unverifiable: budget");
    assert_eq!(verified.bytes, 0);
}

/// A resolver for the fake's hosts, with `verification`.
fn fake_resolver(fake: &FakeRegistry, verification: VerifyConfig) -> Resolver {
    Resolver::new(
        Config {
            insecure_registries: vec![fake.host(), fake.other_host()],
            request_timeout: Duration::from_secs(2),
            verification,
            allow_cidrs: noe_test_support::loopback_cidrs(),
            ..Config::default()
        },
        &prometheus::Registry::new(),
    )
    .unwrap()
}

/// Scripts a single-platform image `repository:1` whose one layer (of `digest` and `size` in
/// the manifest) is served by `layer`; the manifest's body.
fn script_image(
    fake: &FakeRegistry,
    repository: &str,
    digest: &str,
    size: usize,
    layer: Behavior,
) -> String {
    let config =
        json!({"architecture": "amd64", "os": "linux", "config": {"Entrypoint": ["/app"]}})
            .to_string();
    let config_digest = fake.script_blob(repository, config.as_bytes());
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": media_types::OCI_MANIFEST,
        "config": {"mediaType": media_types::OCI_CONFIG, "digest": config_digest, "size": config.len()},
        "layers": [{"mediaType": media_types::OCI_LAYER, "digest": digest, "size": size}],
    })
    .to_string();
    fake.script_manifest(
        repository,
        "1",
        media_types::OCI_MANIFEST,
        manifest.as_bytes(),
    );
    fake.route(&format!("/v2/{repository}/blobs/{digest}"), layer);
    manifest
}

async fn verify_fake(
    resolver: &Resolver,
    image: &str,
    credentials: &[CredentialCandidate],
) -> noe_registry::verify::PlatformReport {
    let routed = resolver.routed(image).await.unwrap();
    let mut report = resolver
        .verify(&routed, credentials, &Options::default())
        .await
        .unwrap();
    report.platforms.remove(0)
}

#[tokio::test]
async fn a_body_longer_than_its_stated_size_or_digest_is_refused() {
    let fake = FakeRegistry::start().await.unwrap();
    let resolver = fake_resolver(&fake, VerifyConfig::default());
    let serve = |bytes: &[u8]| Behavior::body(200, "application/octet-stream", bytes.to_vec());
    let with_app = LayerBlob::new(
        &[
            E::data("etc/big", &[7u8; 64 * 1024]),
            E::program("app", elf("amd64")),
        ],
        Compression::None,
    )
    .unwrap();
    // The descriptor says 1 KiB; the registry sends 66 KiB.
    script_image(
        &fake,
        "lying/size",
        &with_app.digest,
        1024,
        serve(&with_app.bytes),
    );
    let verified = verify_fake(&resolver, &format!("{}/lying/size:1", fake.host()), &[]).await;
    assert_eq!(summary(&verified), "unverifiable: registry-error");
    assert!(
        verified.report.evidence.contains("longer than"),
        "{}",
        verified.report.evidence
    );

    // Bytes that are not the digest's: a layer read whole is refused ...
    let without_app =
        LayerBlob::new(&[E::data("etc/big", &[7u8; 4096])], Compression::None).unwrap();
    let mut tampered = without_app.bytes.clone();
    tampered[1000] ^= 1;
    let size = tampered.len();
    script_image(
        &fake,
        "lying/digest",
        &without_app.digest,
        size,
        serve(&tampered),
    );
    let verified = verify_fake(&resolver, &format!("{}/lying/digest:1", fake.host()), &[]).await;
    assert_eq!(summary(&verified), "unverifiable: registry-error");
    assert!(
        verified.report.evidence.contains("has digest"),
        "{}",
        verified.report.evidence
    );

    // ... one whose program was found before its end is trusted for the bytes read.
    let mut tampered = with_app.bytes.clone();
    tampered[1000] ^= 1;
    let size = tampered.len();
    script_image(
        &fake,
        "lying/partly",
        &with_app.digest,
        size,
        serve(&tampered),
    );
    let verified = verify_fake(&resolver, &format!("{}/lying/partly:1", fake.host()), &[]).await;
    assert_eq!(summary(&verified), "verified");
}

#[tokio::test]
async fn a_layer_that_hangs_stops_at_the_wall_time() {
    let fake = FakeRegistry::start().await.unwrap();
    let resolver = fake_resolver(
        &fake,
        VerifyConfig {
            timeout: Duration::from_secs(1),
            ..VerifyConfig::default()
        },
    );
    let head = tar_archive(&[E::data("etc/motd", b"hi")]).unwrap();
    let digest = format!("sha256:{}", "1".repeat(64));
    let trickle = Behavior::trickle("application/octet-stream", head, Duration::from_millis(200));
    script_image(&fake, "slow/app", &digest, 10_000, trickle);
    let started = std::time::Instant::now();
    let verified = verify_fake(&resolver, &format!("{}/slow/app:1", fake.host()), &[]).await;
    assert_eq!(summary(&verified), "unverifiable: budget");
    assert!(verified.report.evidence.contains("more than 1 s"));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_redirect_to_blob_storage_carries_no_registry_credentials() {
    let fake = FakeRegistry::start().await.unwrap();
    let layer = LayerBlob::new(&[E::program("app", elf("amd64"))], Compression::Gzip).unwrap();
    let size = layer.bytes.len();
    let redirect = Behavior::redirect_to_other("/storage/layer");
    let manifest = script_image(&fake, "private/app", &layer.digest, size, redirect);
    fake.route(
        "/storage/layer",
        Behavior::body(200, "application/octet-stream", layer.bytes.clone()),
    );
    // The registry asks for credentials first.
    fake.route(
        "/v2/private/app/manifests/1",
        Behavior::Sequence(vec![
            Behavior::basic_challenge("fake"),
            Behavior::manifest(media_types::OCI_MANIFEST, manifest),
        ]),
    );
    let resolver = fake_resolver(&fake, VerifyConfig::default());
    let candidate = CredentialCandidate::new(
        "basic",
        Credential::Basic {
            username: "u".into(),
            password: "p".into(),
        },
    );
    let image = format!("{}/private/app:1", fake.host());
    let verified = verify_fake(&resolver, &image, &[candidate]).await;
    assert_eq!(summary(&verified), "verified", "{verified:?}");
    let requests = fake.requests();
    let layer_path = format!("/v2/private/app/blobs/{}", layer.digest);
    let asked = requests
        .iter()
        .find(|r| r.path == layer_path)
        .expect("layer asked");
    assert!(
        asked.has_authorization(),
        "the registry gets the credentials"
    );
    let storage: Vec<_> = requests
        .iter()
        .filter(|r| r.path == "/storage/layer")
        .collect();
    assert_eq!(storage.len(), 1);
    assert_eq!(storage[0].listener, Listener::Other);
    assert!(!storage[0].has_authorization(), "blob storage does not");
}

/// Scripts `config` and an OCI manifest of it and `layer` as `repository:tag`: the manifest's
/// digest, body and the config's digest.
fn script_one_layer(
    fake: &FakeRegistry,
    repository: &str,
    tag: &str,
    config: &str,
    layer: &LayerBlob,
) -> (String, String, String) {
    let config_digest = fake.script_blob(repository, config.as_bytes());
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": media_types::OCI_MANIFEST,
        "config": {"mediaType": media_types::OCI_CONFIG, "digest": config_digest, "size": config.len()},
        "layers": [{"mediaType": media_types::OCI_LAYER, "digest": layer.digest, "size": layer.bytes.len()}],
    })
    .to_string();
    let digest = fake.script_manifest(
        repository,
        tag,
        media_types::OCI_MANIFEST,
        manifest.as_bytes(),
    );
    (digest, manifest, config_digest)
}

#[tokio::test]
async fn verifications_at_once_are_bounded_per_process() {
    let fake = FakeRegistry::start().await.unwrap();
    // An index of four platforms whose layers each take 300 ms.
    let mut entries = Vec::new();
    for arch in ["amd64", "arm64", "s390x", "ppc64le"] {
        let repository = "many/app";
        let layer = LayerBlob::new(&[E::program("app", elf(arch))], Compression::Gzip).unwrap();
        fake.route(
            &format!("/v2/{repository}/blobs/{}", layer.digest),
            Behavior::body(200, "application/octet-stream", layer.bytes.clone())
                .delayed(Duration::from_millis(300)),
        );
        let config =
            json!({"architecture": arch, "os": "linux", "config": {"Entrypoint": ["/app"]}})
                .to_string();
        let (digest, manifest, config_digest) =
            script_one_layer(&fake, repository, arch, &config, &layer);
        entries.push(IndexEntry::new(
            &noe_test_support::Descriptor {
                media_type: media_types::OCI_MANIFEST.into(),
                digest,
                size: manifest.len(),
                config_digest: Some(config_digest),
            },
            Some(&format!("linux/{arch}")),
        ));
    }
    let (index, descriptor) = build_index(Flavor::Oci, &entries).unwrap();
    fake.script_manifest("many/app", "1", &descriptor.media_type, &index);
    for concurrency in [1, 4] {
        let resolver = fake_resolver(
            &fake,
            VerifyConfig {
                concurrency,
                ..VerifyConfig::default()
            },
        );
        fake.reset_requests();
        let routed = resolver
            .routed(&format!("{}/many/app:1", fake.host()))
            .await
            .unwrap();
        let report = resolver
            .verify(&routed, &[], &Options::default())
            .await
            .unwrap();
        assert!(
            report.platforms.iter().all(|p| summary(p) == "verified"),
            "{report:?}"
        );
        let at_once = fake.max_in_flight();
        if concurrency == 1 {
            assert_eq!(at_once, 1, "one platform at a time");
        } else {
            assert!(at_once > 1, "{at_once}");
        }
    }
}

/// Threads of the verification pools in this process now.
fn pool_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "noe-verify")
        .count()
}

#[tokio::test]
async fn verifications_at_once_share_a_few_threads() {
    const IMAGES: usize = 16;
    let fake = FakeRegistry::start().await.unwrap();
    let repository = "wide/app";
    // Sixteen images (each its own config) of one layer that takes 300 ms to answer.
    let layer = LayerBlob::new(&[E::program("app", elf("amd64"))], Compression::Gzip).unwrap();
    fake.route(
        &format!("/v2/{repository}/blobs/{}", layer.digest),
        Behavior::body(200, "application/octet-stream", layer.bytes.clone())
            .delayed(Duration::from_millis(300)),
    );
    for i in 0..IMAGES {
        let config = json!({"architecture": "amd64", "os": "linux",
            "config": {"Entrypoint": ["/app"], "Env": [format!("N={i}")]}})
        .to_string();
        script_one_layer(&fake, repository, &i.to_string(), &config, &layer);
    }
    let resolver = fake_resolver(
        &fake,
        VerifyConfig {
            concurrency: IMAGES,
            ..VerifyConfig::default()
        },
    );
    let verifications = (0..IMAGES).map(|i| {
        let (resolver, fake) = (&resolver, &fake);
        async move {
            let image = format!("{}/{repository}:{i}", fake.host());
            let routed = resolver.routed(&image).await.unwrap();
            resolver
                .verify(&routed, &[], &Options::default())
                .await
                .unwrap()
        }
    });
    let all = futures::future::join_all(verifications);
    tokio::pin!(all);
    let mut most_threads = 0;
    let reports = loop {
        tokio::select! {
            reports = &mut all => break reports,
            () = tokio::time::sleep(Duration::from_millis(5)) => {
                most_threads = most_threads.max(pool_threads());
            }
        }
    };
    for report in &reports {
        assert!(
            report.platforms.iter().all(|p| summary(p) == "verified"),
            "{report:?}"
        );
    }
    // Both pools (the idle one for tests verifying in the background beside this one).
    let bound = 2 * noe_registry::verify::MAX_POOL_THREADS;
    let at_once = fake.max_in_flight();
    assert!(at_once > bound, "{at_once} verifications at once");
    assert!(
        (1..=bound).contains(&most_threads),
        "{most_threads} verification threads"
    );
}
