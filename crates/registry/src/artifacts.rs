//! Compatibility artifacts from registries (docs/architecture.md, "Image selection"): the
//! explicit artifact a pod names (ocifit-k8s), and the NFD artifact attached to an image,
//! found through the OCI referrers API or, on a 404, its `sha256-<hex>` fallback tag (most
//! registries, the CNCF registry among them, have no referrers API; that is remembered per
//! registry). [`Artifacts`] caches answers and coalesces concurrent loads; the fetch itself is
//! the resolver's (hosts, proxies, mirrors, credentials, TLS, the address guard, the throttle),
//! in `resolver/artifact_step.rs`. What is read is bounded: the referrers index and the fallback index
//! [`MAX_INDEX_BYTES`], an artifact manifest [`MAX_MANIFEST_BYTES`], the spec
//! [`MAX_SPEC_BYTES`] (descriptor sizes checked before the GET, bodies digest-verified).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use serde::Deserialize;
use url::Url;

use noe_core::selection::{Format, SelectionError, Spec};

use crate::cache::Scope;
use crate::{Error, Resolver, Routed};
use noe_credentials::CredentialCandidate;

/// Bytes of a referrers response or fallback index.
pub const MAX_INDEX_BYTES: usize = 256 * 1024;
/// Bytes of an artifact manifest.
pub const MAX_MANIFEST_BYTES: usize = 64 * 1024;
/// Bytes of a spec layer.
pub const MAX_SPEC_BYTES: usize = noe_core::selection::limits::SPEC_BYTES;
/// Referrers pages read (the first and `Link` pages after it).
pub const MAX_PAGES: usize = 3;
/// Referrers considered per subject (further entries are ignored).
pub const MAX_REFERRERS: usize = 256;
/// Artifact manifests fetched per subject before giving up (a referrer whose `subject` is not
/// the image is skipped).
pub const MAX_ATTEMPTS: usize = 3;
/// Platform manifests of an index asked for referrers when the index itself has none (an
/// artifact may be attached to one platform's manifest rather than to the index).
pub const MAX_PLATFORM_SUBJECTS: usize = 8;
/// Registries remembered as lacking the referrers API.
const MAX_REMEMBERED: usize = 1024;
/// How long an artifact found is kept.
pub const TTL: Duration = Duration::from_secs(60);
/// How long the absence of an artifact is kept by default (shorter than [`TTL`]: an artifact
/// attached since is seen sooner); `--image-compatibility-negative-ttl`.
pub const NEGATIVE_TTL: Duration = Duration::from_secs(10);
/// The longest negative TTL accepted.
pub const MAX_NEGATIVE_TTL: Duration = Duration::from_secs(3600);
/// Answers kept.
const MAX_ENTRIES: u64 = 10_000;

/// The OCI index media type (referrers responses and fallback indexes).
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// The creation annotation NFD reads.
pub const CREATED: &str = "org.opencontainers.image.created";
/// The spelling of [`CREATED`] NFD's documentation (and the image-spec example) use.
pub const CREATED_ALT: &str = "oci.opencontainers.image.created";

/// An artifact read from a registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    /// The artifact manifest's digest.
    pub digest: String,
    /// The spec layer's media type.
    pub media_type: String,
    /// The spec layer's digest (its bytes verified against it).
    pub spec_digest: String,
    /// The spec.
    pub spec: Bytes,
    /// `(os, architecture)` when the artifact is attached to that platform's manifest of a
    /// multi-platform image rather than to the image itself: its sets hold only there.
    pub platform: Option<(String, String)>,
}

/// The fallback tag of a digest: `<alg>-<hex>`, the algorithm truncated to 32 characters and
/// the encoded part to 64, characters a tag may not hold replaced by `-`.
pub fn fallback_tag(digest: &str) -> Option<String> {
    let (alg, hex) = digest.split_once(':')?;
    let clean = |s: &str, n: usize| -> String {
        s.chars()
            .take(n)
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    };
    Some(format!("{}-{}", clean(alg, 32), clean(hex, 64)))
}

/// An entry of a referrers index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Referrer {
    /// The artifact manifest's digest.
    pub digest: String,
    /// Its size as stated.
    pub size: i64,
    /// Its `artifactType`.
    pub artifact_type: String,
    /// Its creation annotation (either spelling).
    pub created: Option<String>,
}

#[derive(Deserialize)]
struct WireIndex {
    #[serde(default, rename = "mediaType")]
    media_type: Option<String>,
    #[serde(default)]
    manifests: Option<Vec<WireDescriptor>>,
}

#[derive(Deserialize)]
struct WireDescriptor {
    #[serde(default)]
    digest: String,
    #[serde(default)]
    size: i64,
    #[serde(default, rename = "artifactType")]
    artifact_type: Option<String>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

/// The entries of a referrers response or fallback index of `artifact_type` (filtered here:
/// a registry that did not say it filtered may have sent others), at most [`MAX_REFERRERS`].
pub fn referrers(body: &[u8], artifact_type: &str) -> Result<Vec<Referrer>, String> {
    if body.len() > MAX_INDEX_BYTES {
        return Err(format!("larger than {MAX_INDEX_BYTES} bytes"));
    }
    let index: WireIndex = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    if index
        .media_type
        .as_deref()
        .is_some_and(|m| m != INDEX_MEDIA_TYPE)
    {
        return Err("not an OCI image index".to_owned());
    }
    Ok(index
        .manifests
        .unwrap_or_default()
        .into_iter()
        .take(MAX_REFERRERS)
        .filter(|d| d.artifact_type.as_deref() == Some(artifact_type))
        .filter(|d| crate::reference::validate_digest(&d.digest).is_ok())
        .map(|d| {
            let created = d
                .annotations
                .as_ref()
                .and_then(|a| a.get(CREATED).or_else(|| a.get(CREATED_ALT)).cloned());
            Referrer {
                digest: d.digest,
                size: d.size,
                artifact_type: artifact_type.to_owned(),
                created,
            }
        })
        .collect())
}

/// Orders referrers newest first by their creation annotation (RFC 3339 timestamps compare as
/// text when written alike; a missing one is oldest), ties by digest.
pub fn newest_first(referrers: &mut [Referrer]) {
    referrers.sort_by(|a, b| {
        (b.created.as_deref(), b.digest.as_str()).cmp(&(a.created.as_deref(), a.digest.as_str()))
    });
}

/// The `Link: <...>; rel="next"` target of a referrers page, resolved against `current`, when
/// it stays on `current`'s origin.
pub fn next_page(headers: &HeaderMap, current: &Url) -> Option<Url> {
    let link = headers.get(http::header::LINK)?.to_str().ok()?;
    link.split(',').find_map(|part| {
        let (target, params) = part.trim().split_once(';')?;
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        let next = params
            .split(';')
            .any(|p| matches!(p.trim(), "rel=\"next\"" | "rel=next"));
        let url = current.join(target).ok()?;
        (next && url.origin() == current.origin()).then_some(url)
    })
}

/// Whether a referrers response says the registry applied the `artifactType` filter.
pub fn filter_applied(headers: &HeaderMap) -> bool {
    headers
        .get_all("oci-filters-applied")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|f| f.trim() == "artifactType")
}

/// A layer of an artifact manifest.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Layer {
    /// Its media type.
    #[serde(default, rename = "mediaType")]
    pub media_type: String,
    /// Its digest.
    #[serde(default)]
    pub digest: String,
    /// Its size.
    #[serde(default)]
    pub size: i64,
}

#[derive(Deserialize)]
struct Subject {
    #[serde(default)]
    digest: String,
}

/// What is read of an artifact manifest.
#[derive(Deserialize)]
pub struct ArtifactManifest {
    #[serde(default)]
    layers: Option<Vec<Layer>>,
    #[serde(default)]
    subject: Option<Subject>,
}

impl ArtifactManifest {
    /// Reads an artifact manifest (at most [`MAX_MANIFEST_BYTES`]).
    pub fn parse(body: &[u8]) -> Result<Self, String> {
        if body.len() > MAX_MANIFEST_BYTES {
            return Err(format!("larger than {MAX_MANIFEST_BYTES} bytes"));
        }
        serde_json::from_slice(body).map_err(|e| e.to_string())
    }

    /// The digest its `subject` names.
    pub fn subject(&self) -> Option<&str> {
        self.subject.as_ref().map(|s| s.digest.as_str())
    }

    /// The first layer of `media_type`, else (with `first_otherwise`, as NFD's client reads
    /// `layers[0]`) the first layer.
    pub fn layer(&self, media_type: &str, first_otherwise: bool) -> Option<&Layer> {
        let layers = self.layers.as_deref().unwrap_or_default();
        layers
            .iter()
            .find(|l| l.media_type == media_type)
            .or_else(|| layers.first().filter(|_| first_otherwise))
    }
}

/// What to fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Query {
    /// The artifact is the reference itself; its layer of `media_type` is the spec.
    Explicit {
        /// The spec layer's media type.
        media_type: &'static str,
    },
    /// The newest referrer of `subject` of `artifact_type`; its layer of `media_type` (else its
    /// first layer) is the spec.
    Referrers {
        /// The image's manifest (or index) digest.
        subject: String,
        /// The `artifactType` asked for.
        artifact_type: &'static str,
        /// The spec layer's media type.
        media_type: &'static str,
        /// The registry is known to lack the referrers API: the fallback tag at once.
        skip_api: bool,
        /// The subject is an index: when it has no artifact, its platform manifests (at most
        /// [`MAX_PLATFORM_SUBJECTS`]) are asked too.
        index: bool,
    },
}

/// What a referrers fetch learned beside the artifact.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Learned {
    /// The registry answered the referrers API with 404.
    pub no_referrers_api: bool,
}

/// How long an entry lives: [`TTL`] for artifacts found, the negative TTL for absences.
struct Lifetimes {
    negative: Duration,
}

impl moka::Expiry<String, Arc<[Fetched]>> for Lifetimes {
    fn expire_after_create(
        &self,
        _key: &String,
        value: &Arc<[Fetched]>,
        _created_at: std::time::Instant,
    ) -> Option<Duration> {
        Some(if value.is_empty() { self.negative } else { TTL })
    }
}

/// Compatibility artifacts, cached (answers [`TTL`], absences [`NEGATIVE_TTL`] unless set
/// otherwise) and coalesced per
/// (kind, image, subject, credential scope); registries found without the referrers API are
/// remembered, so later subjects there cost one request less.
#[derive(Clone, derive_more::Debug)]
#[debug("Artifacts {{ entries: {:?}, .. }}", cache.entry_count())]
pub struct Artifacts {
    resolver: Resolver,
    cache: moka::future::Cache<String, Arc<[Fetched]>>,
    no_api: Arc<Mutex<HashSet<String>>>,
}

impl Artifacts {
    /// Artifacts fetched with `resolver`, absences kept [`NEGATIVE_TTL`].
    pub fn new(resolver: Resolver) -> Self {
        Self::with_negative_ttl(resolver, NEGATIVE_TTL)
    }

    /// Artifacts fetched with `resolver`, absences kept `negative_ttl` (at most
    /// [`MAX_NEGATIVE_TTL`]; zero: not kept).
    pub fn with_negative_ttl(resolver: Resolver, negative_ttl: Duration) -> Self {
        Self {
            resolver,
            cache: moka::future::Cache::builder()
                .max_capacity(MAX_ENTRIES)
                .expire_after(Lifetimes {
                    negative: negative_ttl.min(MAX_NEGATIVE_TTL),
                })
                .build(),
            no_api: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    fn lacks_api(&self, registry: &str) -> bool {
        self.no_api
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(registry)
    }

    fn remember_no_api(&self, registry: &str) {
        let mut set = self
            .no_api
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if set.len() < MAX_REMEMBERED {
            set.insert(registry.to_owned());
        }
    }

    /// The explicit artifact `routed` (as [`Resolver::routed`] gave it) and its layer of
    /// `media_type`.
    pub async fn explicit(
        &self,
        routed: &Routed,
        media_type: &'static str,
        credentials: &[CredentialCandidate],
        scope: Option<Scope>,
    ) -> Result<Arc<Fetched>, Error> {
        let reference = routed.image();
        let key = format!("explicit\0{reference}\0{media_type}\0{scope:?}");
        let query = Query::Explicit { media_type };
        let loaded = self
            .cache
            .try_get_with(key, async {
                let (fetched, _) = self
                    .resolver
                    .fetch_artifacts(routed, credentials, &query)
                    .await?;
                Ok::<_, Error>(Arc::from(fetched))
            })
            .await
            .map_err(|e| (*e).clone())?;
        loaded
            .first()
            .map(|f| Arc::new(f.clone()))
            .ok_or_else(|| Error::NotFound {
                reference: reference.to_owned(),
                registry: String::new(),
            })
    }

    /// The newest referrer of `image`'s `subject` digest of `artifact_type`, its layer of
    /// `media_type` (else its first); when `subject` is an index (`index`) without one, the
    /// newest of each of its platform manifests (each [`Fetched::platform`]). Empty when the
    /// image has none. `routed`: the image as [`Resolver::routed`] gave it.
    #[allow(clippy::too_many_arguments)]
    pub async fn discovered(
        &self,
        routed: &Routed,
        subject: &str,
        index: bool,
        artifact_type: &'static str,
        media_type: &'static str,
        credentials: &[CredentialCandidate],
        scope: Option<Scope>,
    ) -> Result<Arc<[Fetched]>, Error> {
        let image = routed.image();
        let registry = &routed.target().registry;
        let key = format!("referrers\0{image}\0{subject}\0{artifact_type}\0{scope:?}");
        self.cache
            .try_get_with(key, async {
                let query = Query::Referrers {
                    subject: subject.to_owned(),
                    artifact_type,
                    media_type,
                    skip_api: self.lacks_api(registry),
                    index,
                };
                let (fetched, learned) = self
                    .resolver
                    .fetch_artifacts(routed, credentials, &query)
                    .await?;
                if learned.no_referrers_api {
                    self.remember_no_api(registry);
                }
                Ok::<_, Error>(Arc::from(fetched))
            })
            .await
            .map_err(|e| (*e).clone())
    }
}

/// Weight of the compiled specs kept ([`Specs`]).
pub const MAX_COMPILED_BYTES: u64 = 16 * 1024 * 1024;
/// How long a compiled spec no admission asked for is kept.
const COMPILED_IDLE: Duration = Duration::from_secs(600);
/// Specs compiled (and selections evaluated) at once, on the blocking pool.
pub const COMPILE_CONCURRENCY: usize = 2;

/// A compiled spec, or why it cannot be (kept too: a spec that fails fails again).
type Compiled = Result<Arc<Spec>, SelectionError>;

/// Compatibility specs compiled once per spec digest (a spec's bytes are immutable): its rules
/// and regular expressions, or the reason it was refused. The CPU work of image selection
/// (compiling a spec, evaluating it on the nodes) runs on the blocking pool, never on the async
/// workers, at most [`COMPILE_CONCURRENCY`] at a time; concurrent admissions of one spec wait
/// for the one compile. Kept by weight (the compiled regular expressions and about 16 bytes per
/// byte of the spec; at most [`MAX_COMPILED_BYTES`]), idle ones 10 minutes. A refusal because
/// the process's budget for regular expressions is held ([`SelectionError::Busy`]) is not kept.
#[derive(Clone, derive_more::Debug)]
#[debug("Specs {{ entries: {:?}, .. }}", cache.entry_count())]
pub struct Specs {
    cache: moka::future::Cache<String, (Compiled, u32)>,
    permits: Arc<tokio::sync::Semaphore>,
}

impl Default for Specs {
    fn default() -> Self {
        Self {
            cache: moka::future::Cache::builder()
                .max_capacity(MAX_COMPILED_BYTES)
                .weigher(|_, (_, weight): &(Compiled, u32)| *weight)
                .time_to_idle(COMPILED_IDLE)
                .build(),
            permits: Arc::new(tokio::sync::Semaphore::new(COMPILE_CONCURRENCY)),
        }
    }
}

impl Specs {
    /// The spec of `fetched`, read as `format`: compiled once per spec digest, on the blocking
    /// pool.
    pub async fn compile(&self, fetched: &Fetched, format: Format) -> Compiled {
        let key = format!("{format:?}\0{}", fetched.spec_digest);
        let bytes = fetched.spec.clone();
        let loaded = self
            .cache
            .try_get_with(key, async move {
                let weight = u32::try_from(bytes.len().saturating_mul(16)).unwrap_or(u32::MAX);
                let compiled = self
                    .blocking(move || match format {
                        Format::Ocifit => Spec::parse_ocifit(&bytes),
                        Format::Nfd => Spec::parse_nfd(&bytes),
                    })
                    .await?;
                match compiled {
                    Err(SelectionError::Busy(why)) => Err(SelectionError::Busy(why)),
                    Err(error) => Ok((Err(error), 256)),
                    Ok(spec) => {
                        let weight = u32::try_from(spec.regex_bytes)
                            .unwrap_or(u32::MAX)
                            .saturating_add(weight);
                        Ok((Ok(Arc::new(spec)), weight))
                    }
                }
            })
            .await;
        match loaded {
            Ok((compiled, _)) => compiled,
            Err(error) => Err((*error).clone()),
        }
    }

    /// `work` on the blocking pool, at most [`COMPILE_CONCURRENCY`] at a time (the caller bounds
    /// the wait; dropping the future leaves a started `work` to finish, bounded by the limits).
    pub async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, SelectionError> {
        let busy = |why: &str| SelectionError::Busy(format!("image selection's workers: {why}"));
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| busy("closed"))?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work()
        })
        .await
        .map_err(|_| busy("the work panicked"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    const T: &str = "application/vnd.nfd.image-compatibility.v1alpha1";

    fn digest(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    #[test]
    fn fallback_tags() {
        assert_eq!(
            fallback_tag(&digest('a')).unwrap(),
            format!("sha256-{}", "a".repeat(64))
        );
        let long = format!("{}:{}", "x+y".repeat(20), "b".repeat(100));
        let tag = fallback_tag(&long).unwrap();
        assert_eq!(
            tag,
            format!("{}-{}", "x-y".repeat(20)[..32].to_owned(), "b".repeat(64))
        );
        assert_eq!(fallback_tag("nodigest"), None);
    }

    #[test]
    fn referrers_are_filtered_and_ordered() {
        let body = json!({"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest('1'), "size": 10,
             "artifactType": T, "annotations": {CREATED: "2025-01-01T00:00:00Z"}},
            {"digest": digest('2'), "size": 10, "artifactType": "application/spdx+json"},
            {"digest": digest('3'), "size": 10, "artifactType": T, "annotations": {CREATED_ALT: "2025-06-01T00:00:00Z"}},
            {"digest": digest('4'), "size": 10, "artifactType": T},
            {"digest": "sha256:short", "size": 10, "artifactType": T}
        ]});
        let mut found = referrers(body.to_string().as_bytes(), T).unwrap();
        newest_first(&mut found);
        let order: Vec<_> = found.iter().map(|r| r.digest.clone()).collect();
        assert_eq!(order, vec![digest('3'), digest('1'), digest('4')]);
        let manifest =
            json!({"mediaType": "application/vnd.oci.image.manifest.v1+json", "manifests": []});
        assert!(referrers(manifest.to_string().as_bytes(), T).is_err());
        assert!(referrers(&vec![b' '; MAX_INDEX_BYTES + 1], T).is_err());
    }

    #[test]
    fn link_headers() {
        let current = Url::parse("https://r.example/v2/a/referrers/sha256:x").unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::LINK,
            "</v2/a/referrers/sha256:x?n=1&last=b>; rel=\"next\""
                .parse()
                .unwrap(),
        );
        assert_eq!(
            next_page(&headers, &current).unwrap().as_str(),
            "https://r.example/v2/a/referrers/sha256:x?n=1&last=b"
        );
        headers.insert(
            http::header::LINK,
            "<https://elsewhere.example/v2/a/referrers/sha256:x>; rel=\"next\""
                .parse()
                .unwrap(),
        );
        assert_eq!(next_page(&headers, &current), None);
        headers.insert(http::header::LINK, "</x>; rel=\"prev\"".parse().unwrap());
        assert_eq!(next_page(&headers, &current), None);
    }

    #[test]
    fn filters_applied_header() {
        let mut headers = HeaderMap::new();
        assert!(!filter_applied(&headers));
        headers.insert(
            "oci-filters-applied",
            "annotation, artifactType".parse().unwrap(),
        );
        assert!(filter_applied(&headers));
    }

    fn fetched(spec: &str, digest_char: char) -> Fetched {
        Fetched {
            digest: digest(digest_char),
            media_type: noe_core::selection::NFD_MEDIA_TYPE.to_owned(),
            spec_digest: digest(digest_char),
            spec: Bytes::from(spec.to_owned()),
            platform: None,
        }
    }

    /// A spec is compiled once per digest (concurrent askers share the one compile), a refused
    /// one stays refused without being read again.
    #[tokio::test]
    async fn specs_are_compiled_once_per_digest() {
        let specs = Specs::default();
        let good = fetched(
            "version: v1alpha1\ncompatibilities:\n- rules:\n  - matchFeatures:\n    - feature: kernel.version\n      matchExpressions:\n        full: {op: InRegexp, value: ['^6\\.']}\n",
            'a',
        );
        let (a, b) = tokio::join!(
            specs.compile(&good, Format::Nfd),
            specs.compile(&good, Format::Nfd)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(Arc::ptr_eq(&a, &b));
        assert!(a.regex_bytes > 0);
        assert!(Arc::ptr_eq(
            &a,
            &specs.compile(&good, Format::Nfd).await.unwrap()
        ));
        let deep = format!(
            "version: v1alpha1\ncompatibilities: {}{}\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let bad = fetched(&deep, 'b');
        let refused = specs.compile(&bad, Format::Nfd).await.unwrap_err();
        assert_eq!(
            refused,
            SelectionError::TooMany {
                what: "levels of nesting",
                limit: noe_core::selection::limits::DEPTH
            }
        );
        // The same digest is the same spec: the refusal is remembered, not read again.
        let same_digest = fetched("version: v1alpha1\ncompatibilities: []\n", 'b');
        assert_eq!(
            specs.compile(&same_digest, Format::Nfd).await.unwrap_err(),
            refused
        );
    }

    #[test]
    fn artifact_layers() {
        let m = json!({"layers": [{"mediaType": "text/plain", "digest": digest('1'), "size": 3},
                                   {"mediaType": "application/x", "digest": digest('2'), "size": 3}],
                       "subject": {"digest": digest('9')}});
        let m = ArtifactManifest::parse(m.to_string().as_bytes()).unwrap();
        assert_eq!(m.subject(), Some(digest('9').as_str()));
        assert_eq!(m.layer("application/x", false).unwrap().digest, digest('2'));
        assert_eq!(m.layer("application/y", true).unwrap().digest, digest('1'));
        assert_eq!(m.layer("application/y", false), None);
    }
}
