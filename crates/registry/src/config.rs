//! Resolver configuration, filled from the `--registry-*` flags by the caller.

use std::sync::Arc;
use std::time::Duration;

use crate::shared::SharedConfig;
use crate::HostsProvider;

/// How to reach registries and how long to remember what they said.
#[derive(Clone, Debug)]
pub struct Config {
    /// `(host glob, replacement host)`, applied in order, each to the previous result.
    pub proxies: Vec<(String, String)>,
    /// `host:port` entries reached over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// Contents of `--registry-ca-file`: extra trusted CA certificates (PEM).
    pub extra_ca_pem: Option<Vec<u8>>,
    /// Timeout of each registry HTTP request (`--registry-timeout`).
    pub request_timeout: Duration,
    /// Exceptions to the address guard (`--allow-registry-cidrs`, [`crate::ssrf`]): loopback,
    /// unspecified, link-local, metadata and this host's own addresses are refused unless a CIDR
    /// here covers them (tests on loopback list `127.0.0.0/8`).
    pub allow_cidrs: Vec<ipnet::IpNet>,
    /// How long a tag's platforms are cached (`--cache-ttl`); digests may live longer.
    pub cache_ttl: Duration,
    /// Bound on cached lookups (`--cache-max-entries`).
    pub cache_max_entries: u64,
    /// Requests per second to one registry host (`--registry-qps`); 0 (the library's
    /// default; the command line's is 50): unlimited.
    pub registry_qps: f64,
    /// Requests one registry host may get at once before the rate applies
    /// (`--registry-burst`).
    pub registry_burst: u32,
    /// The shared cache (`--shared-cache`); `None`: in-process only.
    pub shared_cache: Option<SharedConfig>,
    /// kubelet `matchImages` patterns of images never tried anonymously.
    pub private_registries: Vec<String>,
    /// containerd-style host configuration (mirrors, per-host TLS and headers) of the registry
    /// after proxies; `None`: every registry is reached at its default server. The hosts it
    /// names ([`HostsProvider::configured_hosts`]) are `registry` metric label values, with the
    /// proxies, insecure and private registries above: the resolver computes that set itself.
    pub hosts: Option<Arc<dyn HostsProvider>>,
    /// What cache and token lifetimes are measured on: the system clock; a test moves a manual
    /// one instead of waiting.
    pub clock: noe_core::clock::Clock,
    /// `--platform-overrides`: images whose platforms the operator states, answered before any
    /// registry lookup ([`crate::overrides`]).
    pub platform_overrides: Option<Arc<crate::overrides::PlatformOverrides>>,
    /// The generation of the node-level credentials ([`noe_credentials::Sources::generation`]):
    /// an answer found with one of them is fresh only while it is unchanged. `None`: answers
    /// stay fresh for their TTL.
    pub credentials_generation: Option<noe_credentials::Generation>,
    /// The bounds of verification (`--verify-max-bytes`, `--verify-concurrency`).
    pub verification: crate::verify::VerifyConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            proxies: Vec::new(),
            insecure_registries: Vec::new(),
            extra_ca_pem: None,
            request_timeout: Duration::from_secs(5),
            allow_cidrs: Vec::new(),
            cache_ttl: Duration::from_secs(3600),
            cache_max_entries: 100_000,
            registry_qps: 0.0,
            registry_burst: 100,
            shared_cache: None,
            private_registries: Vec::new(),
            hosts: None,
            platform_overrides: None,
            credentials_generation: None,
            clock: noe_core::clock::Clock::system(),
            verification: crate::verify::VerifyConfig::default(),
        }
    }
}

impl Config {
    /// True when `host` (as written in the reference, `host[:port]`) is reached over plain HTTP.
    pub fn is_insecure(&self, host: &str) -> bool {
        self.insecure_registries
            .iter()
            .any(|entry| entry.eq_ignore_ascii_case(host))
    }
}
