//! What a hostile registry sends, scripted on a [`FakeRegistry`]: huge strings in platform
//! fields, nested fan-out of platform-less indexes, a redirect to another host that challenges
//! with its own Bearer realm. (Absurd `Retry-After`, slow answers and redirects to any URL, e.g.
//! HTTPS to plain HTTP, are plain behaviors: [`Behavior::retry_after`], [`Behavior::delayed`],
//! [`Behavior::redirect`].)

use std::sync::Arc;

use bytes::Bytes;
use serde_json::json;

use super::{manifest_path, Behavior, FakeRegistry};
use crate::media_types::{OCI_INDEX, OCI_MANIFEST};
use crate::push::sha256_digest;

/// Makes a fresh [`Behavior`] for each request (see [`Behavior::generated`]).
#[derive(Clone)]
pub struct Generator(pub(crate) Arc<dyn Fn() -> Behavior + Send + Sync>);

impl std::fmt::Debug for Generator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Generator")
    }
}

impl Behavior {
    /// Builds the answer when a request arrives (large bodies are then never held by the fake
    /// between requests: a memory measurement sees the client's memory, not the script's).
    pub fn generated(make: impl Fn() -> Behavior + Send + Sync + 'static) -> Self {
        Self::Generated(Generator(Arc::new(make)))
    }

    /// An OCI index (200, correct digest header) with one entry whose platform `field`
    /// (`architecture`, `os`, `variant`, `os.version`) is `len` bytes of `a`, prefixed with
    /// `seed` so every index holds a different string. Built per request.
    pub fn huge_platform_index(field: &str, len: usize, seed: u64) -> Self {
        let field = field.to_owned();
        Self::generated(move || {
            // Written by hand: building a serde_json value of megabytes is slow in debug builds.
            let digest = sha256_digest(&seed.to_be_bytes());
            let mut platform = vec![
                ("os", "linux".to_owned()),
                ("architecture", "amd64".to_owned()),
            ];
            let mut value = format!("{seed:08}");
            value.push_str(&"a".repeat(len.saturating_sub(value.len())));
            platform.retain(|(name, _)| *name != field);
            let mut body = format!(
                r#"{{"schemaVersion":2,"mediaType":"{OCI_INDEX}","manifests":[{{"mediaType":"{OCI_MANIFEST}","digest":"{digest}","size":1,"platform":{{"#
            );
            for (name, known) in &platform {
                body.push_str(&format!(r#""{name}":"{known}","#));
            }
            body.push_str(&format!(r#""{field}":"{value}"}}}}]}}"#));
            // No `Docker-Content-Digest`: hashing megabytes is slow in debug builds too, and a
            // client fetching by tag has nothing to compare it with.
            Behavior::body(200, OCI_INDEX, Bytes::from(body))
        })
    }
}

/// Digests and counts of a fan-out scripted by [`FakeRegistry::script_fan_out`].
#[derive(Debug, Clone)]
pub struct FanOut {
    /// Indexes scripted in all, the top one included (what a client fetching every entry
    /// would GET).
    pub indexes: usize,
}

impl FakeRegistry {
    /// Scripts `repository:tag` as a tree of OCI indexes `depth` levels deep below the top,
    /// each holding `width` distinct entries without a platform (so a client must fetch them to
    /// learn anything); the leaves list `linux/amd64`. Every child is routed by digest.
    /// `width = 8, depth = 4` is the shape that cost a naive client 8,776 requests.
    pub fn script_fan_out(
        &self,
        repository: &str,
        tag: &str,
        width: usize,
        depth: usize,
    ) -> FanOut {
        let mut indexes = 0;
        let top = self.fan_out_node(repository, width, depth, "top", &mut indexes);
        self.route(
            &manifest_path(repository, tag),
            Behavior::manifest(OCI_INDEX, top),
        );
        FanOut {
            indexes: indexes + 1,
        }
    }

    /// The body of one node; its children are routed by digest.
    fn fan_out_node(
        &self,
        repository: &str,
        width: usize,
        depth: usize,
        name: &str,
        indexes: &mut usize,
    ) -> Vec<u8> {
        let manifests: Vec<_> = if depth == 0 {
            vec![json!({
                "mediaType": OCI_MANIFEST,
                "digest": sha256_digest(name.as_bytes()),
                "size": 1,
                "platform": {"os": "linux", "architecture": "amd64"},
            })]
        } else {
            (0..width)
                .map(|i| {
                    let child_name = format!("{name}.{i}");
                    let child =
                        self.fan_out_node(repository, width, depth - 1, &child_name, indexes);
                    let digest = sha256_digest(&child);
                    let size = child.len();
                    self.route(
                        &manifest_path(repository, &digest),
                        Behavior::manifest(OCI_INDEX, child),
                    );
                    *indexes += 1;
                    json!({"mediaType": OCI_INDEX, "digest": digest, "size": size})
                })
                .collect()
        };
        json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "annotations": {"org.opencontainers.image.ref.name": name},
            "manifests": manifests,
        })
        .to_string()
        .into_bytes()
    }

    /// Scripts `repository:tag` on the main listener as a redirect to the other listener
    /// (another host), which answers 401 with its own Bearer realm (on the other listener,
    /// `/foreign/token`, which would hand out a token). Returns the realm's path: a client that
    /// takes the other host's challenge as the registry's asks it for a token.
    pub fn script_foreign_challenge(&self, repository: &str, tag: &str) -> String {
        let moved = format!("/foreign/{repository}/manifests/{tag}");
        let realm = "/foreign/token".to_owned();
        self.route(
            &manifest_path(repository, tag),
            Behavior::redirect_to_other(&moved),
        );
        self.route(
            &moved,
            Behavior::bearer_challenge(&format!("{}{realm}", self.other_base_url()), "foreign"),
        );
        self.route(
            &realm,
            Behavior::json(200, &json!({"token": "foreign-token", "expires_in": 300})),
        );
        realm
    }
}
