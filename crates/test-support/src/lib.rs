//! Test harness for noe-rs: real components on loopback, started per test and torn down on drop.
//!
//! - [`Registry`]: the real CNCF distribution registry (`docker-registry serve`, Debian package
//!   `docker-registry`) on a free `127.0.0.1` port with a generated config in a temp dir. Plain
//!   HTTP, htpasswd Basic auth, Bearer token auth against a [`TokenServer`], TLS from a
//!   [`TestCa`], TLS requiring client certificates of another [`TestCa`] (mTLS); modes combine. Its access log is parsed so tests can count the requests it
//!   answered ([`Registry::requests`], [`Registry::reset_requests`]).
//! - [`TokenServer`]: an in-process Docker token server (GET with or without Basic, POST
//!   `refresh_token` / `password` grants) signing ES256 JWTs the registry trusts; it records
//!   every request and can hang.
//! - [`TestCa`]: an rcgen CA issuing server certificates for given SANs, and client
//!   certificates.
//! - [`Pusher`], [`push_image`], [`push_index`], [`push_standard_fixtures`]: images pushed
//!   through the registry's HTTP API; [`Fixtures`] knows each fixture's reference, digest and
//!   expected platforms.
//! - [`RunnableImage`], [`LayerBlob`], [`LayerEntry`]: images with real layers the tests
//!   write (tar, gzip, zstd; synthetic ELF headers, scripts, links, whiteouts) for
//!   verification.
//! - [`DockerConfig`]: docker `config.json` / pull-secret payloads (`auth`, `identitytoken`,
//!   `registrytoken`).
//! - [`FakeRegistry`]: an in-process HTTP server scripted per path for what a real registry
//!   will not do (hang, trickle, late answers, 500, 429 + `Retry-After` of any text, garbage,
//!   oversized bodies, digest mismatch, a redirect to a second host that records whether
//!   `Authorization` arrived or to any URL such as plain HTTP) and for a hostile registry (huge
//!   platform strings, nested fan-out, a redirect to a host that challenges with its own realm).
//! - [`KubeApi`]: a scripted Kubernetes API server (nodes, pods, leases, events: list, watch
//!   with bookmarks and `410 Gone`, conflicts, evictions) for kube's real `Client`;
//!   [`service_account_token`] and [`fresh_token`]: Bearer tokens shaped like projected service
//!   account tokens, for its TokenReviews.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use noe_test_support::{push_standard_fixtures, Registry};
//! let registry = Registry::start().await?;
//! let fixtures = push_standard_fixtures(&registry).await?;
//! registry.reset_requests();
//! // resolve fixtures.oci_index.reference() with the code under test, then:
//! assert_eq!(fixtures.oci_index.platforms, ["linux/amd64", "linux/arm64", "linux/arm/v7"]);
//! assert_eq!(registry.request_count(), 1);
//! # Ok(()) }
//! ```
//!
//! - [`StalledClient`]: a TCP or TLS client that sends requests and never reads the answers
//!   (for the webhook server's write timeouts); [`silent_connections`]: TCP connections that
//!   never send a byte, never starting TLS (for its handshake bounds).
//! - [`closed_port`] and [`UnansweredPort`]: loopback ports where connecting is refused, or
//!   never completes (a port a firewall drops).
//! - [`ConnectProxy`]: a loopback HTTP `CONNECT` proxy (corporate egress) that records the
//!   names it is asked to reach and tunnels them to loopback.
//! - [`DelayProxy`]: a loopback TCP proxy adding a round-trip time to everything it forwards
//!   (a registry far away, for the cold-path measurement).
//! - [`cloud::Fake`]: a loopback HTTP(S) server answering with a scripted handler, standing in
//!   for the clouds' identity services (STS, ECR's API, the GCE metadata server, Entra).
//! - [`ProviderPlugins`]: kubelet credential provider plugins as real executables (shell
//!   scripts) in a temporary directory, each logging its runs.
//! - [`RedisServer`]: the real `redis-server` (Debian package `redis-server`) on a free port,
//!   plain or TLS, with or without a password, killed on drop or mid-test (the shared cache).
//! - [`Browser`]: Debian's `chromium`, headless, driven over the DevTools protocol on a pipe
//!   (open a page, evaluate script, press keys, take a screenshot), for what is rendered for
//!   people (`noe report -o html`).
//!
//! Everything binds `127.0.0.1` only; every server loop, stream and hang is bounded.
//!
//! Requirements: `redis-server` on `PATH` (or `NOE_TEST_REDIS_BIN`) for [`RedisServer`]; the `docker-registry` binary (Debian: `apt-get install docker-registry`, 2.8.x)
//! on `PATH`, or its path in `NOE_TEST_REGISTRY_BIN`; `sh` and `kill`. Quirks of this registry
//! that client tests meet: an OCI manifest requested without the OCI type in `Accept` is a
//! 404, and a Docker manifest list requested without its type is converted to schema 1 (or
//! 404s), so clients must always send the full `Accept` list
//! ([`media_types::ACCEPT_ALL`]).
//!
//! Tokens are ES256 JWTs with an `x5c` header: the registry verifies any libtrust key type, and
//! ring makes P-256 keys instantly (clients never verify tokens, so RS256 would add nothing).

mod artifacts;
mod browser;
mod ca;
pub mod cloud;
mod connect_proxy;
mod corrections;
mod delay_proxy;
mod docker_config;
mod fake;
mod fixtures;
mod htpasswd;
mod image;
mod jwt;
mod kube_api;
mod layers;
mod plugins;
mod ports;
mod push;
mod redis;
mod registry;
mod review;
mod serve;
mod stalled_client;
mod token_server;
mod webhook_tls;

pub use artifacts::{
    attach, compat_artifact, fallback_tag, nfd_nested_spec, nfd_regex_spec, push_artifact,
    referrers_index, CompatArtifact, NFD_ARTIFACT_TYPE, NFD_SPEC_TYPE, OCIFIT_SPEC_TYPE,
    ORAS_DEFAULT_ARTIFACT_TYPE,
};
pub use browser::Browser;
pub use ca::{ServerCert, TestCa};
pub use connect_proxy::ConnectProxy;
pub use corrections::FakeCorrections;
pub use delay_proxy::DelayProxy;
pub use docker_config::DockerConfig;
pub use fake::{
    blob_path, manifest_path, Behavior, FakeRegistry, FakeRequest, FanOut, Generator, Listener,
};
pub use fixtures::{
    push_attestation, push_built, push_image, push_index, push_standard_fixtures,
    push_standard_fixtures_with, push_versions, Fixture, Fixtures,
};
pub use htpasswd::htpasswd;
pub use image::{
    attestation_entry, build_artifact, build_attestation, build_image, build_image_with_config,
    build_index, media_types, platform_json, BuiltImage, Descriptor, Flavor, IndexEntry, OCI_EMPTY,
};
pub use jwt::{fresh_token, service_account_token};
pub use kube_api::{
    crash_loop, gated_pod_json, lease_json, namespace_json, node_feature_json, node_json, pod_json,
    service_account_json, Crash, Fault, Held, KubeApi, PodFixture, PodLog, RecordedRequest,
    Resource, APPLY_PATCH, NFD_NAMESPACE, NOE_GATE, NOE_GATE_LABEL,
};
pub use layers::{
    elf_program, gzip, push_mislabelled_index, script, tar_archive, Compression, LayerBlob,
    LayerEntry, Mislabelled, RunnableImage,
};
pub use plugins::{provider_config, provider_response, ProviderPlugins};
pub use ports::{closed_port, UnansweredPort};
pub use push::{sha256_digest, PushAuth, Pusher};
pub use redis::{RedisBuilder, RedisServer};
pub use registry::{Registry, RegistryBuilder, RegistryRequest};
pub use review::{
    admission_review, deployment_pod_replica, deployment_pod_review, ephemeral_review, pod_review,
};
pub use stalled_client::{silent_connections, StalledClient};
pub use token_server::{
    decode_claims, Access, TokenFields, TokenRequest, TokenServer, TokenServerBuilder, TokenSigner,
};
pub use webhook_tls::{https_client, write_cert_dir};

/// What `--allow-registry-cidrs` (`noe_registry::Config::allow_cidrs`) must list for tests whose
/// registries run on loopback: noe refuses loopback targets unless told otherwise.
pub const LOOPBACK_CIDRS: &str = "127.0.0.0/8,::1/128";

/// [`LOOPBACK_CIDRS`], parsed.
pub fn loopback_cidrs() -> Vec<ipnet::IpNet> {
    vec![
        ipnet::IpNet::V4(ipnet::Ipv4Net::new_assert(
            std::net::Ipv4Addr::new(127, 0, 0, 0),
            8,
        )),
        ipnet::IpNet::V6(ipnet::Ipv6Net::new_assert(
            std::net::Ipv6Addr::LOCALHOST,
            128,
        )),
    ]
}
