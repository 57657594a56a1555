//! Image selection by compatibility artifacts, before the decision (docs/architecture.md,
//! "Image selection"): the I/O around `noe_core::selection` — the artifact from the registry with
//! the pod's credentials, the nodes from a [`NodeSource`], the namespace's opt-in — turned into
//! a [`Selected`] the admission applies before it decides on the (new) images.
//!
//! - Explicit (ocifit-k8s): pod label `oci.image.compatibilities.selection/enabled: "true"`.
//!   Every failure denies, naming its cause.
//! - Discovered (NFD): in opted-in namespaces (or everywhere), the NFD artifact attached to each
//!   image. A failure leaves the pod unchanged with a warning, unless the pod's annotation
//!   `arch.noe.adevinta.com/image-compatibility: require` makes it deny.

pub mod opt_in;

use std::sync::Arc;

use futures::future::BoxFuture;
use noe_core::decide::SKIP_LABEL;
use noe_core::patch::Op;
use noe_core::selection::choose::{already_selected, discovered_patch, explicit_patch};
use noe_core::selection::{
    candidates, choose, constrain, Format, NodeFacts, SelectionError, Spec, DEFAULT_TARGET_IMAGE,
    DISCOVERY_KEY, DISCOVERY_REQUIRE, ENABLED_LABEL, IMAGE_REF_ANNOTATION, MODEL_ANNOTATION,
    NFD_ARTIFACT_TYPE, NFD_MEDIA_TYPE, OCIFIT_MEDIA_TYPE, TARGET_IMAGE_ANNOTATION,
};
use noe_registry::artifacts::{Artifacts, Fetched, Specs};
use noe_registry::Resolver;
use serde_json::Value;

use crate::resolve::credentials::CredentialSource;
use crate::resolve::one_line;
use crate::resolve::pull_secrets::image_pull_secret_names;

/// Images of one pod asked for NFD artifacts (further ones are not).
pub const MAX_DISCOVERED_IMAGES: usize = 32;

/// The cluster's nodes as the evaluation sees them.
pub trait NodeSource: Send + Sync + 'static {
    /// Every node (labels, NFD features when known); `None` until they are known.
    fn nodes(&self) -> Option<Vec<NodeFacts>>;
}

/// A fixed list of nodes (`noe explain --nodes`, tests).
#[derive(Clone, Debug, Default)]
pub struct StaticNodes(pub Vec<NodeFacts>);

impl NodeSource for StaticNodes {
    fn nodes(&self) -> Option<Vec<NodeFacts>> {
        Some(self.0.clone())
    }
}

/// Whether a namespace opted in to discovered selection.
pub trait NamespaceOptIn: Send + Sync + 'static {
    /// `Some(true)` when `namespace` carries `arch.noe.adevinta.com/image-compatibility:
    /// enabled`; `None` when that cannot be read now.
    fn enabled<'a>(&'a self, namespace: &'a str) -> BoxFuture<'a, Option<bool>>;
}

/// Where discovered selection runs.
#[derive(Clone, Default)]
pub enum Discovery {
    /// Nowhere.
    #[default]
    Off,
    /// In namespaces that opted in.
    Labelled(Arc<dyn NamespaceOptIn>),
    /// In every namespace.
    Everywhere,
}

/// What selection asks of the admission.
#[derive(Clone, Debug, PartialEq)]
pub enum Selected {
    /// Nothing: decide on the pod as it is.
    Skip,
    /// Apply `ops` to the pod, then decide on the result.
    Patch {
        /// The selection's operations.
        ops: Vec<Op>,
    },
    /// Decide on the pod as it is, and warn.
    Warn(String),
    /// Deny the pod.
    Deny(String),
}

/// Image selection, configured.
#[derive(derive_more::Debug)]
#[debug("Selection {{ artifacts: {artifacts:?}, .. }}")]
pub struct Selection {
    artifacts: Artifacts,
    specs: Specs,
    resolver: Resolver,
    credentials: Arc<dyn CredentialSource>,
    nodes: Arc<dyn NodeSource>,
    discovery: Discovery,
}

fn label<'p>(pod: &'p Value, key: &str) -> Option<&'p str> {
    pod.pointer("/metadata/labels")?.get(key)?.as_str()
}

fn annotation<'p>(pod: &'p Value, key: &str) -> Option<&'p str> {
    pod.pointer("/metadata/annotations")?.get(key)?.as_str()
}

/// The message of a failed explicit selection.
fn explicit_failed(reference: &str, cause: impl std::fmt::Display) -> Selected {
    Selected::Deny(format!(
        "image selection by compatibility artifact {reference}: {cause}"
    ))
}

impl Selection {
    /// Selection with artifacts fetched through `resolver` and `credentials`, evaluated
    /// against `nodes`; discovered selection where `discovery` says.
    pub fn new(
        resolver: Resolver,
        credentials: Arc<dyn CredentialSource>,
        nodes: Arc<dyn NodeSource>,
        discovery: Discovery,
    ) -> Self {
        Self {
            artifacts: Artifacts::new(resolver.clone()),
            specs: Specs::default(),
            resolver,
            credentials,
            nodes,
            discovery,
        }
    }

    /// Absences of NFD artifacts are kept `ttl` rather than
    /// [`noe_registry::artifacts::NEGATIVE_TTL`] (`--image-compatibility-negative-ttl`).
    #[must_use]
    pub fn with_negative_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.artifacts = Artifacts::with_negative_ttl(self.resolver.clone(), ttl);
        self
    }

    /// What to do for `pod`, being created in `namespace`. The caller bounds the time.
    pub async fn select(&self, pod: &Value, namespace: &str) -> Selected {
        if label(pod, SKIP_LABEL) == Some("true") || already_selected(pod) {
            return Selected::Skip;
        }
        if label(pod, ENABLED_LABEL) == Some("true") {
            return self.explicit(pod, namespace).await;
        }
        let discover = match &self.discovery {
            Discovery::Off => false,
            Discovery::Everywhere => true,
            Discovery::Labelled(opt_in) => opt_in.enabled(namespace).await.unwrap_or(false),
        };
        if discover {
            self.discovered(pod, namespace).await
        } else {
            Selected::Skip
        }
    }

    /// `evaluate` with the candidate nodes of `pod`, on the blocking pool (image selection's
    /// CPU work never runs on the async workers).
    async fn on_candidates<T: Send + 'static>(
        &self,
        pod: &Value,
        evaluate: impl FnOnce(&Value, &[&NodeFacts]) -> Result<T, SelectionError> + Send + 'static,
    ) -> Result<T, SelectionError> {
        let nodes = self.nodes.nodes().unwrap_or_default();
        let pod = pod.clone();
        self.specs
            .blocking(move || {
                let admitted = candidates(&pod, &nodes);
                if admitted.is_empty() {
                    return Err(SelectionError::NoCandidates);
                }
                evaluate(&pod, &admitted)
            })
            .await?
    }

    async fn explicit(&self, pod: &Value, namespace: &str) -> Selected {
        if annotation(pod, MODEL_ANNOTATION).is_some() {
            return Selected::Deny(format!(
                "{MODEL_ANNOTATION} (ocifit-k8s's model-based selection) is not supported"
            ));
        }
        let Some(reference) = annotation(pod, IMAGE_REF_ANNOTATION).filter(|r| !r.is_empty())
        else {
            return Selected::Deny(format!(
                "{ENABLED_LABEL} is \"true\" but the annotation {IMAGE_REF_ANNOTATION} is missing"
            ));
        };
        let target = annotation(pod, TARGET_IMAGE_ANNOTATION).unwrap_or(DEFAULT_TARGET_IMAGE);
        let secrets = pod
            .get("spec")
            .map(image_pull_secret_names)
            .unwrap_or_default();
        let pod_secrets = self.credentials.pod(namespace, &secrets).await;
        let routed = match self.resolver.routed(reference).await {
            Ok(routed) => routed,
            Err(error) => return explicit_failed(reference, one_line(&error)),
        };
        let credentials = self
            .credentials
            .candidates(namespace, &secrets, &pod_secrets, &routed)
            .await;
        let fetched = match self
            .artifacts
            .explicit(&routed, OCIFIT_MEDIA_TYPE, &credentials, pod_secrets.scope)
            .await
        {
            Ok(fetched) => fetched,
            Err(error) => return explicit_failed(reference, one_line(&error)),
        };
        let spec = match self.specs.compile(&fetched, Format::Ocifit).await {
            Ok(spec) => spec,
            Err(error) => return explicit_failed(reference, error),
        };
        let (target, digest) = (target.to_owned(), fetched.digest.clone());
        let chosen = self
            .on_candidates(pod, move |pod, nodes| {
                let choice = choose(pod, &spec, nodes)?;
                explicit_patch(pod, &choice, &target, &digest)
            })
            .await;
        match chosen {
            Ok(ops) => Selected::Patch { ops },
            Err(error) => explicit_failed(reference, error),
        }
    }

    async fn discovered(&self, pod: &Value, namespace: &str) -> Selected {
        let require = annotation(pod, DISCOVERY_KEY) == Some(DISCOVERY_REQUIRE);
        let failed = |cause: String| {
            let message = format!("image compatibility: {cause}");
            if require {
                Selected::Deny(message)
            } else {
                Selected::Warn(format!("{message}; the pod is not constrained by it"))
            }
        };
        let Some(spec) = pod.get("spec") else {
            return Selected::Skip;
        };
        let mut images: Vec<&str> = compat_images(spec);
        images.truncate(MAX_DISCOVERED_IMAGES);
        let secrets = image_pull_secret_names(spec);
        let pod_secrets = self.credentials.pod(namespace, &secrets).await;
        let lookups = images.iter().map(|image| {
            let secrets = &secrets;
            let pod_secrets = &pod_secrets;
            async move {
                let routed = self.resolver.routed(image).await?;
                let credentials = self
                    .credentials
                    .candidates(namespace, secrets, pod_secrets, &routed)
                    .await;
                let resolution = self
                    .resolver
                    .resolve_routed(&routed, pod_secrets.scope, &credentials)
                    .await?;
                // An image answered by --platform-overrides has no digest to ask about.
                if !resolution.digest.starts_with("sha256:") {
                    return Ok((*image, None));
                }
                self.artifacts
                    .discovered(
                        &routed,
                        &resolution.digest,
                        noe_registry::manifest::is_index(&resolution.media_type),
                        NFD_ARTIFACT_TYPE,
                        NFD_MEDIA_TYPE,
                        &credentials,
                        pod_secrets.scope,
                    )
                    .await
                    .map(|found| (*image, Some(found)))
            }
        });
        let results = futures::future::join_all(lookups).await;
        let mut specs = Vec::new();
        let mut digests = Vec::new();
        for result in results {
            match result {
                Ok((_, None)) => {}
                Ok((_, Some(found))) if found.is_empty() => {}
                Ok((image, Some(found))) => match self.image_spec(&found).await {
                    Ok(spec) => {
                        specs.push(spec);
                        digests.extend(found.iter().map(|f| f.digest.clone()));
                    }
                    Err(error) => return failed(format!("{image}: {error}")),
                },
                Err(error) => return failed(one_line(&error)),
            }
        }
        if specs.is_empty() {
            return if require {
                Selected::Deny("image compatibility: no image has a compatibility artifact".into())
            } else {
                Selected::Skip
            };
        }
        let constrained = self
            .on_candidates(pod, move |pod, nodes| {
                let spec_refs: Vec<&Spec> = specs.iter().map(|s| &**s).collect();
                let constraint = constrain(pod, &spec_refs, nodes)?;
                let digests: Vec<&str> = digests.iter().map(String::as_str).collect();
                Ok(discovered_patch(pod, &constraint, &digests))
            })
            .await;
        match constrained {
            Ok(ops) => Selected::Patch { ops },
            Err(error) => failed(error.to_string()),
        }
    }

    /// One image's spec from its artifacts, each compiled once per spec digest
    /// ([`image_spec`]).
    async fn image_spec(&self, found: &[Fetched]) -> Result<Arc<Spec>, SelectionError> {
        let mut compiled = Vec::with_capacity(found.len());
        for fetched in found {
            let spec = self.specs.compile(fetched, Format::Nfd).await?;
            compiled.push((spec, fetched.platform.as_ref()));
        }
        image_spec(compiled)
    }
}

/// A compiled spec, and the `(os, architecture)` of the platform manifest its artifact is
/// attached to (`None`: the image's own).
type PlatformSpec<'f> = (Arc<Spec>, Option<&'f (String, String)>);

/// One image's spec from its artifacts' specs: the image's own (shared as compiled), or one per
/// platform manifest (each set then holding only on that platform's nodes).
fn image_spec(compiled: Vec<PlatformSpec<'_>>) -> Result<Arc<Spec>, SelectionError> {
    if let [(spec, None)] = compiled.as_slice() {
        return Ok(spec.clone());
    }
    let specs = compiled
        .into_iter()
        .map(|(spec, platform)| {
            let spec = Spec::clone(&spec);
            match platform {
                Some((os, arch)) => spec.on_platform(os, arch),
                None => Ok(spec),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Spec::union(specs).map(Arc::new)
}

/// The images of containers and init containers, each once.
fn compat_images(spec: &Value) -> Vec<&str> {
    let mut images: Vec<&str> = noe_core::images::of_spec(spec)
        .into_iter()
        .filter(|(_, kind)| !matches!(kind, noe_core::images::ImageKind::Volume))
        .map(|(image, _)| image)
        .collect();
    images.sort_unstable();
    images.dedup();
    images
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use noe_core::selection::Tri;

    use super::*;

    fn parsed(major: &str) -> Arc<Spec> {
        let spec = format!(
            "version: v1alpha1\ncompatibilities:\n- rules:\n  - name: r\n    matchFeatures:\n    - feature: kernel.version\n      matchExpressions:\n        major: {{op: In, value: [\"{major}\"]}}\n"
        );
        Arc::new(Spec::parse_nfd(spec.as_bytes()).unwrap())
    }

    fn node(arch: &str, major: &str) -> NodeFacts {
        NodeFacts {
            name: arch.into(),
            labels: [
                ("kubernetes.io/os", "linux"),
                ("kubernetes.io/arch", arch),
                ("feature.node.kubernetes.io/kernel-version.major", major),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect::<std::collections::BTreeMap<_, _>>()
            .into(),
            features: None,
            schedulable: true,
        }
    }

    /// Artifacts of an image's platform manifests: each set holds only on its platform's nodes.
    #[test]
    fn platform_artifacts_hold_on_their_platform_only() {
        let (amd64, arm64) = (
            ("linux".to_owned(), "amd64".to_owned()),
            ("linux".to_owned(), "arm64".to_owned()),
        );
        let spec = image_spec(vec![
            (parsed("5"), Some(&amd64)),
            (parsed("6"), Some(&arm64)),
        ])
        .unwrap();
        let holds = |n: &NodeFacts| spec.sets.iter().any(|s| s.rule.eval(n) == Tri::True);
        assert!(holds(&node("amd64", "5")));
        assert!(holds(&node("arm64", "6")));
        assert!(
            !holds(&node("amd64", "6")),
            "the arm64 set on an amd64 node"
        );
        assert!(!holds(&node("arm64", "5")));
        // The image's own artifact holds on any platform.
        let own = image_spec(vec![(parsed("5"), None)]).unwrap();
        assert_eq!(own.sets[0].rule.eval(&node("arm64", "5")), Tri::True);
    }
}
