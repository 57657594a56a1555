//! The webhook's Prometheus metrics (noe's names, bounded labels), registered on an explicit
//! registry, and the `/metrics` text encoding.

use bytes::Bytes;
use http::{header, Response};
use http_body_util::Full;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry, TextEncoder,
};

/// Outcome label values of `noe_webhook_request_duration_seconds`.
pub mod outcome {
    /// Allowed without a patch.
    pub const ALLOWED: &str = "allowed";
    /// Allowed with a patch.
    pub const PATCHED: &str = "patched";
    /// Denied by the decision.
    pub const DENIED: &str = "denied";
    /// The request could not be read as an AdmissionReview.
    pub const INVALID: &str = "invalid";
}

#[derive(Clone, Debug)]
pub struct Metrics {
    pub image_pull_secret_failed: IntCounterVec,
    pub registry_errors: IntCounterVec,
    pub update_skip: IntCounterVec,
    pub arch_selector_injected: IntCounterVec,
    pub preferred_architecture_not_available: IntCounterVec,
    pub node_match_injections: IntCounterVec,
    pub request_duration: HistogramVec,
}

impl Metrics {
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let counter =
            |name: &str, help: &str, labels: &[&str]| -> Result<IntCounterVec, prometheus::Error> {
                let counter = IntCounterVec::new(Opts::new(name, help), labels)?;
                registry.register(Box::new(counter.clone()))?;
                Ok(counter)
            };
        let request_duration = HistogramVec::new(
            HistogramOpts::new(
                "noe_webhook_request_duration_seconds",
                "Time to answer one admission request, by outcome",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                10.0,
            ]),
            &["outcome"],
        )?;
        registry.register(Box::new(request_duration.clone()))?;
        Ok(Self {
            image_pull_secret_failed: counter(
                "noe_hook_image_pull_secret_failed_total",
                "Image pull secrets of a pod that could not be read",
                &["namespace"],
            )?,
            registry_errors: counter(
                "noe_hook_registry_errors_total",
                "Image lookups that failed, by registry",
                &["registry"],
            )?,
            update_skip: counter(
                "noe_hook_update_skip_total",
                "Pods whose architecture constraint was not added, by reason",
                &["reason"],
            )?,
            arch_selector_injected: counter(
                "noe_hook_arch_selector_injected_total",
                "Architecture constraints written into pods",
                &["namespace", "selector"],
            )?,
            preferred_architecture_not_available: counter(
                "noe_hook_preferred_architecture_not_available_total",
                "Pods whose preferred architecture is not supported by every image",
                &["namespace"],
            )?,
            node_match_injections: counter(
                "noe_hook_node_match_injections_total",
                "Pod labels copied into the nodeSelector (--match-node-labels)",
                &["namespace", "label"],
            )?,
            request_duration,
        })
    }
}

/// The registry's metrics in the Prometheus text format.
pub fn respond(registry: &Registry) -> Response<Full<Bytes>> {
    let encoder = TextEncoder::new();
    let mut body = Vec::new();
    if let Err(error) = encoder.encode(&registry.gather(), &mut body) {
        tracing::warn!(%error, "Cannot encode metrics");
    }
    let mut response = Response::new(Full::new(Bytes::from(body)));
    if let Ok(value) = header::HeaderValue::from_str(encoder.format_type()) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

/// The `registry` label of an image: its registry host when it is configured or one of the big
/// public registries, else `other` (label values stay bounded whatever pods reference).
pub fn registry_label(image: &str, configured: &[String]) -> String {
    let host = registry_host(image);
    let public = [
        "docker.io",
        "ghcr.io",
        "quay.io",
        "gcr.io",
        "registry.k8s.io",
        "public.ecr.aws",
    ];
    let public_suffixes = [".pkg.dev", ".amazonaws.com", ".azurecr.io", ".gcr.io"];
    let known = public.contains(&host.as_str())
        || public_suffixes.iter().any(|suffix| host.ends_with(suffix))
        || configured.iter().any(|c| c.eq_ignore_ascii_case(&host));
    if known {
        host
    } else {
        "other".to_owned()
    }
}

/// The registry host of a reference, per the distribution grammar (`docker.io` by default).
pub fn registry_host(image: &str) -> String {
    match image.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => {
            let host = first.to_ascii_lowercase();
            if host == "index.docker.io" || host == "registry-1.docker.io" {
                "docker.io".to_owned()
            } else {
                host
            }
        }
        _ => "docker.io".to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn registry_labels_are_bounded() {
        let configured = vec!["127.0.0.1:5000".to_owned(), "registry.corp".to_owned()];
        let cases = [
            ("nginx", "docker.io"),
            ("library/nginx:1", "docker.io"),
            ("docker.io/library/nginx", "docker.io"),
            ("index.docker.io/x/y", "docker.io"),
            ("ghcr.io/org/app:1", "ghcr.io"),
            ("europe-docker.pkg.dev/p/r/i", "europe-docker.pkg.dev"),
            (
                "1234.dkr.ecr.eu-west-1.amazonaws.com/app",
                "1234.dkr.ecr.eu-west-1.amazonaws.com",
            ),
            ("127.0.0.1:5000/a:1", "127.0.0.1:5000"),
            ("registry.corp/team/app", "registry.corp"),
            ("random.example.com/app", "other"),
            ("localhost:9999/app", "other"),
        ];
        for (image, want) in cases {
            assert_eq!(registry_label(image, &configured), want, "{image}");
        }
    }

    #[test]
    fn every_name_is_registered_and_encoded() {
        let registry = Registry::new();
        let metrics = Metrics::register(&registry).unwrap();
        metrics
            .image_pull_secret_failed
            .with_label_values(&["ns"])
            .inc();
        metrics.registry_errors.with_label_values(&["other"]).inc();
        metrics.update_skip.with_label_values(&["skip-label"]).inc();
        metrics
            .arch_selector_injected
            .with_label_values(&["ns", "preferred"])
            .inc();
        metrics
            .preferred_architecture_not_available
            .with_label_values(&["ns"])
            .inc();
        metrics
            .node_match_injections
            .with_label_values(&["ns", "team"])
            .inc();
        metrics
            .request_duration
            .with_label_values(&[outcome::PATCHED])
            .observe(0.01);
        let response = respond(&registry);
        let body =
            futures::executor::block_on(http_body_util::BodyExt::collect(response.into_body()))
                .unwrap()
                .to_bytes();
        let text = String::from_utf8(body.to_vec()).unwrap();
        for name in [
            "noe_hook_image_pull_secret_failed_total{namespace=\"ns\"} 1",
            "noe_hook_registry_errors_total{registry=\"other\"} 1",
            "noe_hook_update_skip_total{reason=\"skip-label\"} 1",
            "noe_hook_arch_selector_injected_total{namespace=\"ns\",selector=\"preferred\"} 1",
            "noe_hook_preferred_architecture_not_available_total{namespace=\"ns\"} 1",
            "noe_hook_node_match_injections_total{label=\"team\",namespace=\"ns\"} 1",
            "noe_webhook_request_duration_seconds_count{outcome=\"patched\"} 1",
        ] {
            assert!(text.contains(name), "{name} missing from\n{text}");
        }
    }
}
