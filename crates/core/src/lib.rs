//! noe-rs core: what a pod's images run on and where the pod may go, with no Kubernetes client,
//! HTTP, async runtime or command line (docs/architecture.md, "Crates").
//!
//! - [`platform`]: one platform model (`os/architecture[/variant]`), as registries and overrides
//!   state it.
//! - [`decide`]: the pod view, its images, and the pure decision.
//! - [`patch`]: the RFC 6902 patch the decision writes.

pub mod decide;
pub mod patch;
pub mod platform;

pub use platform::Platform;
