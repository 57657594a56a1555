//! The part of `metadata` the records keep: identity only (name, namespace, uid,
//! resourceVersion), which kube-runtime's store and watcher need.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer};

/// Longest string kept from an object (names are at most 253, label values 63).
pub(crate) const MAX_STRING: usize = 4096;

/// `null` reads as the default, like a missing field.
pub(crate) fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// An object as it arrives: `metadata`, and the `spec` and `status` parts a record names.
#[derive(Deserialize)]
#[serde(bound(deserialize = "S: Default + Deserialize<'de>, T: Default + Deserialize<'de>"))]
pub(crate) struct RawObject<S, T> {
    #[serde(default)]
    pub(crate) metadata: RawMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) spec: S,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) status: T,
}

/// Identity fields of `metadata`, plus what the records turn into flags.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RawMeta {
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) namespace: String,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) uid: String,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) resource_version: String,
    /// Only whether it is set matters.
    #[serde(default)]
    pub(crate) deletion_timestamp: Option<serde::de::IgnoredAny>,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) labels: std::collections::BTreeMap<String, String>,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) annotations: std::collections::BTreeMap<String, serde::de::IgnoredAny>,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) owner_references: Vec<RawOwner>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RawOwner {
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) kind: String,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) controller: bool,
}

impl RawMeta {
    /// The identity as an `ObjectMeta` (everything else left `None`).
    pub(crate) fn identity(&self) -> ObjectMeta {
        let keep = |text: &str| (!text.is_empty()).then(|| bounded(text));
        ObjectMeta {
            name: keep(&self.name),
            namespace: keep(&self.namespace),
            uid: keep(&self.uid),
            resource_version: keep(&self.resource_version),
            ..ObjectMeta::default()
        }
    }
}

/// `text`, cut to [`MAX_STRING`] bytes at a character boundary.
pub(crate) fn bounded(text: &str) -> String {
    if text.len() <= MAX_STRING {
        return text.to_owned();
    }
    let mut end = MAX_STRING;
    while !text.is_char_boundary(end) {
        end = end.saturating_sub(1);
    }
    text.get(..end).unwrap_or_default().to_owned()
}
