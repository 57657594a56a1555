//! Where a registry is reached: containerd's host configuration (`certs.d/HOST/hosts.toml`).
//!
//! The resolver asks a [`HostsProvider`] for the [`HostsConfig`] of the registry host after
//! `--registry-proxies`, then tries its endpoints as containerd does: the `[host."URL"]` mirrors in
//! file order, then the `server`. Only `resolve`-capable hosts serve tags and only `pull`-capable
//! ones serve digests; a failing mirror (unreachable, timeout, 404, 5xx, refused credentials)
//! passes to the next endpoint. A mirror gets only the [`crate::CredentialCandidate`]s marked
//! for its own host ([`crate::CredentialCandidate::for_mirror`]), and its `header` values.

use futures::future::BoxFuture;

pub use crate::credentials::containerd::host_tls::{ClientCert, TlsFiles};
pub use crate::credentials::containerd::hosts::{Capabilities, Endpoint, HostsConfig};
use crate::credentials::containerd::ContainerdSource;
use crate::credentials::Sources;

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

impl HostsProvider for ContainerdSource {
    fn hosts<'a>(&'a self, registry: &'a str) -> BoxFuture<'a, Option<HostsConfig>> {
        Box::pin(ContainerdSource::hosts(self, registry))
    }

    fn configured_hosts(&self) -> BoxFuture<'_, Vec<String>> {
        Box::pin(ContainerdSource::configured_hosts(self))
    }
}

/// All the node-level credential sources: containerd's host configuration, and every source's
/// hosts as label values.
impl HostsProvider for Sources {
    fn hosts<'a>(&'a self, registry: &'a str) -> BoxFuture<'a, Option<HostsConfig>> {
        Box::pin(self.containerd().hosts(registry))
    }

    fn configured_hosts(&self) -> BoxFuture<'_, Vec<String>> {
        Box::pin(Sources::configured_hosts(self))
    }
}
