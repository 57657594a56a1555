//! noe-rs webhook: the admission decision and its serving, as a library the `noe` binary wires.
//!
//! - [`admission`]: the AdmissionReview envelope: parse, answer from the memo, gate or decide,
//!   answer, report.
//! - [`decider`]: the one service that turns a pod into a decision (lookups, facts, image
//!   selection, platform truth, [`noe_core::decide`]); every path decides through it.
//! - [`resolve`]: from a pod's images to their platforms under one deadline (credentials, pull
//!   secrets, the registry crate's resolver).
//! - [`facts`]: what else the decision may know about a pod's surroundings (its namespace, its
//!   node, the cluster's nodes), behind a trait.
//! - [`server`]: the transport (HTTPS, `/metrics` and health listeners, certificate reload),
//!   each listener serving a [`server::Router`] of `tower::Service` routes; the admission is a
//!   [`server::Handler`] behind the `/mutate` route.
//! - [`selection`]: image selection by compatibility artifacts, before the decision.
//! - [`metrics`]: the admission's Prometheus metrics.
//! - [`policy_endpoint`]: the policy engines' endpoint (Gatekeeper external data, Kyverno), its
//!   routes served on a listener of their own.
//! - `table`: the bounded table of remembered answers (the decision memo, the policy
//!   endpoint's answers).
//! - `cached_gets`: the one cached GET of what admissions read from the API server (namespaces,
//!   nodes, pull secrets), its lifetimes on a clock seam.
//!
//! The pure decision and the patch it writes are `noe_core`'s (`noe_core::decide`,
//! `noe_core::patch`).
//!
//! docs/architecture.md draws how these fit together.

pub mod admission;
mod cached_gets;
pub mod decider;
pub mod facts;
pub mod metrics;
pub mod policy_endpoint;
pub mod resolve;
pub mod selection;
pub mod server;
mod table;

/// The allocator settings the container image sets (`ENV` in the Dockerfile): memory freed after
/// a burst of registry lookups goes back to the OS at once instead of staying in mimalloc's
/// arenas until the next allocation burst, and arenas are committed as used rather than up
/// front (docs/benchmarks.md, "Memory"). A binary run outside the image without them works the
/// same, with more resident memory.
pub const ALLOCATOR_ENV: [(&str, &str); 2] = [
    ("MIMALLOC_PURGE_DELAY", "0"),
    ("MIMALLOC_ARENA_EAGER_COMMIT", "0"),
];
