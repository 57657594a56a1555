//! NFD's `NodeFeature` (`nfd.k8s-sigs.io/v1alpha1`, namespaced) as the node-feature reflector
//! stores it: identity, the node it describes (label `nfd.node.kubernetes.io/node-name`) and its
//! `spec.features`, bounded while they are deserialized and stored once per distinct content
//! (`noe_core::selection::NodeFeatures`: no JSON tree of the whole `spec.features` is built).

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use noe_core::selection::NodeFeatures;
use serde::Deserialize;

use super::meta::{bounded, RawObject};

/// The label naming the node a `NodeFeature` describes.
pub const NODE_NAME_LABEL: &str = "nfd.node.kubernetes.io/node-name";

/// What image selection knows of one `NodeFeature` object.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(from = "RawNodeFeature")]
pub struct NodeFeatureRecord {
    metadata: ObjectMeta,
    /// The node it describes (`None`: the label is missing; such an object is ignored).
    pub node: Option<String>,
    /// `spec.features`, bounded and interned (a malformed one reads as no feature).
    pub features: Arc<NodeFeatures>,
}

impl NodeFeatureRecord {
    /// `(namespace, name)`.
    pub fn key(&self) -> (String, String) {
        (
            self.metadata.namespace.clone().unwrap_or_default(),
            self.metadata.name.clone().unwrap_or_default(),
        )
    }

    /// A record built in code (tests, benches).
    pub fn new(namespace: &str, name: &str, node: &str, features: NodeFeatures) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            node: Some(node.to_owned()),
            features: features.interned(),
        }
    }
}

type RawNodeFeature = RawObject<RawSpec, NoStatus>;

#[derive(Default, Deserialize)]
struct RawSpec {
    #[serde(default, deserialize_with = "features")]
    features: Option<Arc<NodeFeatures>>,
}

/// `spec.features`, read by `NodeFeatures::read` straight from the object's bytes.
fn features<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Arc<NodeFeatures>>, D::Error> {
    NodeFeatures::read(d).map(Some)
}

/// `NodeFeature` has no status; whatever is there is ignored.
#[derive(Default, Deserialize)]
struct NoStatus {}

impl From<RawNodeFeature> for NodeFeatureRecord {
    fn from(raw: RawNodeFeature) -> Self {
        let node = raw
            .metadata
            .labels
            .get(NODE_NAME_LABEL)
            .filter(|name| !name.is_empty())
            .map(|name| bounded(name));
        Self {
            node,
            features: raw
                .spec
                .features
                .unwrap_or_else(|| NodeFeatures::default().interned()),
            metadata: raw.metadata.identity(),
        }
    }
}

impl kube::Resource for NodeFeatureRecord {
    type DynamicType = ();
    type Scope = kube::core::NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed("NodeFeature")
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed("nfd.k8s-sigs.io")
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed("v1alpha1")
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed("nodefeatures")
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}
