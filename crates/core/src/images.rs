//! A pod's images: the one reading of a pod's container lists (containers, init containers,
//! image volumes, ephemeral containers) that the admission, the controllers and the CLI share.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// Where an image comes from (step 3 in docs/architecture.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    /// A container or init container: it runs on the node's CPU.
    Container,
    /// An image volume (`spec.volumes[].image.reference`): an OCI artifact without a platform
    /// constrains nothing.
    Volume,
}

/// Distinct images are found by a linear scan up to this many, by a set past it.
const SCAN_UP_TO: usize = 8;

/// The non-null array member `key` of `value`, or an empty slice.
fn array<'v>(value: &'v Value, key: &str) -> &'v [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The images of a raw pod `spec` that decide its placement: `containers`, `initContainers` and
/// image volumes (not ephemeral containers), empty strings dropped, duplicates removed (a
/// container's image stays a container image), in order of appearance.
pub fn of_spec(spec: &Value) -> Vec<(&str, ImageKind)> {
    let containers = ["containers", "initContainers"]
        .into_iter()
        .flat_map(|list| array(spec, list))
        .filter_map(|c| c.get("image").and_then(Value::as_str))
        .map(|image| (image, ImageKind::Container));
    let volumes = array(spec, "volumes")
        .iter()
        .filter_map(|v| v.get("image")?.get("reference")?.as_str())
        .map(|image| (image, ImageKind::Volume));
    let mut images: Vec<(&str, ImageKind)> = Vec::new();
    // Pods are written by anyone who may create one: no quadratic scan over long lists. A
    // linear scan while there are few images (most pods have one to three), a set past that.
    let mut seen: Option<std::collections::HashSet<&str>> = None;
    for (image, kind) in containers.chain(volumes) {
        if image.is_empty() {
            continue;
        }
        let new = match &mut seen {
            Some(seen) => seen.insert(image),
            None if images.len() < SCAN_UP_TO => images.iter().all(|(i, _)| *i != image),
            None => {
                let mut set: std::collections::HashSet<&str> =
                    images.iter().map(|(i, _)| *i).collect();
                let new = set.insert(image);
                seen = Some(set);
                new
            }
        };
        if new {
            images.push((image, kind));
        }
    }
    images
}

/// The images of the ephemeral containers `pod` has and `old` (the pod before the update) had
/// not, by container name; each once, empty strings dropped.
pub fn ephemeral<'p>(pod: &'p Value, old: Option<&Value>) -> Vec<&'p str> {
    let containers = |pod: &'p Value| {
        pod.get("spec")
            .map(|s| array(s, "ephemeralContainers"))
            .unwrap_or_default()
    };
    let before: Vec<&str> = old
        .and_then(|o| o.get("spec"))
        .map(|s| array(s, "ephemeralContainers"))
        .unwrap_or_default()
        .iter()
        .filter_map(|c| c.get("name").and_then(Value::as_str))
        .collect();
    let mut images: Vec<&'p str> = Vec::new();
    for container in containers(pod) {
        let name = container.get("name").and_then(Value::as_str);
        if name.is_some_and(|n| before.contains(&n)) {
            continue;
        }
        let Some(image) = container.get("image").and_then(Value::as_str) else {
            continue;
        };
        if !image.is_empty() && !images.contains(&image) {
            images.push(image);
        }
    }
    images
}

/// Every image a raw pod names, ephemeral containers included, sorted, each once.
pub fn named(pod: &Value) -> Vec<&str> {
    let Some(spec) = pod.get("spec") else {
        return Vec::new();
    };
    let mut images: Vec<&str> = of_spec(spec).into_iter().map(|(i, _)| i).collect();
    images.extend(ephemeral(pod, None));
    images.sort_unstable();
    images.dedup();
    images
}

/// `null` reads as the default, like a missing field.
fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A container as a reflector that trims objects deserializes it: its image only.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Container {
    #[serde(default, deserialize_with = "nullable")]
    image: String,
}

impl From<String> for Container {
    /// A container of this image (a reflector that reads more of a container builds it).
    fn from(image: String) -> Self {
        Self { image }
    }
}

/// A volume as a reflector that trims objects deserializes it: its image reference only.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Volume {
    #[serde(default, deserialize_with = "nullable")]
    image: VolumeImage,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct VolumeImage {
    #[serde(default, deserialize_with = "nullable")]
    reference: String,
}

/// [`of_spec`] over deserialized lists: the images of `containers`, `init_containers` and
/// `volumes`, empty ones dropped, each once, in order, at most `max`; `true` when more were
/// left out.
pub fn distinct(
    containers: Vec<Container>,
    init_containers: Vec<Container>,
    volumes: Vec<Volume>,
    max: usize,
) -> (Vec<String>, bool) {
    let written = containers
        .into_iter()
        .chain(init_containers)
        .map(|container| container.image)
        .chain(volumes.into_iter().map(|volume| volume.image.reference))
        .filter(|image| !image.is_empty());
    let mut images: Vec<String> = Vec::new();
    for image in written {
        if images.contains(&image) {
            continue;
        }
        if images.len() == max {
            return (images, true);
        }
        images.push(image);
    }
    (images, false)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_readings_agree() {
        let spec = json!({
            "initContainers": [{"image": "init:1"}, {"image": null}],
            "containers": [{"image": "app:1"}, {"image": ""}, {"image": "init:1"}, {}],
            "volumes": [{"image": {"reference": "model:1"}}, {"name": "empty"}, {"image": null}],
            "ephemeralContainers": [{"name": "debug", "image": "debug:1"}]
        });
        let raw: Vec<&str> = of_spec(&spec).into_iter().map(|(i, _)| i).collect();
        assert_eq!(raw, ["app:1", "init:1", "model:1"]);
        assert_eq!(of_spec(&spec)[2].1, ImageKind::Volume);
        let list = |key: &str| spec[key].clone();
        let (typed, cut) = distinct(
            serde_json::from_value(list("containers")).unwrap(),
            serde_json::from_value(list("initContainers")).unwrap(),
            serde_json::from_value(list("volumes")).unwrap(),
            8,
        );
        assert_eq!(typed, raw);
        assert!(!cut);
        let (two, cut) = distinct(
            serde_json::from_value(list("containers")).unwrap(),
            serde_json::from_value(list("initContainers")).unwrap(),
            serde_json::from_value(list("volumes")).unwrap(),
            2,
        );
        assert_eq!((two.len(), cut), (2, true));
        let pod = json!({"spec": spec});
        assert_eq!(named(&pod), ["app:1", "debug:1", "init:1", "model:1"]);
        assert_eq!(ephemeral(&pod, Some(&pod)), Vec::<&str>::new());
        assert_eq!(ephemeral(&pod, None), ["debug:1"]);
    }
}
