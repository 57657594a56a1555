//! The objects the reflectors store, trimmed to the fields the controllers read *while they are
//! deserialized* (serde skips everything else: managedFields, env, volumes, status bulk never
//! become allocations that live), so 1,000 nodes and 20,000 pods fit in a few tens of MiB
//! (docs/benchmarks.md, "Controllers").

/// `kube::Resource` for a record of a core/v1 kind: `resource!(Record, "Kind", "plural", Scope)`.
macro_rules! resource {
    ($record:ty, $kind:literal, $plural:literal, $scope:ident) => {
        impl kube::Resource for $record {
            type DynamicType = ();
            type Scope = kube::core::$scope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed($kind)
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed("")
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed("v1")
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                std::borrow::Cow::Borrowed($plural)
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
use resource;

mod container;
mod meta;
mod node;
mod node_feature;
mod pod;

pub(crate) use container::cut;
pub use container::{ContainerRun, Termination, Waiting, MAX_MESSAGE};
pub use node::{NodeRecord, Taint};
pub use node_feature::{NodeFeatureRecord, NODE_NAME_LABEL};
pub use pod::{Accounts, Owner, Phase, PodRecord, MAX_IMAGES};

/// Label keys the node record keeps.
pub const ARCH_LABEL: &str = "kubernetes.io/arch";
/// OS label.
pub const OS_LABEL: &str = "kubernetes.io/os";
/// Windows build label.
pub const WINDOWS_BUILD_LABEL: &str = "node.kubernetes.io/windows-build";
