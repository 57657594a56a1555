//! What `serve`, `explain` and `inspect` share: the metrics registry, the registry crate's
//! resolver, the node-level credential sources, and the admission built on them. Built once from
//! typed configuration; it knows no flag.

use std::sync::Arc;
use std::time::Duration;

use noe_registry::credentials::Sources;
use noe_registry::{Resolution, Resolver};
use noe_webhook::admission::Admission;
use noe_webhook::decide::Policy;
use noe_webhook::metrics::Metrics;
use noe_webhook::resolve::pull_secrets::PullSecrets;
use noe_webhook::resolve::{Credentials, RegistryLookup, Resolve};

use crate::config::RegistrySettings;

/// Why the shared parts could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("cannot read the credential sources")]
    Sources(#[source] noe_registry::credentials::Error),
    #[error("cannot build the registry resolver")]
    Resolver(#[source] noe_registry::Error),
    #[error("cannot register metrics")]
    Metrics(#[from] prometheus::Error),
}

/// The parts every command shares.
#[derive(Clone, Debug)]
pub struct App {
    /// Every component registers its metrics here; `serve` exposes it on `/metrics`.
    pub metrics: prometheus::Registry,
    pub resolver: Resolver,
    pub sources: Arc<Sources>,
}

impl App {
    pub async fn build(settings: RegistrySettings) -> Result<Self, Error> {
        let RegistrySettings { resolver, sources } = settings;
        let metrics = prometheus::Registry::new();
        let sources = Sources::new(sources).await.map_err(Error::Sources)?;
        // containerd's certs.d hosts.toml mirrors apply to the registry after proxies; every
        // source's hosts are `registry` label values.
        let config = noe_registry::Config {
            hosts: Some(Arc::new(sources.clone())),
            ..resolver
        };
        let resolver = Resolver::new(config, &metrics).map_err(Error::Resolver)?;
        Ok(Self {
            metrics,
            resolver,
            sources: Arc::new(sources),
        })
    }

    /// The credentials of pods: their pull secrets when the Kubernetes API is reachable, then
    /// the node-level sources.
    pub fn credentials(&self, pull_secrets: Option<PullSecrets>) -> Credentials {
        Credentials {
            resolver: self.resolver.clone(),
            sources: self.sources.clone(),
            pull_secrets,
        }
    }

    /// The admission: lookups within `deadline`, decided by `policy`, its metrics registered on
    /// [`App::metrics`] with at most `max_namespaces` namespace label values.
    pub fn admission(
        &self,
        policy: Policy,
        deadline: Duration,
        max_namespaces: usize,
        pull_secrets: Option<PullSecrets>,
    ) -> Result<Admission, Error> {
        let lookup = RegistryLookup::new(self.resolver.clone());
        let resolve = Resolve::new(
            Arc::new(lookup),
            Arc::new(self.credentials(pull_secrets)),
            deadline,
        );
        let metrics = Metrics::register(&self.metrics)?.with_namespace_limit(max_namespaces);
        Ok(Admission::new(resolve, policy, metrics))
    }

    /// What `image` resolves to, with the node-level credentials (`noe inspect`).
    pub async fn resolve(&self, image: &str) -> Result<Arc<Resolution>, noe_registry::Error> {
        let candidates = self.credentials(None).candidates(image, None).await;
        self.resolver.resolve(image, &candidates).await
    }
}
