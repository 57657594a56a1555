//! Resolve which platforms a container image supports, straight from its registry, without pulling
//! layers. This crate knows nothing of Kubernetes.
//!
//! ```no_run
//! # async fn demo() -> Result<(), noe_registry::Error> {
//! let metrics = prometheus::Registry::new();
//! let resolver = noe_registry::Resolver::new(noe_registry::Config::default(), &metrics)?;
//! let resolution = resolver.resolve("nginx", &[]).await?;
//! assert_eq!(resolution.image, "docker.io/library/nginx:latest");
//! for platform in &resolution.platforms {
//!     println!("{platform}"); // linux/amd64, linux/arm/v7, ...
//! }
//! # Ok(()) }
//! ```
//!
//! One lookup, in order: [`cache`] answers from the image as written and the caller's credential
//! [`cache::Scope`] (one keyed hash: the warm path), or coalesces concurrent misses into one load;
//! the load parses and normalizes the image ([`mod@reference`]); [`proxies`] rewrites the
//! registry host; [`hosts`] gives the endpoints of the resulting host (containerd `hosts.toml`
//! mirrors, then its server); [`shared`] (a Valkey/Redis cache the replicas share, optional) may
//! know the digest and its platforms; otherwise the load tries the endpoints in order (a failing
//! mirror passes to the next) and, at each, its `noe_credentials::CredentialCandidate`s in order, then
//! anonymous access (unless the image matches `private_registries`), moving on only on
//! 401/403; `walk` GETs the manifest with the
//! [`manifest::ACCEPT`] list and turns it into platforms (index entries as stated, platform-less
//! entries and nested indexes fetched within bounds, a single manifest through its config blob),
//! or, when an expired entry (or the shared cache) knows a digest, HEADs it first and reuses the
//! platforms of an unchanged digest; `auth` answers challenges ([`challenge`]) with tokens or Basic credentials; `client` does
//! the HTTP with timeouts, the 4 MiB body cap, one retry on 429/5xx and hand-followed redirects
//! that drop `Authorization` across hosts, each request through the host's rate limiter and
//! circuit breaker ([`throttle`]); [`ssrf`] refuses loopback, unspecified, link-local, metadata
//! and this host's own addresses.
//!
//! Before any of it, [`overrides`] (`--platform-overrides`) may answer for an image: the
//! operator states its platforms (unreachable registries, wrong metadata, arch-neutral
//! artifacts as `noe_core::Platform::any`).
//!
//! Around it: the `noe_credentials` crate reads docker, containerd and kubelet plugin
//! configuration (bounded reads off the async workers, reloaded in the background) and holds
//! the one pattern matcher and Go-duration parser; [`hosts`] carries each host's TLS files
//! (`ca`, mTLS `client`); [`metrics`] keeps every label bounded, the `registry` label from
//! the configured hosts the resolver computes itself ([`Resolver::error_label`] gives a failed
//! lookup's).
//!
//! Credentials are data: callers pick the candidates for the host actually contacted, which
//! [`Resolver::routed`] gives (the image parsed, proxies applied and its hosts found once), so a
//! proxy never receives another host's secrets; [`Routed::endpoints`] lists the mirrors too,
//! whose own candidates are passed marked with `CredentialCandidate::for_mirror` (a mirror
//! never receives unmarked ones). The same [`Routed`] is then looked up
//! ([`Resolver::platforms_routed`]) without parsing or routing it again.
//!
//! [`upgrade`] finds an image's upgrade path for a target architecture: its repository's tags
//! ([`Resolver::tags`], the registry's `tags/list` pages) and, for each version the search of
//! [`noe_core::upgrade`] asks about, a lookup like any other.

pub mod artifacts;
mod auth;
mod budget;
pub mod cache;
pub mod challenge;
mod client;
pub mod config;
pub mod error;
pub mod hosts;
pub mod inspect;
pub mod manifest;
pub mod metrics;
pub mod overrides;
pub mod proxies;
pub mod reference;
pub mod resolver;
pub mod shared;
pub mod ssrf;
pub mod throttle;
pub mod upgrade;
pub mod verify;
mod walk;

pub use config::Config;
pub use error::Error;
pub use hosts::HostsProvider;
pub use reference::Reference;
pub use resolver::{Answered, Resolution, Resolver, Routed};
