//! Compatibility artifacts as `oras push` and `oras attach` lay them out: an explicit
//! ocifit-k8s artifact (a tagged manifest with the spec as its layer) and NFD artifacts
//! attached to an image (`artifactType`, the empty config, a `subject`), pushed to a registry
//! without the referrers API the way a client falls back: the artifact manifest by digest
//! first, then the `sha256-<hex>` index listing it (the CNCF registry answers 400
//! `MANIFEST_BLOB_UNKNOWN` to an index naming a manifest it does not hold). Also the bodies a
//! referrers-capable registry answers, for the fake.

use anyhow::{bail, Context as _};
use serde_json::{json, Value};

use crate::image::media_types::{OCI_INDEX, OCI_MANIFEST};
use crate::push::{sha256_digest, Pusher};
use crate::{Behavior, FakeRegistry, OCI_EMPTY};

/// `artifactType` of NFD image-compatibility artifacts.
pub const NFD_ARTIFACT_TYPE: &str = "application/vnd.nfd.image-compatibility.v1alpha1";
/// Layer media type of NFD's spec.
pub const NFD_SPEC_TYPE: &str = "application/vnd.nfd.image-compatibility.spec.v1alpha1+yaml";
/// Layer media type of ocifit-k8s's spec.
pub const OCIFIT_SPEC_TYPE: &str = "application/vnd.oci.image.compatibilities.v1+json";
/// `artifactType` `oras push` writes when none is given.
pub const ORAS_DEFAULT_ARTIFACT_TYPE: &str = "application/vnd.unknown.artifact.v1";

/// A hostile NFD spec inside every byte bound: 512 `InRegexp` expressions of 64 patterns each
/// (YAML, single-quoted: about 240 KB for two-character patterns); `pattern(i)` is the i-th.
pub fn nfd_regex_spec(pattern: impl Fn(usize) -> String) -> String {
    let mut spec = String::from("version: v1alpha1\ncompatibilities:\n- rules:\n");
    for rule in 0..32 {
        spec.push_str(&format!("  - name: r{rule}\n    matchFeatures:\n"));
        for term in 0..16 {
            let values: Vec<String> = (0..64)
                .map(|v| format!("'{}'", pattern((rule * 16 + term) * 64 + v)))
                .collect();
            spec.push_str(&format!(
                "    - feature: kernel.version\n      matchExpressions: {{e{term}: {{op: InRegexp, value: [{}]}}}}\n",
                values.join(",")
            ));
        }
    }
    spec
}

/// A hostile NFD spec nested `depth` levels deep in flow sequences (2 bytes a level): as the
/// spec's `compatibilities`, or (`in_value`) inside an expression's `value`.
pub fn nfd_nested_spec(depth: usize, in_value: bool) -> String {
    let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    if in_value {
        format!(
            "version: v1alpha1\ncompatibilities:\n- rules:\n  - matchFeatures:\n    - feature: kernel.version\n      matchExpressions:\n        major: {{op: In, value: {nested}}}\n"
        )
    } else {
        format!("version: v1alpha1\ncompatibilities: {nested}\n")
    }
}

/// An artifact manifest built in memory.
#[derive(Debug, Clone)]
pub struct CompatArtifact {
    /// Its bytes.
    pub manifest: Vec<u8>,
    /// Its digest.
    pub digest: String,
    /// The spec layer.
    pub spec: Vec<u8>,
    /// Its index entry (`artifactType` and the manifest's annotations copied, as the referrers
    /// API lists it).
    pub entry: Value,
}

/// An artifact of `artifact_type` whose one layer is `spec` of `layer_type`, referring to
/// `subject` (`(media type, digest, size)`) when given, created at `created`
/// (`org.opencontainers.image.created`) when given.
pub fn compat_artifact(
    artifact_type: &str,
    layer_type: &str,
    spec: &[u8],
    subject: Option<(&str, &str, usize)>,
    created: Option<&str>,
) -> CompatArtifact {
    let config = b"{}";
    let mut manifest = json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": artifact_type,
        "config": {"mediaType": OCI_EMPTY, "digest": sha256_digest(config), "size": config.len()},
        "layers": [{"mediaType": layer_type, "digest": sha256_digest(spec), "size": spec.len()}],
    });
    if let Some((media_type, digest, size)) = subject {
        manifest["subject"] = json!({"mediaType": media_type, "digest": digest, "size": size});
    }
    if let Some(created) = created {
        manifest["annotations"] = json!({"org.opencontainers.image.created": created});
    }
    let bytes = manifest.to_string().into_bytes();
    let digest = sha256_digest(&bytes);
    let mut entry = json!({"mediaType": OCI_MANIFEST, "digest": digest, "size": bytes.len(), "artifactType": artifact_type});
    if let Some(annotations) = manifest.get("annotations") {
        entry["annotations"] = annotations.clone();
    }
    CompatArtifact {
        manifest: bytes,
        digest,
        spec: spec.to_vec(),
        entry,
    }
}

/// An OCI index listing `entries` (a referrers response or a fallback index).
pub fn referrers_index(entries: &[Value]) -> Vec<u8> {
    json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries})
        .to_string()
        .into_bytes()
}

/// The fallback tag of `digest` (`sha256:<hex>` → `sha256-<hex>`).
pub fn fallback_tag(digest: &str) -> String {
    digest.replacen(':', "-", 1)
}

/// Pushes the blobs and the manifest of `artifact` to `repository` (by digest, or by `tag`).
pub async fn push_artifact(
    pusher: &Pusher,
    repository: &str,
    artifact: &CompatArtifact,
    tag: Option<&str>,
) -> anyhow::Result<()> {
    pusher.push_blob(repository, b"{}").await?;
    pusher.push_blob(repository, &artifact.spec).await?;
    pusher
        .push_manifest(
            repository,
            tag.unwrap_or(&artifact.digest),
            OCI_MANIFEST,
            &artifact.manifest,
        )
        .await?;
    Ok(())
}

/// `oras attach` against a registry without the referrers API: the artifact, then the
/// fallback index of `subject` with `entries` (the earlier ones, which a client reads first
/// and keeps) and the artifact's entry.
pub async fn attach(
    pusher: &Pusher,
    repository: &str,
    subject: &str,
    artifact: &CompatArtifact,
    earlier: &[Value],
) -> anyhow::Result<()> {
    push_artifact(pusher, repository, artifact, None).await?;
    let mut entries = earlier.to_vec();
    entries.push(artifact.entry.clone());
    pusher
        .push_manifest(
            repository,
            &fallback_tag(subject),
            OCI_INDEX,
            &referrers_index(&entries),
        )
        .await
        .context("pushing the fallback index")?;
    Ok(())
}

impl FakeRegistry {
    /// Scripts a referrers-capable registry's answer for `subject` in `repository`: `pages` of
    /// entries, each answered in turn with a `Link` to the next (the path is the same, so the
    /// pages are a sequence); `filtered` adds `OCI-Filters-Applied: artifactType`. Also scripts
    /// each artifact's manifest and spec blob.
    pub fn script_referrers(
        &self,
        repository: &str,
        subject: &str,
        pages: &[Vec<&CompatArtifact>],
        filtered: bool,
    ) -> anyhow::Result<()> {
        if pages.is_empty() {
            bail!("no page");
        }
        let path = format!("/v2/{repository}/referrers/{subject}");
        let mut answers = Vec::new();
        for (i, page) in pages.iter().enumerate() {
            let entries: Vec<Value> = page.iter().map(|a| a.entry.clone()).collect();
            let mut answer = Behavior::body(200, OCI_INDEX, referrers_index(&entries));
            if filtered {
                answer = answer.with_header("oci-filters-applied", "artifactType");
            }
            if i + 1 < pages.len() {
                answer =
                    answer.with_header("link", &format!("<{path}?n=1&last={i}>; rel=\"next\""));
            }
            answers.push(answer);
            for artifact in page {
                self.script_manifest(
                    repository,
                    &artifact.digest,
                    OCI_MANIFEST,
                    &artifact.manifest,
                );
                self.script_blob(repository, &artifact.spec);
            }
        }
        self.route(&path, Behavior::Sequence(answers));
        Ok(())
    }
}
