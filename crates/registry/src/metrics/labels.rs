//! The `registry` label: a bounded set of values, whatever registries pod authors name.
//!
//! Anyone who can create a pod can name thousands of registries (`r1.azurecr.io`,
//! `r2.azurecr.io`, ...), and each label value is a time series kept forever. So a host is
//! its own label value only when it is configured (proxy rules, insecure and private
//! registries, the credential sources' and containerd's hosts) or one of the big public
//! registries; a host under a provider's wildcard domain reports the provider's suffix (never
//! the tenant's own host); a host matching a configured glob reports the glob as written;
//! anything else is `other`. Every value therefore comes from the code or the configuration.

use std::collections::HashSet;

use crate::reference::{DOCKER_HUB, DOCKER_HUB_ENDPOINT};

/// Public registries reported as themselves.
pub const PUBLIC_REGISTRIES: &[&str] = &[
    "docker.io",
    "ghcr.io",
    "quay.io",
    "gcr.io",
    "registry.k8s.io",
    "public.ecr.aws",
];

/// Provider wildcard domains: a host under one reports the domain.
pub const PROVIDER_SUFFIXES: &[&str] = &["pkg.dev", "amazonaws.com", "azurecr.io", "gcr.io"];

/// The label of hosts outside every set.
pub const OTHER: &str = "other";

/// Docker Hub's other names, reported as `docker.io`.
const DOCKER_HUB_ALIASES: &[&str] = &[
    DOCKER_HUB_ENDPOINT,
    "index.docker.io",
    "registry.hub.docker.com",
];

/// Configured registry hosts: exact names (`harbor.corp`, `127.0.0.1:5000`) and globs
/// (`*.corp.example`), as configuration writes them. Entries may carry a scheme or a path
/// (`https://quay.io/v1/`, `registry.corp/team`): only the host counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfiguredHosts {
    exact: HashSet<String>,
    globs: Vec<String>,
}

impl ConfiguredHosts {
    pub fn new<I, S>(entries: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut hosts = Self::default();
        hosts.extend(entries);
        hosts
    }

    /// Adds entries (empty ones and bare `*` are ignored: they name no host).
    pub fn extend<I, S>(&mut self, entries: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        for entry in entries {
            let host = entry_host(entry.as_ref());
            if host.is_empty() || host.chars().all(|c| c == '*') {
                continue;
            }
            if host.contains(['*', '?', '[']) {
                if !self.globs.contains(&host) {
                    self.globs.push(host);
                }
            } else {
                self.exact.insert(host);
            }
        }
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.exact.len() + self.globs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bounded `registry` label value of `host` (`registry-1.docker.io` is `docker.io`).
    pub fn label(&self, host: &str) -> String {
        let host = host.to_ascii_lowercase();
        let host = if DOCKER_HUB_ALIASES.contains(&host.as_str()) {
            DOCKER_HUB.to_owned()
        } else {
            host
        };
        if self.exact.contains(&host) || PUBLIC_REGISTRIES.contains(&host.as_str()) {
            return host;
        }
        let bare = host.rsplit_once(':').map_or(host.as_str(), |(name, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                name
            } else {
                host.as_str()
            }
        });
        if let Some(suffix) = PROVIDER_SUFFIXES
            .iter()
            .find(|suffix| bare.len() > suffix.len() && bare.ends_with(&format!(".{suffix}")))
        {
            return (*suffix).to_owned();
        }
        if let Some(glob) = self
            .globs
            .iter()
            .find(|glob| noe_credentials::glob::matches_ignore_case(glob, &host))
        {
            return glob.clone();
        }
        OTHER.to_owned()
    }
}

/// The host part of a configuration entry: no scheme, no path, lower case, Docker Hub's names
/// as `docker.io`.
fn entry_host(entry: &str) -> String {
    let entry = entry.trim();
    let entry = entry.split_once("://").map_or(entry, |(_, rest)| rest);
    let host = entry
        .split('/')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if DOCKER_HUB_ALIASES.contains(&host.as_str()) {
        DOCKER_HUB.to_owned()
    } else {
        host
    }
}

#[cfg(test)]
mod tests;
