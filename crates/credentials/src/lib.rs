//! Credential sources: docker config files, containerd configuration, kubelet credential provider
//! plugins, and kubelet-style image pattern matching. Each is a [`Source`]; they produce
//! [`CredentialCandidate`]s.
//!
//! [`Sources`] puts them together in the order the kubelet's view suggests: the cloud identity
//! (a [`Source`] the cloud crate implements, plugged in with [`Sources::with_cloud`]; for its
//! own registries only), plugins, then containerd, then docker config files (a pod's pull
//! secrets, read by the webhook, go first: [`Sources::credentials`]).

pub mod containerd;
pub mod credential;
pub mod docker_config;
pub mod duration;
pub mod exec;
pub mod files;
pub mod generation;
pub mod glob;
pub mod matching;
pub mod provider;
pub mod reload;
pub mod source;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use generation::Generation;
pub use matching::image_matches;
pub use reload::DEFAULT_RELOAD_INTERVAL;

pub use credential::{Credential, CredentialCandidate, Renew, Renewal};
pub use source::{
    FileSource, PodIdentity, Request, ServiceAccountError, ServiceAccountInfo, ServiceAccountToken,
    ServiceAccounts, Source,
};

use crate::files::FileReader;
use containerd::ContainerdSource;
use docker_config::{CredentialHelpers, DockerConfigSource};
use exec::ExecLimits;
use provider::ProviderSource;

/// containerd's configuration directory, the default of `--containerd-config-path`.
pub const DEFAULT_CONTAINERD_CONFIG_PATH: &str = "/etc/containerd";

/// Why the credential sources cannot be built from the flags.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(
        "the credential provider plugin directory and configuration file must be given together"
    )]
    ProviderFlags,
    #[error(transparent)]
    Provider(#[from] provider::ProviderError),
}

/// The credential flags.
#[derive(Clone, Debug, Default)]
pub struct SourcesConfig {
    /// `--docker-config-path`; `None`: noe's default list ([`docker_config::default_paths`]).
    pub docker_config_paths: Option<Vec<PathBuf>>,
    /// `--containerd-config-path`; `None`: `/etc/containerd`.
    pub containerd_config_paths: Option<Vec<PathBuf>>,
    /// `--image-credential-provider-bin-dir`.
    pub provider_bin_dir: Option<PathBuf>,
    /// `--image-credential-provider-config`.
    pub provider_config: Option<PathBuf>,
    /// Where docker credential helpers are looked up; `None`: `$PATH`.
    pub helper_dirs: Option<Vec<PathBuf>>,
    /// Bounds on each helper or plugin run.
    pub exec_limits: ExecLimits,
    /// Bound on each read of a configuration file (a FIFO or a hung mount never blocks longer);
    /// `None`: [`crate::files::DEFAULT_TIMEOUT`].
    pub file_read_timeout: Option<Duration>,
    /// `--credential-provider-sa-tokens`: plugins with `tokenAttributes` run with the pod's
    /// service account token (else they are skipped).
    pub service_account_tokens: bool,
}

/// All the node-level credential sources.
#[derive(Clone, Debug)]
pub struct Sources {
    /// The cloud workload identity (`--cloud-credentials`), asked first for its own registries.
    cloud: Option<Arc<dyn Source>>,
    providers: Option<ProviderSource>,
    containerd: ContainerdSource,
    docker: DockerConfigSource,
    /// Counts changes of the docker and containerd files' contents.
    generation: Generation,
    /// Reads the files again in the background (while any clone of these sources lives), so a
    /// change is noticed even when every lookup is answered from the cache.
    _refresh: Option<Arc<Refresh>>,
}

/// Aborts the background refresh when the last clone of [`Sources`] is dropped.
#[derive(Debug)]
struct Refresh(tokio::task::AbortHandle);

impl Drop for Refresh {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Asks the files every `every` (a due reload runs in the background, as for a lookup).
fn refresh_every(
    containerd: ContainerdSource,
    docker: DockerConfigSource,
    every: std::time::Duration,
) -> Refresh {
    let task = tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            futures::join!(containerd.warm(), docker.warm());
        }
    });
    Refresh(task.abort_handle())
}

impl Sources {
    /// Build the sources from the flags. Fails on a provider config that cannot be read or
    /// parsed, or when only one of the two provider flags is given; missing docker and containerd
    /// files are not errors (they mean "no credentials").
    pub async fn new(config: SourcesConfig) -> Result<Self, Error> {
        let SourcesConfig {
            docker_config_paths,
            containerd_config_paths,
            provider_bin_dir,
            provider_config,
            helper_dirs,
            exec_limits,
            file_read_timeout,
            service_account_tokens,
        } = config;
        let files = FileReader::new(file_read_timeout.unwrap_or(crate::files::DEFAULT_TIMEOUT));
        let providers = match (provider_bin_dir, provider_config) {
            (None, None) => None,
            (Some(bin_dir), Some(config)) => Some(
                ProviderSource::load_with(
                    &files,
                    bin_dir,
                    &config,
                    exec_limits,
                    service_account_tokens,
                )
                .await?,
            ),
            _ => return Err(Error::ProviderFlags),
        };
        let helpers = CredentialHelpers::new(
            helper_dirs.unwrap_or_else(CredentialHelpers::dirs_from_env),
            exec_limits,
        );
        let generation = Generation::default();
        let containerd = ContainerdSource::with_options(
            containerd_config_paths
                .unwrap_or_else(|| vec![PathBuf::from(DEFAULT_CONTAINERD_CONFIG_PATH)]),
            DEFAULT_RELOAD_INTERVAL,
            files.clone(),
        )
        .with_generation(generation.clone());
        let docker = DockerConfigSource::with_options(
            docker_config_paths.unwrap_or_else(docker_config::default_paths),
            helpers,
            DEFAULT_RELOAD_INTERVAL,
            files,
        )
        .with_generation(generation.clone());
        // Read the files now (each bounded), so the first admission finds them loaded.
        futures::join!(containerd.warm(), docker.warm());
        let refresh = refresh_every(containerd.clone(), docker.clone(), DEFAULT_RELOAD_INTERVAL);
        Ok(Self {
            cloud: None,
            providers,
            containerd,
            docker,
            generation,
            _refresh: Some(Arc::new(refresh)),
        })
    }

    /// The generation of the docker and containerd files' contents: it grows when a reload
    /// finds them changed (the registry cache's `credentials_generation`).
    pub fn generation(&self) -> Generation {
        self.generation.clone()
    }

    /// No source at all (tests, or a deliberately anonymous setup).
    pub fn none() -> Self {
        Self {
            cloud: None,
            providers: None,
            containerd: ContainerdSource::new(Vec::new()),
            docker: DockerConfigSource::new(
                Vec::new(),
                CredentialHelpers::new(Vec::new(), ExecLimits::default()),
            ),
            generation: Generation::default(),
            _refresh: None,
        }
    }

    /// The node-level sources in the order they are asked: the cloud identity, plugins,
    /// containerd, docker config files.
    fn chain(&self) -> impl Iterator<Item = &dyn Source> {
        let cloud = self.cloud.as_deref();
        let providers = self.providers.as_ref().map(|p| p as &dyn Source);
        cloud
            .into_iter()
            .chain(providers)
            .chain([&self.containerd as &dyn Source, &self.docker as &dyn Source])
    }

    /// The credentials to try for `image` (a normalized reference such as
    /// `docker.io/library/nginx:latest`), in order: the cloud identity (for its own registries
    /// only), plugins, containerd, docker config files. A credential already listed by an
    /// earlier source is not repeated.
    pub async fn candidates(&self, image: &str) -> Vec<CredentialCandidate> {
        self.credentials(None, Request::new(image)).await
    }

    /// The credentials to try for `request`: `first`'s (a pod's own pull secrets), then each
    /// node-level source serving the image's host, in order. A credential already listed by an
    /// earlier source is not repeated.
    pub async fn credentials(
        &self,
        first: Option<&dyn Source>,
        request: Request<'_>,
    ) -> Vec<CredentialCandidate> {
        let host = request.host();
        let mut out: Vec<CredentialCandidate> = Vec::new();
        for source in first.into_iter().chain(self.chain()) {
            if source.serves(host) {
                push_unique(&mut out, source.credentials(request).await);
            }
        }
        out
    }

    /// The registry hosts the credential sources name (kubelet plugin `matchImages`, containerd
    /// `auth` keys, mirrors and `certs.d` directories, docker config `auths` and `credHelpers`
    /// keys), from their last good load. Globs are kept as written (`*.dkr.ecr.*.amazonaws.com`).
    pub async fn configured_hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = Vec::new();
        for source in self.chain() {
            hosts.extend(source.configured_hosts().await);
        }
        hosts.sort();
        hosts.dedup();
        hosts
    }

    /// The containerd source (for its `hosts.toml` mirrors).
    pub fn containerd(&self) -> &ContainerdSource {
        &self.containerd
    }

    /// The docker config source.
    pub fn docker(&self) -> &DockerConfigSource {
        &self.docker
    }

    /// The same sources with `cloud` as the cloud identity (`--cloud-credentials`: the cloud
    /// crate's `CloudCredentials`), asked first for the registries it serves.
    #[must_use]
    pub fn with_cloud(mut self, cloud: Arc<dyn Source>) -> Self {
        self.cloud = Some(cloud);
        self
    }

    /// The credential provider plugins, when configured.
    pub fn providers(&self) -> Option<&ProviderSource> {
        self.providers.as_ref()
    }
}

/// Append `more` to `out`, skipping credentials already present.
pub fn push_unique(out: &mut Vec<CredentialCandidate>, more: Vec<CredentialCandidate>) {
    for candidate in more {
        if !out.iter().any(|c| c.credential == candidate.credential) {
            out.push(candidate);
        }
    }
}
