//! Registry and cache metrics, registered on a caller-provided `prometheus::Registry`.
//! Names and label values are listed in docs/configuration.md; every label value comes from a
//! bounded set ([`labels`] for `registry`).

pub mod labels;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use prometheus::{
    GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts,
};

pub use labels::ConfiguredHosts;

use crate::{Config, Error};

/// What an HTTP exchange was for (the `kind` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Manifest,
    /// A HEAD of a manifest (revalidation).
    ManifestHead,
    Blob,
    Token,
    /// A referrers API page (compatibility artifacts).
    Referrers,
    /// A layer blob, streamed (verification).
    Layer,
    /// A tag list page (upgrade paths).
    Tags,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Manifest => "manifest",
            Self::ManifestHead => "manifest_head",
            Self::Blob => "blob",
            Self::Token => "token",
            Self::Referrers => "referrers",
            Self::Layer => "layer",
            Self::Tags => "tags",
        }
    }
}

/// All metrics of the registry crate.
#[derive(Clone, Debug)]
pub struct Metrics {
    pub requests: IntCounter,
    pub responses: IntCounterVec,
    pub errors: IntCounterVec,
    pub rate_limit_remaining: GaugeVec,
    pub rate_limit_limit: GaugeVec,
    pub rate_limit_window: GaugeVec,
    pub cache_requests: IntCounter,
    pub cache_responses: IntCounterVec,
    pub auth_cache_requests: IntCounter,
    pub auth_cache_responses: IntCounterVec,
    pub request_duration: HistogramVec,
    pub cache_entries: IntGauge,
    /// Expired tags revalidated with a HEAD, by `result`: `unchanged` (no GET), `changed`,
    /// `no_digest` (the registry's HEAD named no digest: GET).
    pub revalidations: IntCounterVec,
    /// Requests delayed or refused before being sent, by `registry` and `reason` (`delayed`,
    /// `rate_limited`, `circuit_open`).
    pub throttled: IntCounterVec,
    /// Circuit breakers opened, by `registry` and `cause` (`too_many_requests`,
    /// `server_errors`).
    pub circuit_opened: IntCounterVec,
    /// Shared cache reads by `result`: `hit`, `miss`, `unverified` (a value whose MAC does not
    /// verify: also a miss), `error` (failed or timed out: the lookup went on without it),
    /// `bypassed` (not asked after repeated failures).
    pub shared_reads: IntCounterVec,
    /// Shared cache writes by `result`: `ok`, `error`, `bypassed`, `dropped` (too many at once).
    pub shared_writes: IntCounterVec,
    /// Credentials renewed after a registry refused them, by `provider` (`ecr`, `gcp`, `acr`,
    /// `credential-provider`) and `result`: `renewed` (the renewed one was accepted),
    /// `refused` (refused again), `failed` (the renewal itself failed).
    pub credential_renewals: IntCounterVec,
    /// Platforms verified, by `verdict` (`verified`, `mismatch`, `unverifiable`).
    pub verifications: IntCounterVec,
    /// Compressed layer bytes read by verifications.
    pub verification_bytes: IntCounter,
    /// Time of one platform's verification.
    pub verification_duration: prometheus::Histogram,
    /// Images waiting for a background verification.
    pub verification_queue_depth: IntGauge,
    labels: RegistryLabels,
}

/// The configured hosts of the `registry` label: those of the [`Config`], fixed, plus those the
/// hosts provider names (refreshed about every 10 s) and the mirrors its host configurations
/// list (at most 256).
#[derive(Clone, Debug)]
struct RegistryLabels {
    fixed: Arc<ConfiguredHosts>,
    current: Arc<RwLock<Arc<ConfiguredHosts>>>,
    provided: Arc<Mutex<Provided>>,
}

#[derive(Debug, Default)]
struct Provided {
    refreshed: Option<tokio::time::Instant>,
    configured: Vec<String>,
    mirrors: BTreeSet<String>,
}

/// How often the provider's hosts are taken again.
const CONFIGURED_HOSTS_REFRESH: Duration = Duration::from_secs(10);
/// Most mirror hosts kept as label values.
const MAX_MIRROR_LABELS: usize = 256;

impl RegistryLabels {
    fn new(config: &Config) -> Self {
        let mut fixed = ConfiguredHosts::default();
        fixed.extend(
            config
                .proxies
                .iter()
                .flat_map(|(pattern, replacement)| [pattern, replacement]),
        );
        fixed.extend(&config.insecure_registries);
        fixed.extend(&config.private_registries);
        let fixed = Arc::new(fixed);
        Self {
            current: Arc::new(RwLock::new(Arc::clone(&fixed))),
            fixed,
            provided: Arc::default(),
        }
    }

    fn current(&self) -> Arc<ConfiguredHosts> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn provided(&self) -> std::sync::MutexGuard<'_, Provided> {
        self.provided.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn rebuild(&self, provided: &Provided) {
        let mut hosts = (*self.fixed).clone();
        hosts.extend(&provided.configured);
        hosts.extend(&provided.mirrors);
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(hosts);
    }
}

impl Metrics {
    /// Creates the metrics and registers them on `registry`.
    pub fn new(registry: &prometheus::Registry, config: &Config) -> Result<Self, Error> {
        let counter = |name: &str, help: &str| IntCounter::new(name, help);
        let counter_vec = |name: &str, help: &str, labels: &[&str]| {
            IntCounterVec::new(Opts::new(name, help), labels)
        };
        let gauge_vec =
            |name: &str, help: &str| GaugeVec::new(Opts::new(name, help), &["registry"]);
        let metrics = Self {
            requests: counter(
                "noe_registry_requests_total",
                "HTTP requests sent to registries",
            )
            .map_err(config_error)?,
            responses: counter_vec(
                "noe_registry_responses_total",
                "HTTP responses from registries by request kind and status",
                &["kind", "http_status"],
            )
            .map_err(config_error)?,
            errors: counter_vec(
                "noe_registry_errors_total",
                "Failed image lookups by error kind",
                &["errors"],
            )
            .map_err(config_error)?,
            rate_limit_remaining: gauge_vec(
                "noe_registry_rate_limit_remaining",
                "Pulls remaining in the registry's rate-limit window (ratelimit-remaining)",
            )
            .map_err(config_error)?,
            rate_limit_limit: gauge_vec(
                "noe_registry_rate_limit_limit",
                "Pulls allowed per rate-limit window (ratelimit-limit)",
            )
            .map_err(config_error)?,
            rate_limit_window: gauge_vec(
                "noe_registry_rate_limit_window_seconds",
                "Length of the registry's rate-limit window",
            )
            .map_err(config_error)?,
            cache_requests: counter(
                "noe_registry_cache_requests_total",
                "Platform cache lookups",
            )
            .map_err(config_error)?,
            cache_responses: counter_vec(
                "noe_registry_cache_responses_total",
                "Platform cache lookups by outcome (hit, miss, failure_hit)",
                &["cache"],
            )
            .map_err(config_error)?,
            auth_cache_requests: counter(
                "noe_registry_authentication_cache_requests_total",
                "Registry token cache lookups",
            )
            .map_err(config_error)?,
            auth_cache_responses: counter_vec(
                "noe_registry_authentication_cache_responses_total",
                "Registry token cache lookups by outcome (hit, miss)",
                &["cache"],
            )
            .map_err(config_error)?,
            request_duration: HistogramVec::new(
                HistogramOpts::new(
                    "noe_registry_request_duration_seconds",
                    "Duration of registry HTTP requests",
                )
                .buckets(vec![
                    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                ]),
                &["registry", "kind"],
            )
            .map_err(config_error)?,
            cache_entries: IntGauge::new(
                "noe_registry_cache_entries",
                "Image lookups held in the platform cache",
            )
            .map_err(config_error)?,
            revalidations: counter_vec(
                "noe_registry_revalidations_total",
                "Expired tags revalidated with a HEAD, by result (unchanged, changed, no_digest)",
                &["result"],
            )
            .map_err(config_error)?,
            throttled: counter_vec(
                "noe_registry_throttled_total",
                "Registry requests delayed by the client-side rate limit or refused before being sent (rate limit, open circuit breaker)",
                &["registry", "reason"],
            )
            .map_err(config_error)?,
            circuit_opened: counter_vec(
                "noe_registry_circuit_opened_total",
                "Registry circuit breakers opened (429, or 5xx in a row)",
                &["registry", "cause"],
            )
            .map_err(config_error)?,
            shared_reads: counter_vec(
                "noe_registry_shared_cache_reads_total",
                "Shared cache reads by result (hit, miss, unverified, error, bypassed)",
                &["result"],
            )
            .map_err(config_error)?,
            shared_writes: counter_vec(
                "noe_registry_shared_cache_writes_total",
                "Shared cache writes by result (ok, error, bypassed, dropped)",
                &["result"],
            )
            .map_err(config_error)?,
            credential_renewals: counter_vec(
                "noe_registry_credential_renewals_total",
                "Credentials renewed after a registry refused them, by provider and result (renewed, refused, failed)",
                &["provider", "result"],
            )
            .map_err(config_error)?,
            verifications: counter_vec(
                "noe_verifications_total",
                "Platforms verified by their own binaries, by verdict (verified, mismatch, unverifiable)",
                &["verdict"],
            )
            .map_err(config_error)?,
            verification_bytes: counter(
                "noe_verification_bytes_total",
                "Compressed layer bytes read by verifications",
            )
            .map_err(config_error)?,
            verification_duration: prometheus::Histogram::with_opts(
                prometheus::HistogramOpts::new(
                    "noe_verification_duration_seconds",
                    "Time to verify one platform of an image",
                )
                .buckets(vec![0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0]),
            )
            .map_err(config_error)?,
            verification_queue_depth: IntGauge::new(
                "noe_verification_queue_depth",
                "Images waiting for a background verification (--verify-binaries=background)",
            )
            .map_err(config_error)?,
            labels: RegistryLabels::new(config),
        };
        let collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(metrics.requests.clone()),
            Box::new(metrics.responses.clone()),
            Box::new(metrics.errors.clone()),
            Box::new(metrics.rate_limit_remaining.clone()),
            Box::new(metrics.rate_limit_limit.clone()),
            Box::new(metrics.rate_limit_window.clone()),
            Box::new(metrics.cache_requests.clone()),
            Box::new(metrics.cache_responses.clone()),
            Box::new(metrics.auth_cache_requests.clone()),
            Box::new(metrics.auth_cache_responses.clone()),
            Box::new(metrics.request_duration.clone()),
            Box::new(metrics.cache_entries.clone()),
            Box::new(metrics.revalidations.clone()),
            Box::new(metrics.throttled.clone()),
            Box::new(metrics.circuit_opened.clone()),
            Box::new(metrics.shared_reads.clone()),
            Box::new(metrics.shared_writes.clone()),
            Box::new(metrics.credential_renewals.clone()),
            Box::new(metrics.verifications.clone()),
            Box::new(metrics.verification_bytes.clone()),
            Box::new(metrics.verification_duration.clone()),
            Box::new(metrics.verification_queue_depth.clone()),
        ];
        for collector in collectors {
            registry.register(collector).map_err(config_error)?;
        }
        // Every verdict is exposed from the start (at 0), so alerts on them have a series.
        for verdict in ["verified", "mismatch", "unverifiable"] {
            metrics.verifications.with_label_values(&[verdict]);
        }
        if let Some(overrides) = &config.platform_overrides {
            registry
                .register(Box::new(overrides.failures().clone()))
                .map_err(config_error)?;
        }
        Ok(metrics)
    }

    /// Counts one platform's verification.
    pub fn count_verification(
        &self,
        report: &noe_core::binary::Report,
        bytes: u64,
        took: std::time::Duration,
    ) {
        self.verifications
            .with_label_values(&[report.verdict.as_str()])
            .inc();
        self.verification_bytes.inc_by(bytes);
        self.verification_duration.observe(took.as_secs_f64());
    }

    /// Counts a HEAD revalidation (`unchanged`, `changed`, `no_digest`).
    pub fn count_revalidation(&self, result: &'static str) {
        self.revalidations.with_label_values(&[result]).inc();
    }

    /// The bounded `registry` label value for a registry host (see [`labels`]).
    pub fn registry_label(&self, host: &str) -> String {
        self.labels.current().label(host)
    }

    /// Whether the hosts provider's hosts are due to be taken again (about every 10 s); a
    /// `true` answer counts as taking them (concurrent callers get `false`).
    pub fn configured_hosts_due(&self) -> bool {
        let mut provided = self.labels.provided();
        let due = provided
            .refreshed
            .is_none_or(|at| at.elapsed() >= CONFIGURED_HOSTS_REFRESH);
        if due {
            provided.refreshed = Some(tokio::time::Instant::now());
        }
        due
    }

    /// Sets the hosts the hosts provider (credential sources, containerd) names now, on top of
    /// the configuration's own, as label values.
    pub fn set_configured_hosts(&self, hosts: Vec<String>) {
        let mut provided = self.labels.provided();
        provided.configured = hosts;
        self.labels.rebuild(&provided);
    }

    /// Adds containerd mirror hosts as label values (at most 256 are kept).
    pub fn add_mirror_hosts(&self, hosts: impl IntoIterator<Item = String>) {
        let mut provided = self.labels.provided();
        let mut added = false;
        for host in hosts {
            if provided.mirrors.len() >= MAX_MIRROR_LABELS {
                break;
            }
            added |= provided.mirrors.insert(host);
        }
        if added {
            self.labels.rebuild(&provided);
        }
    }

    /// Records Docker Hub style `ratelimit-limit: 100;w=21600` / `ratelimit-remaining: 76;w=21600`.
    pub fn record_rate_limit(&self, host: &str, headers: &http::HeaderMap) {
        let parse = |name: &str| -> Option<(f64, Option<f64>)> {
            let value = headers.get(name)?.to_str().ok()?;
            let mut parts = value.split(';');
            let count = parts.next()?.trim().parse::<f64>().ok()?;
            let window = parts
                .filter_map(|p| p.trim().strip_prefix("w="))
                .find_map(|w| w.parse::<f64>().ok());
            Some((count, window))
        };
        let label = self.registry_label(host);
        if let Some((limit, window)) = parse("ratelimit-limit") {
            self.rate_limit_limit
                .with_label_values(&[&label])
                .set(limit);
            if let Some(window) = window {
                self.rate_limit_window
                    .with_label_values(&[&label])
                    .set(window);
            }
        }
        if let Some((remaining, _)) = parse("ratelimit-remaining") {
            self.rate_limit_remaining
                .with_label_values(&[&label])
                .set(remaining);
        }
    }
}

fn config_error(error: prometheus::Error) -> Error {
    Error::Config {
        reason: format!("cannot register registry metrics: {error}"),
    }
}

/// The bounded `registry` label value of an image reference's registry (see [`labels`]), for
/// callers holding only the image; a reference that does not parse is `other`. A failed lookup
/// gives its label directly: [`crate::Resolver::error_label`].
pub fn image_registry_label(image: &str, configured: &[String]) -> String {
    match crate::Reference::parse(image) {
        Ok(reference) => ConfiguredHosts::new(configured).label(&reference.registry),
        Err(_) => labels::OTHER.to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
