//! What `serve`, `explain`, `ungate` and `inspect` share: the metrics registry, the registry
//! crate's resolver, the node-level credential sources, the sources of platform corrections, and
//! the decider built on them. Built once from
//! typed configuration; it knows no flag.

use std::sync::Arc;
use std::time::Duration;

use noe_core::decide::Policy;
use noe_core::truth::Corrections;
use noe_credentials::Sources;
use noe_registry::{Resolution, Resolver};
use noe_webhook::decider::Decider;
use noe_webhook::metrics::Metrics;
use noe_webhook::resolve::pull_secrets::PullSecrets;
use noe_webhook::resolve::{Credentials, RegistryLookup, Resolve};

use crate::config::{KubeSettings, RegistrySettings};

/// Why the shared parts could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("cannot read the credential sources")]
    Sources(#[source] noe_credentials::Error),
    #[error("cannot set up the cloud workload identity")]
    Cloud(#[source] noe_cloud::Error),
    #[error("cannot build the registry resolver")]
    Resolver(#[source] noe_registry::Error),
    #[error("cannot register metrics")]
    Metrics(#[from] prometheus::Error),
    #[error("cannot read the kubeconfig {}", path.display())]
    Kubeconfig {
        path: std::path::PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("no Kubernetes configuration: neither --kubeconfig, $KUBECONFIG, ~/.kube/config nor an in-cluster service account")]
    Infer(#[source] kube::config::InferConfigError),
    #[error("cannot build the Kubernetes API client")]
    KubeClient(#[source] kube::Error),
}

/// A client from the kubeconfig file when one is given, else as kubectl finds one: `$KUBECONFIG`
/// or `~/.kube/config`, then the in-cluster configuration (kube's `Config::infer`).
pub async fn kube_client(settings: &KubeSettings) -> Result<kube::Client, Error> {
    let config = match &settings.kubeconfig {
        Some(path) => {
            let kubeconfig = |source| Error::Kubeconfig {
                path: path.clone(),
                source,
            };
            let file = kube::config::Kubeconfig::read_from(path).map_err(kubeconfig)?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(kubeconfig)?
        }
        None => kube::Config::infer().await.map_err(Error::Infer)?,
    };
    kube::Client::try_from(config).map_err(Error::KubeClient)
}

/// An image whose platforms a `--platform-overrides` entry states.
#[derive(Clone, Debug)]
pub struct Overridden {
    /// The image, normalized (what the patterns are matched against).
    pub reference: noe_registry::Reference,
    pub matched: noe_registry::overrides::Matched,
    /// The overrides file.
    pub file: std::path::PathBuf,
}

/// The parts every command shares.
#[derive(Clone, Debug)]
pub struct App {
    /// Every component registers its metrics here; `serve` exposes it on `/metrics`.
    pub metrics: prometheus::Registry,
    pub resolver: Resolver,
    pub sources: Arc<Sources>,
    /// Bounds on the registry lookups of admissions.
    pub lookups: noe_webhook::resolve::LookupLimits,
    /// What proves platforms false, given to every decider ([`App::with_corrections`]);
    /// `None`: nothing does.
    corrections: Option<Arc<dyn Corrections>>,
}

impl App {
    pub async fn build(settings: RegistrySettings) -> Result<Self, Error> {
        let RegistrySettings {
            resolver,
            sources,
            cloud,
            lookups,
        } = settings;
        let metrics = prometheus::Registry::new();
        let mut sources = Sources::new(sources).await.map_err(Error::Sources)?;
        if !cloud.is_empty() {
            let cloud_metrics = noe_cloud::Metrics::new(Some(&metrics))?;
            let client = noe_cloud::http_client(None).map_err(Error::Cloud)?;
            let config = noe_cloud::Config::new(cloud);
            let cloud = noe_cloud::CloudCredentials::new(config, client, cloud_metrics)
                .map_err(Error::Cloud)?;
            sources = sources.with_cloud(Arc::new(cloud));
        }
        // containerd's certs.d hosts.toml mirrors apply to the registry after proxies; every
        // source's hosts are `registry` label values.
        let config = noe_registry::Config {
            hosts: Some(Arc::new(noe_registry::hosts::NodeHosts::new(
                sources.clone(),
            ))),
            credentials_generation: Some(sources.generation()),
            ..resolver
        };
        let resolver = Resolver::new(config, &metrics).map_err(Error::Resolver)?;
        Ok(Self {
            metrics,
            resolver,
            sources: Arc::new(sources),
            lookups,
            corrections: None,
        })
    }

    /// The credentials of pods: their pull secrets when the Kubernetes API is reachable, then
    /// the node-level sources.
    pub fn credentials(&self, pull_secrets: Option<PullSecrets>) -> Credentials {
        Credentials {
            sources: self.sources.clone(),
            pull_secrets,
        }
    }

    /// The decider of admission: lookups within `deadline`, decided by `policy`, its metrics
    /// registered on [`App::metrics`] with at most `max_namespaces` namespace label values.
    pub fn decider(
        &self,
        policy: Policy,
        deadline: Duration,
        max_namespaces: usize,
        pull_secrets: Option<PullSecrets>,
    ) -> Result<Decider, Error> {
        let metrics = Metrics::register(&self.metrics)?.with_namespace_limit(max_namespaces);
        Ok(self.decider_counting_in(policy, deadline, pull_secrets, metrics))
    }

    /// A decider whose lookup and selection metrics go to `metrics` (the gate release's go to a
    /// registry of its own, as they are not admissions), with the same resolver, caches,
    /// credentials and corrections as every other.
    pub fn decider_counting_in(
        &self,
        policy: Policy,
        deadline: Duration,
        pull_secrets: Option<PullSecrets>,
        metrics: Metrics,
    ) -> Decider {
        let lookup = RegistryLookup::new(self.resolver.clone());
        let resolve = Resolve::new(
            Arc::new(lookup),
            Arc::new(self.credentials(pull_secrets)),
            deadline,
        )
        .with_limits(self.lookups);
        let decider = Decider::new(resolve, policy, metrics);
        match &self.corrections {
            Some(corrections) => decider.with_corrections(corrections.clone()),
            None => decider,
        }
    }

    /// What proves platforms false, when something does (the policy engines' endpoint answers
    /// with it too).
    pub fn corrections(&self) -> Option<Arc<dyn Corrections>> {
        self.corrections.clone()
    }

    /// Every decider built from now on leaves out the platforms `corrections` prove false (a
    /// `noe_core::truth::Chain` of the verification verdicts and the learned store).
    #[must_use]
    pub fn with_corrections(mut self, corrections: Arc<dyn Corrections>) -> Self {
        self.corrections = Some(corrections);
        self
    }

    /// The `--platform-overrides` entry answering for `image`, if any (`noe inspect`, `noe
    /// explain`): what the resolver answers then, before any registry lookup.
    pub async fn platform_override(
        &self,
        image: &str,
    ) -> Result<Option<Overridden>, noe_registry::Error> {
        let Some(file) = self.resolver.platform_overrides_file() else {
            return Ok(None);
        };
        let found = self.resolver.platform_override(image).await?;
        Ok(found.map(|(reference, matched)| Overridden {
            reference,
            matched,
            file: file.to_owned(),
        }))
    }

    /// What `image` resolves to, with the node-level credentials (`noe inspect`).
    pub async fn resolve(&self, image: &str) -> Result<Arc<Resolution>, noe_registry::Error> {
        let routed = self.resolver.routed(image).await?;
        let candidates = self.credentials(None).candidates(&routed, None).await;
        self.resolver
            .resolve_routed(&routed, None, &candidates)
            .await
    }
}
