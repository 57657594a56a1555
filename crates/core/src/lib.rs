//! noe-rs core: what a pod's images run on and where the pod may go, with no Kubernetes client,
//! HTTP, async runtime or command line (docs/architecture.md, "Crates").
//!
//! - [`binary`]: platforms proven by an image's own binaries (verification), pure.
//! - [`compat`]: image selection by compatibility artifacts (ocifit-k8s, NFD).
//! - [`platform`]: one platform model (`os/architecture[/variant]`), as registries and overrides
//!   state it.
//! - [`images`]: the one reading of a pod's container lists.
//! - [`names`]: Kubernetes' rules for label values and object names.
//! - [`decide`]: the pod view and the pure decision.
//! - [`patch`]: the RFC 6902 patch the decision writes.
//! - [`workload`]: the pod a workload object stands for (its template, as its controller creates
//!   pods from it).
//! - [`explain`]: a decision in words and JSON (`noe explain`), from the decision's summary.
//! - [`report`]: workloads' readiness for target architectures (`noe report`), pure.
//! - [`clock`]: time as a seam for the lifetimes of the caches around the decision.
//! - [`bucket`]: the one token bucket (registry requests per host, evictions).
//! - [`truth`]: platforms proven false (verification, exec format errors learned), applied
//!   before the decision.
//! - [`upgrade`]: an image's track of versions and the search for the first that runs on a
//!   target (`--upgrades`), pure.

pub mod binary;
pub mod bucket;
pub mod clock;
pub mod decide;
pub mod explain;
pub mod images;
pub mod names;
pub mod patch;
pub mod platform;
pub mod report;
pub mod selection;
pub mod truth;
pub mod upgrade;
pub mod workload;

pub use platform::{Platform, Support};
