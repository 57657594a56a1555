//! Upgrade paths from the registry (docs/architecture.md, "Upgrade paths"): the pure track and
//! search of [`noe_core::upgrade`], driven with this crate's lookups. The repository's tags are
//! listed once per run and credential scope ([`Resolver::tags`], remembered here, bounded by
//! the tags they hold); each version the search asks for is looked up like any image
//! ([`Resolver::resolve_routed`]: overrides, the platform cache, a HEAD where a digest is
//! known, the routing and credentials of the image), so a version already looked up costs
//! nothing, and images of one repository share them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use noe_core::upgrade::{NoPath, NoTrack, Path, Probe, Search, Track, Upgrade, Version};
use noe_core::{Platform, Support};
use noe_credentials::CredentialCandidate;

use crate::cache::{Answered, Scope};
use crate::resolver::tags::Tags;
use crate::{Error, Reference, Resolver, Routed};

/// Tags remembered across the repositories of one run (weighed by count).
const MAX_REMEMBERED_TAGS: u64 = 200_000;

/// A repository's tags as listed (or why not), shared by the searches that need them.
type Listed = Arc<Result<Tags, Error>>;

/// Finds upgrade paths, remembering each repository's tags. Cheap to clone.
#[derive(Clone, derive_more::Debug)]
#[debug("Upgrades {{ repositories: {:?}, .. }}", tags.entry_count())]
pub struct Upgrades {
    resolver: Resolver,
    tags: moka::future::Cache<(String, Option<Scope>), Listed>,
}

impl Upgrades {
    pub fn new(resolver: Resolver) -> Self {
        let tags = moka::future::Cache::builder()
            .max_capacity(MAX_REMEMBERED_TAGS)
            .weigher(|_, tags: &Listed| {
                let count = tags.as_ref().as_ref().map_or(1, |t| t.tags.len().max(1));
                u32::try_from(count).unwrap_or(u32::MAX)
            })
            .build();
        Self { resolver, tags }
    }

    /// The upgrade path of `routed` (an image that does not run on `target`), looked up in
    /// `scope` with `credentials` (those of `routed`'s host: every version is on it).
    pub async fn find(
        &self,
        routed: &Routed,
        scope: Option<Scope>,
        credentials: &[CredentialCandidate],
        target: &Platform,
    ) -> Upgrade {
        let image = routed.image().to_owned();
        let outcome = self.search(routed, scope, credentials, target).await;
        Upgrade { image, outcome }
    }

    async fn search(
        &self,
        routed: &Routed,
        scope: Option<Scope>,
        credentials: &[CredentialCandidate],
        target: &Platform,
    ) -> Result<Path, NoPath> {
        let reference = routed.reference();
        let current = reference
            .tag
            .as_deref()
            .ok_or(NoPath::NoTrack(NoTrack::DigestOnly))?;
        Version::parse(current).map_err(NoPath::NoTrack)?;
        let (tags, pages) = self.tags(routed, scope, credentials).await;
        let tags = tags.as_ref().as_ref().map_err(|error| NoPath::Tags {
            kind: error.kind().to_owned(),
            message: crate::error::bounded(&error.to_string(), 512).into_owned(),
        })?;
        let track =
            Track::new(current, tags.tags.iter().map(String::as_str)).map_err(NoPath::NoTrack)?;
        let above = track.above();
        let mut search = Search::new(above.len(), track.versions.len());
        let mut requests = u64::try_from(pages).unwrap_or(u64::MAX);
        let mut failure = None;
        while let Some(at) = search.next() {
            let Some(version) = above.get(at) else {
                break;
            };
            let (probe, asked) = self
                .probe(reference, version.tag(), scope, credentials, target)
                .await;
            requests = requests.saturating_add(asked);
            if let Err(message) = &probe {
                failure = Some(message.clone());
            }
            search.record(at, probe.unwrap_or(Probe::Failed));
        }
        Ok(Path::new(
            &track,
            &search,
            failure.as_deref(),
            requests,
            tags.truncated,
        ))
    }

    /// The repository's tags (listed once per run and scope), and the pages this call read.
    async fn tags(
        &self,
        routed: &Routed,
        scope: Option<Scope>,
        credentials: &[CredentialCandidate],
    ) -> (Listed, usize) {
        let listed = AtomicBool::new(false);
        let key = (routed.target().name(), scope);
        let tags = self
            .tags
            .get_with(key, async {
                listed.store(true, Ordering::Relaxed);
                Arc::new(self.resolver.tags(routed, credentials).await)
            })
            .await;
        let pages = match (listed.load(Ordering::Relaxed), tags.as_ref()) {
            (true, Ok(tags)) => tags.pages,
            (true, Err(_)) => 1,
            (false, _) => 0,
        };
        (tags, pages)
    }

    /// Whether `tag` of `reference`'s repository runs on `target` (an error's message when
    /// its lookup failed), and the registry requests that cost (none from a cache).
    async fn probe(
        &self,
        reference: &Reference,
        tag: &str,
        scope: Option<Scope>,
        credentials: &[CredentialCandidate],
        target: &Platform,
    ) -> (Result<Probe, String>, u64) {
        let image = Reference {
            tag: Some(tag.to_owned()),
            digest: None,
            ..reference.clone()
        }
        .to_string();
        let resolved = match self.resolver.routed(&image).await {
            Ok(routed) => {
                self.resolver
                    .resolve_routed(&routed, scope, credentials)
                    .await
            }
            Err(error) => Err(error),
        };
        match resolved {
            Ok(resolution) => {
                let asked = match resolution.answered_by {
                    Answered::Cache | Answered::SharedCache | Answered::Override => 0,
                    Answered::Head | Answered::Get => 1,
                };
                let probe = match Support::of(&resolution.platforms) {
                    _ if resolution.platforms.is_empty() => {
                        Err("its registry lists no platform".to_owned())
                    }
                    Some(support) if support.runs_on(target) => Ok(Probe::Supports),
                    Some(_) => Ok(Probe::Blocks),
                    None => Err("its registry lists no architecture".to_owned()),
                };
                (probe, asked)
            }
            Err(error) => (
                Err(crate::error::bounded(&error.to_string(), 512).into_owned()),
                1,
            ),
        }
    }
}
