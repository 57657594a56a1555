//! The objects the reflectors store, trimmed to the fields the controllers read *while they are
//! deserialized* (serde skips everything else: managedFields, env, volumes, status bulk never
//! become allocations that live), so 1,000 nodes and 20,000 pods fit in a few tens of MiB
//! (docs/benchmarks.md, "Controllers").

mod meta;
mod node;
mod pod;

pub use node::{NodeRecord, Taint};
pub use pod::{Owner, Phase, PodRecord, MAX_IMAGES};

/// Label keys the node record keeps.
pub const ARCH_LABEL: &str = "kubernetes.io/arch";
/// OS label.
pub const OS_LABEL: &str = "kubernetes.io/os";
/// Windows build label.
pub const WINDOWS_BUILD_LABEL: &str = "node.kubernetes.io/windows-build";
