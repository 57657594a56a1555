//! Helpers: a registry, a resolver for it, images pushed and verified.

use std::time::Duration;

use noe_registry::verify::{ImageReport, Options, PlatformReport, VerifyConfig};
use noe_registry::{Config, Resolver};
use noe_test_support::{
    build_index, elf_program, Compression, Flavor, IndexEntry, LayerBlob, LayerEntry, Pusher,
    Registry, RunnableImage, TestCa,
};
use serde_json::Value;

/// A registry, its pusher and a resolver reaching it over plain HTTP.
pub struct Setup {
    pub registry: Registry,
    pub pusher: Pusher,
    pub resolver: Resolver,
    /// Where the resolver's metrics are registered.
    pub metrics: prometheus::Registry,
}

impl Setup {
    pub async fn start() -> Self {
        Self::with(VerifyConfig::default()).await
    }

    pub async fn with(verification: VerifyConfig) -> Self {
        Self::of(Registry::start().await.unwrap(), verification)
    }

    /// A registry serving HTTPS with a certificate of a test CA the resolver trusts.
    pub async fn tls() -> Self {
        let ca = TestCa::new().unwrap();
        let registry = Registry::builder().tls(&ca).start().await.unwrap();
        Self::of(registry, VerifyConfig::default())
    }

    fn of(registry: Registry, verification: VerifyConfig) -> Self {
        let pusher = registry.pusher().unwrap();
        let metrics = prometheus::Registry::new();
        let insecure = if registry.is_tls() {
            Vec::new()
        } else {
            vec![registry.host()]
        };
        let resolver = Resolver::new(
            Config {
                insecure_registries: insecure,
                extra_ca_pem: registry.ca_pem().map(String::into_bytes),
                request_timeout: Duration::from_secs(5),
                verification,
                allow_cidrs: noe_test_support::loopback_cidrs(),
                ..Config::default()
            },
            &metrics,
        )
        .unwrap();
        Self {
            registry,
            pusher,
            resolver,
            metrics,
        }
    }

    /// Pushes `image` as `repository:tag`; its reference.
    pub async fn push(&self, repository: &str, tag: &str, image: &RunnableImage) -> String {
        image
            .push(&self.pusher, repository, Some(tag))
            .await
            .unwrap();
        self.registry.reference(repository, tag)
    }

    /// Pushes `images` (each with its `os/arch`) and an OCI index of them as
    /// `repository:tag`; its reference.
    pub async fn push_index(
        &self,
        repository: &str,
        tag: &str,
        images: &[(&str, &RunnableImage)],
    ) -> String {
        let mut entries = Vec::new();
        for (platform, image) in images {
            let descriptor = image.push(&self.pusher, repository, None).await.unwrap();
            entries.push(IndexEntry::new(&descriptor, Some(platform)));
        }
        let (body, descriptor) = build_index(Flavor::Oci, &entries).unwrap();
        self.pusher
            .push_manifest(repository, tag, &descriptor.media_type, &body)
            .await
            .unwrap();
        self.registry.reference(repository, tag)
    }

    pub async fn verify(&self, image: &str) -> ImageReport {
        self.verify_with(image, &Options::default()).await
    }

    pub async fn verify_with(&self, image: &str, options: &Options) -> ImageReport {
        let routed = self.resolver.routed(image).await.unwrap();
        self.resolver.verify(&routed, &[], options).await.unwrap()
    }

    /// The one platform of a single-platform image.
    pub async fn verify_one(&self, image: &str) -> PlatformReport {
        let mut report = self.verify(image).await;
        assert_eq!(report.platforms.len(), 1, "{report:?}");
        report.platforms.remove(0)
    }

    /// The value of the metric `name` whose labels include `label` (`("verdict", "mismatch")`),
    /// or of the unlabelled one.
    pub fn metric(&self, name: &str, label: Option<(&str, &str)>) -> f64 {
        self.metrics
            .gather()
            .iter()
            .filter(|family| family.name() == name)
            .flat_map(|family| family.get_metric().to_vec())
            .filter(|m| {
                label.is_none_or(|(k, v)| {
                    m.get_label()
                        .iter()
                        .any(|l| l.name() == k && l.value() == v)
                })
            })
            .map(|m| m.get_counter().get_value() + m.get_histogram().get_sample_count() as f64)
            .sum()
    }

    /// GETs of blobs the registry answered since the last reset.
    pub fn blob_gets(&self) -> Vec<String> {
        self.registry
            .requests()
            .into_iter()
            .filter(|r| r.method == "GET" && r.path.contains("/blobs/"))
            .map(|r| r.path)
            .collect()
    }
}

/// An image of `platform` running `entrypoint` (with `extra` fields of the config's `config`),
/// of gzip layers of `layers` (bottom first).
pub fn image(
    platform: &str,
    entrypoint: &[&str],
    extra: Value,
    layers: &[Vec<LayerEntry>],
) -> RunnableImage {
    let blobs = layers
        .iter()
        .map(|entries| LayerBlob::new(entries, Compression::Gzip).unwrap())
        .collect();
    image_of(platform, entrypoint, extra, blobs)
}

/// An image of `platform` running `entrypoint`, of the layer blobs given (bottom first).
pub fn image_of(
    platform: &str,
    entrypoint: &[&str],
    extra: Value,
    layers: Vec<LayerBlob>,
) -> RunnableImage {
    let mut run = serde_json::json!({"Entrypoint": entrypoint});
    if let (Some(run), Value::Object(extra)) = (run.as_object_mut(), extra) {
        run.extend(extra);
    }
    RunnableImage::new(platform, run, layers, Flavor::Oci).unwrap()
}

pub fn elf(arch: &str) -> Vec<u8> {
    elf_program(arch).unwrap()
}

/// `verified`, `mismatch`, `unverifiable: REASON`.
pub fn summary(report: &PlatformReport) -> String {
    report.report.summary()
}
