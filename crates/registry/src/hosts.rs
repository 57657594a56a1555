//! Where a registry is reached: containerd's host configuration (`certs.d/HOST/hosts.toml`).
//!
//! The resolver asks a [`HostsProvider`] for the [`HostsConfig`] of the registry host after
//! `--registry-proxies`, then tries its endpoints as containerd does: the `[host."URL"]` mirrors in
//! file order, then the `server`. Only `resolve`-capable hosts serve tags and only `pull`-capable
//! ones serve digests; a failing mirror (unreachable, timeout, 404, 5xx, refused credentials)
//! passes to the next endpoint. A mirror gets only the [`crate::CredentialCandidate`]s marked
//! for its own host ([`crate::CredentialCandidate::for_mirror`]), and its `header` values.
//!
//! The model and its file format live beside the HTTP client that uses them
//! (`client/hosts_toml.rs`, `client/host_tls.rs`); the containerd configuration only says where the
//! files are ([`ContainerdSource::host_source`]), and [`ContainerdHosts`] reads them.

use std::sync::Arc;

use futures::future::BoxFuture;
use noe_credentials::containerd::{ContainerdSource, HostSource};
use noe_credentials::reload::Reloading;
use noe_credentials::Sources;

pub use crate::client::host_tls::{ClientCert, TlsFiles};
pub use crate::client::hosts_toml::{
    default_server, host_dir, load_hosts, Capabilities, Endpoint, HostsConfig, HostsError,
};

/// Gives the host configuration of a registry, if one applies, and the registry hosts the
/// configuration behind it names.
pub trait HostsProvider: Send + Sync + std::fmt::Debug {
    /// The configuration for `registry` (`docker.io`, `127.0.0.1:5000`); `None`: the registry's
    /// default server only.
    fn hosts<'a>(&'a self, registry: &'a str) -> BoxFuture<'a, Option<HostsConfig>>;

    /// The registry hosts (or host globs) the configuration names, used as `registry` metric
    /// label values. Called about every 10 s; answers from what is loaded, without waiting on
    /// files.
    fn configured_hosts(&self) -> BoxFuture<'_, Vec<String>> {
        Box::pin(async { Vec::new() })
    }
}

/// Registries whose host configuration is remembered (each reloaded in the background).
const MAX_HOSTS_ENTRIES: u64 = 4096;

/// The host configuration containerd's configuration points at: each registry's `hosts.toml`
/// (or `_default`, or a docker-style directory of certificates) under the `certs.d`-style
/// directories, read off the async workers and reloaded in the background (the last good one
/// kept), or the deprecated CRI mirrors.
#[derive(Clone, derive_more::Debug)]
#[debug("ContainerdHosts {{ source: {source:?}, .. }}")]
pub struct ContainerdHosts {
    source: ContainerdSource,
    /// `hosts.toml` per registry host.
    hosts: moka::future::Cache<String, Arc<Reloading<Option<HostsConfig>>>>,
}

impl ContainerdHosts {
    pub fn new(source: ContainerdSource) -> Self {
        Self {
            source,
            hosts: moka::future::Cache::builder()
                .max_capacity(MAX_HOSTS_ENTRIES)
                .build(),
        }
    }

    /// The host configuration of `registry` (`docker.io`, `127.0.0.1:5000`), if a `hosts.toml`
    /// (or `_default`, or a docker-style directory of certificates) applies; unreadable files
    /// are logged and the last good configuration kept.
    ///
    /// Without any `config_path` directory, the deprecated CRI `registry.mirrors` apply instead
    /// (the registry's own entry, else `"*"`): their endpoints in order, then the registry's
    /// default server unless listed.
    pub async fn hosts(&self, registry: &str) -> Option<HostsConfig> {
        let roots = match self.source.host_source(registry).await {
            HostSource::Dirs(roots) => roots,
            HostSource::Mirrors(endpoints) => {
                return match HostsConfig::from_mirror_endpoints(registry, &endpoints) {
                    Ok(hosts) => Some(hosts),
                    Err(error) => {
                        tracing::warn!(registry, %error, "ignoring containerd registry mirrors");
                        None
                    }
                };
            }
            HostSource::None => return None,
        };
        let files = self.source.files().clone();
        let first_wait = files.timeout().saturating_mul(2);
        let every = self.source.reload_interval();
        let entry = self
            .hosts
            .get_with(registry.to_owned(), async move {
                Arc::new(Reloading::new(every, first_wait))
            })
            .await;
        let owned = registry.to_owned();
        let hosts = entry
            .get(|previous| async move {
                let label = roots.first().map(|root| root.join(&owned)).unwrap_or_default();
                let registry = owned.clone();
                match files.run(&label, move || load_hosts(&roots, &registry)).await {
                    Ok(Ok(hosts)) => hosts,
                    Ok(Err(error)) => {
                        tracing::warn!(registry = %owned, %error, "ignoring containerd hosts.toml");
                        None
                    }
                    Err(error) => {
                        tracing::warn!(registry = %owned, %error, "containerd hosts.toml not read again; keeping what was read before");
                        previous.and_then(|p| (*p).clone())
                    }
                }
            })
            .await;
        (*hosts).clone()
    }
}

impl HostsProvider for ContainerdHosts {
    fn hosts<'a>(&'a self, registry: &'a str) -> BoxFuture<'a, Option<HostsConfig>> {
        Box::pin(ContainerdHosts::hosts(self, registry))
    }

    fn configured_hosts(&self) -> BoxFuture<'_, Vec<String>> {
        <ContainerdSource as noe_credentials::Source>::configured_hosts(&self.source)
    }
}

/// All the node-level credential sources: containerd's host configuration, and every source's
/// hosts as label values.
#[derive(Clone, Debug)]
pub struct NodeHosts {
    sources: Sources,
    containerd: ContainerdHosts,
}

impl NodeHosts {
    pub fn new(sources: Sources) -> Self {
        let containerd = ContainerdHosts::new(sources.containerd().clone());
        Self {
            sources,
            containerd,
        }
    }
}

impl HostsProvider for NodeHosts {
    fn hosts<'a>(&'a self, registry: &'a str) -> BoxFuture<'a, Option<HostsConfig>> {
        Box::pin(self.containerd.hosts(registry))
    }

    fn configured_hosts(&self) -> BoxFuture<'_, Vec<String>> {
        Box::pin(self.sources.configured_hosts())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
