//! Upgrade paths (`noe report --upgrades`, `noe inspect --upgrades`; docs/configuration.md,
//! "Upgrade paths"): for an image that does not run on a target architecture, the lowest
//! version of its track that does, and the newest. Pure: the caller lists the repository's tags
//! and looks the versions up as [`Search::next`] asks; here are the track ([`track`]), the
//! search strategy ([`search`]) and the answer ([`Upgrade`]).

pub mod search;
pub mod track;

pub use search::{First, Probe, Search};
pub use track::{NoTrack, Track, Version};

/// Most tags listed for one repository; a longer list is cut there (and the answer says so).
pub const MAX_TAGS: usize = 10_000;

/// The upgrade path of one image for one target platform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upgrade {
    /// The image as the workload names it.
    pub image: String,
    pub outcome: Result<Path, NoPath>,
}

/// Why an image has no upgrade path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoPath {
    /// Its tag has no track.
    NoTrack(NoTrack),
    /// Its repository's tags could not be listed: the error's class and message.
    Tags { kind: String, message: String },
}

impl NoPath {
    /// The reason in words.
    pub fn reason(&self) -> String {
        match self {
            Self::NoTrack(why) => why.to_string(),
            Self::Tags { kind, message } => format!("tags not listed: {kind}: {message}"),
        }
    }
}

/// What a search found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Path {
    /// The image's own tag.
    pub current: String,
    /// The lowest version above it that supports the target; `None` when none does, or when
    /// that is not known ([`Path::unknown`] says why).
    pub first: Option<String>,
    /// The highest version of the track.
    pub newest: String,
    /// Whether the newest supports the target; `None` when its lookup failed.
    pub newest_supports: Option<bool>,
    /// Registry requests made: tag pages, and the version lookups not answered from a cache.
    pub requests: u64,
    /// What the search could not find out, and why (a failed lookup, the budget, a cut tag
    /// list).
    pub unknown: Option<String>,
}

impl Path {
    /// The answer of `search` over `track`: `failure` is the message of the lookup that
    /// stopped it, `truncated` that the tag list was cut at [`MAX_TAGS`].
    pub fn new(
        track: &Track,
        search: &Search,
        failure: Option<&str>,
        requests: u64,
        truncated: bool,
    ) -> Self {
        let above = track.above();
        let tag = |i: usize| above.get(i).map(|v| v.tag().to_owned());
        let (first, mut unknown) = match search.first() {
            First::Found(i) => (tag(i), None),
            First::None => (None, None),
            First::Unknown { seen } => {
                let why = match (search.failed().and_then(tag), failure) {
                    (Some(failed), Some(message)) => {
                        format!("the lookup of {failed} failed: {message}")
                    }
                    (Some(failed), None) => format!("the lookup of {failed} failed"),
                    (None, _) => format!(
                        "support comes and goes along the track; {} lookups were not enough",
                        search.probes()
                    ),
                };
                let why = match seen.and_then(tag) {
                    Some(seen) => {
                        format!("{seen} supports, versions below it not all looked up ({why})")
                    }
                    None => why,
                };
                (None, Some(why))
            }
        };
        if truncated {
            let cut = format!("only the first {MAX_TAGS} tags were listed");
            unknown = Some(match unknown {
                Some(why) => format!("{why}; {cut}"),
                None => cut,
            });
        }
        let newest_supports = match above.len().checked_sub(1) {
            None => Some(false),
            Some(last) => search.known(last),
        };
        Self {
            current: track.current.tag().to_owned(),
            first,
            newest: track.newest().tag().to_owned(),
            newest_supports,
            requests,
            unknown,
        }
    }

    /// The path in a few words for a table cell: `1.25.3 (newest 1.27.1)`, `1.27.1`,
    /// `none (newest 1.27.1)`, `unknown (newest 1.27.1 supports)`.
    pub fn short(&self) -> String {
        let newest = match self.newest_supports {
            Some(true) => format!("newest {}", self.newest),
            Some(false) => format!("newest {} does not", self.newest),
            None => format!("newest {} unknown", self.newest),
        };
        match (&self.first, &self.unknown) {
            (Some(first), _) if *first == self.newest => first.clone(),
            (Some(first), _) => format!("{first} ({newest})"),
            (None, None) => format!("none ({newest})"),
            (None, Some(_)) => format!("unknown ({newest})"),
        }
    }
}

impl Upgrade {
    /// The upgrade in a few words for a table cell ([`Path::short`], or `no track: ...`).
    pub fn short(&self) -> String {
        match &self.outcome {
            Ok(path) => path.short(),
            Err(NoPath::NoTrack(why)) => why.to_string(),
            Err(NoPath::Tags { kind, .. }) => format!("tags not listed ({kind})"),
        }
    }
}

/// As JSON (`noe report -o json`'s `items[].upgrades.<arch>[]`, `noe inspect --upgrades -o
/// json`'s `upgrades.<arch>`): `{"current","first","image","newest","newestSupports",
/// "requests"}` and `"unknown"` when part of it is not known; `{"image","reason"}` without a
/// path. Keys in lexicographic order, as every document of the report.
impl serde::Serialize for Upgrade {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        match &self.outcome {
            Ok(path) => {
                let fields = 6 + usize::from(path.unknown.is_some());
                let mut map = serializer.serialize_map(Some(fields))?;
                map.serialize_entry("current", &path.current)?;
                map.serialize_entry("first", &path.first)?;
                map.serialize_entry("image", &self.image)?;
                map.serialize_entry("newest", &path.newest)?;
                map.serialize_entry("newestSupports", &path.newest_supports)?;
                map.serialize_entry("requests", &path.requests)?;
                if let Some(unknown) = &path.unknown {
                    map.serialize_entry("unknown", unknown)?;
                }
                map.end()
            }
            Err(no_path) => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("image", &self.image)?;
                map.serialize_entry("reason", &no_path.reason())?;
                map.end()
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn searched(tags: &[&str], current: &str, supports: impl Fn(&str) -> Option<bool>) -> Path {
        let track = Track::new(current, tags.iter().copied()).unwrap();
        let above = track.above();
        let mut search = Search::new(above.len(), track.versions.len());
        let mut failure = None;
        while let Some(i) = search.next() {
            let probe = match supports(above[i].tag()) {
                Some(true) => Probe::Supports,
                Some(false) => Probe::Blocks,
                None => {
                    failure = Some("timeout");
                    Probe::Failed
                }
            };
            search.record(i, probe);
        }
        Path::new(&track, &search, failure, 1, false)
    }

    #[test]
    fn paths_in_words() {
        let tags = ["1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0"];
        let from_1_2 = |t: &str| Some(t >= "1.2.0");
        let path = searched(&tags, "1.0.0", from_1_2);
        assert_eq!(path.first.as_deref(), Some("1.2.0"));
        assert_eq!(path.newest, "1.4.0");
        assert_eq!(path.newest_supports, Some(true));
        assert_eq!(path.short(), "1.2.0 (newest 1.4.0)");
        assert_eq!(searched(&tags, "1.3.0", from_1_2).short(), "1.4.0");
        let never = searched(&tags, "1.0.0", |_| Some(false));
        assert_eq!(never.short(), "none (newest 1.4.0 does not)");
        assert_eq!(never.unknown, None);
        let top = searched(&tags, "1.4.0", |_| Some(false));
        assert_eq!(
            (top.first.as_deref(), top.newest_supports),
            (None, Some(false))
        );
        // A failed lookup: unknown, said why, never a version.
        let failing = searched(&tags, "1.0.0", |t| (t != "1.2.0").then(|| t >= "1.2.0"));
        assert_eq!(failing.first, None);
        assert_eq!(failing.short(), "unknown (newest 1.4.0)");
        let why = failing.unknown.unwrap();
        assert!(why.contains("the lookup of 1.2.0 failed: timeout"), "{why}");
        let newest_failed = searched(&tags, "1.0.0", |t| (t != "1.4.0").then_some(true));
        assert_eq!(newest_failed.newest_supports, None);
        assert_eq!(newest_failed.first, None);
        let no_track = Upgrade {
            image: "app:latest".into(),
            outcome: Err(NoPath::NoTrack(NoTrack::Latest)),
        };
        assert_eq!(no_track.short(), "no track: `latest` is not a version");
    }
}
