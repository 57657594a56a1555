//! A tag read as a version, and the track of an image: the tags of its repository with the
//! same shape as its own, ordered as versions.
//!
//! A version tag is `[v]N(.N)*`, then optionally a pre-release (`-rc.1`, `-beta2`, `.dev0`,
//! `-M1`, `-ea`), a build number (`_9` as Eclipse Temurin writes it, a final `-r5` as Bitnami
//! does) and a suffix (`-alpine`, `-slim-bookworm`, `-debian-12`, `-jre17`). Its **shape** is
//! the `v` or not, the count of numeric components, whether it has a build number, and the
//! suffix: `1.25.3-alpine` and `1.25.3` are on different tracks, so are `1.25` and `1.25.3`.
//! Pre-releases are on the track only when the current tag is one.
//!
//! No track: `latest`, a tag without a leading number (`stable`, `jammy-20240111`), a date
//! (`20240115`, `2024-01-15`, `2024.01.15`), a commit hash (`a1b2c3d`, `sha-4f2e1d9`).

use std::cmp::Ordering;
use std::fmt;

/// Most numeric components read (`1.2.3.4.5.6.7.8`).
pub const MAX_COMPONENTS: usize = 8;
/// Longest tag (the distribution spec's bound).
pub const MAX_TAG_LEN: usize = 128;

/// Why an image has no track.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoTrack {
    /// The tag is `latest`.
    Latest,
    /// The tag is a date (`20240115`, `2024-01-15`).
    Date,
    /// The tag is a commit hash (`a1b2c3d`, `sha-4f2e1d9`).
    CommitHash,
    /// The tag does not start with a version number (`stable`, `jammy-20240111`).
    NotAVersion,
    /// The image is pinned by digest without a tag.
    DigestOnly,
}

impl NoTrack {
    /// A stable name, for JSON and tests.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Latest => "latest",
            Self::Date => "date",
            Self::CommitHash => "commit-hash",
            Self::NotAVersion => "not-a-version",
            Self::DigestOnly => "digest-only",
        }
    }
}

impl fmt::Display for NoTrack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Latest => "no track: `latest` is not a version",
            Self::Date => "no track: a date tag",
            Self::CommitHash => "no track: a commit-hash tag",
            Self::NotAVersion => "no track: the tag is not a version",
            Self::DigestOnly => "no track: pinned by digest without a tag",
        })
    }
}

/// A pre-release: its kind's rank (`dev` < `alpha` < `beta` < `pre` < `rc`) and number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Pre {
    rank: u8,
    number: u64,
}

/// The pre-release words, with their rank. Longer words first where one is a prefix of
/// another (`alpha` before `a`).
const PRE_WORDS: [(&str, u8); 12] = [
    ("snapshot", 0),
    ("dev", 0),
    ("alpha", 1),
    ("ea", 1),
    ("a", 1),
    ("beta", 2),
    ("milestone", 2),
    ("b", 2),
    ("m", 2),
    ("preview", 3),
    ("pre", 3),
    ("rc", 4),
];

/// A tag read as a version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    /// The tag as listed.
    tag: String,
    v: bool,
    numbers: Vec<u64>,
    pre: Option<Pre>,
    build: Option<u64>,
    /// What follows the version, as written (`-alpine`).
    suffix: String,
}

/// The shape tags of one track share.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    pub v: bool,
    pub components: usize,
    pub build: bool,
    pub suffix: String,
}

impl Version {
    /// `tag` read as a version, or why it has no track.
    pub fn parse(tag: &str) -> Result<Self, NoTrack> {
        if tag.is_empty() || tag.len() > MAX_TAG_LEN {
            return Err(NoTrack::NotAVersion);
        }
        if tag.eq_ignore_ascii_case("latest") {
            return Err(NoTrack::Latest);
        }
        if is_commit_hash(tag) {
            return Err(NoTrack::CommitHash);
        }
        if is_date(tag) {
            return Err(NoTrack::Date);
        }
        let (v, rest) = match tag.strip_prefix(['v', 'V']) {
            Some(rest) => (true, rest),
            None => (false, tag),
        };
        if !rest.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(NoTrack::NotAVersion);
        }
        let mut numbers = Vec::new();
        let mut rest = rest;
        loop {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            let (number, after) = rest.split_at(digits);
            if numbers.len() == MAX_COMPONENTS {
                return Err(NoTrack::NotAVersion);
            }
            numbers.push(number.parse::<u64>().map_err(|_| NoTrack::NotAVersion)?);
            rest = after;
            match rest.strip_prefix('.') {
                Some(next) if next.starts_with(|c: char| c.is_ascii_digit()) => rest = next,
                _ => break,
            }
        }
        let (pre, rest) = pre_release(rest);
        let (build, rest) = match rest.strip_prefix('_') {
            Some(after) => match leading_number(after) {
                Some((number, after)) => (Some(number), after),
                None => (None, rest),
            },
            None => (None, rest),
        };
        let (build, suffix) = match build {
            Some(build) => (Some(build), rest),
            None => match revision(rest) {
                Some((suffix, number)) => (Some(number), suffix),
                None => (None, rest),
            },
        };
        Ok(Self {
            tag: tag.to_owned(),
            v,
            numbers,
            pre,
            build,
            suffix: suffix.to_owned(),
        })
    }

    /// The tag as listed.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// Whether it is a pre-release.
    pub fn is_pre_release(&self) -> bool {
        self.pre.is_some()
    }

    /// Its shape.
    pub fn shape(&self) -> Shape {
        Shape {
            v: self.v,
            components: self.numbers.len(),
            build: self.build.is_some(),
            suffix: self.suffix.clone(),
        }
    }

    fn same_shape(&self, other: &Self) -> bool {
        self.v == other.v
            && self.numbers.len() == other.numbers.len()
            && self.build.is_some() == other.build.is_some()
            && self.suffix == other.suffix
    }
}

impl Ord for Version {
    /// As versions: the numbers, then a pre-release below its release (by kind, then
    /// number), then the build number; equal versions written differently (`1.02`, `1.2`) by
    /// their text, so the order is total.
    fn cmp(&self, other: &Self) -> Ordering {
        self.numbers
            .cmp(&other.numbers)
            .then_with(|| match (&self.pre, &other.pre) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Greater,
                (Some(_), None) => Ordering::Less,
                (Some(a), Some(b)) => a.cmp(b),
            })
            .then_with(|| self.build.cmp(&other.build))
            .then_with(|| self.tag.cmp(&other.tag))
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A number at the start of `text` (at most 18 digits), and what follows it.
fn leading_number(text: &str) -> Option<(u64, &str)> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 18 {
        return None;
    }
    let (number, rest) = text.split_at(digits);
    Some((number.parse().ok()?, rest))
}

/// A pre-release at the start of `rest` (`-rc.1`, `rc1`, `.dev0`, `-beta`, `-M2`), and what
/// follows it. A word must end there (`-bookworm` and `-alpine` are suffixes, not `b` and `a`
/// pre-releases).
fn pre_release(rest: &str) -> (Option<Pre>, &str) {
    let body = rest.strip_prefix(['-', '.']).unwrap_or(rest);
    for (word, rank) in PRE_WORDS {
        let Some(head) = body.get(..word.len()) else {
            continue;
        };
        if !head.eq_ignore_ascii_case(word) {
            continue;
        }
        let after = &body[word.len()..];
        let numbered = after.strip_prefix(['.', '-']).unwrap_or(after);
        if let Some((number, after)) = leading_number(numbered) {
            return (Some(Pre { rank, number }), after);
        }
        if after.is_empty() || after.starts_with(['-', '.', '_']) {
            return (Some(Pre { rank, number: 0 }), after);
        }
    }
    (None, rest)
}

/// A final `-rN` (Bitnami's revision): what precedes it, and N.
fn revision(rest: &str) -> Option<(&str, u64)> {
    let at = rest.rfind("-r")?;
    let (suffix, tail) = rest.split_at(at);
    let (number, after) = leading_number(&tail[2..])?;
    after.is_empty().then_some((suffix, number))
}

/// `a1b2c3d`, `4f2e1d9c…` (7 to 64 hex digits with a letter and a digit), optionally after
/// `sha-`, `sha256-`, `git-` or `g`; an OCI referrers fallback tag (`sha256-<hex>.sig`).
fn is_commit_hash(tag: &str) -> bool {
    let lower = tag.to_ascii_lowercase();
    let body = ["sha256-", "sha-", "git-", "g"]
        .iter()
        .find_map(|prefix| lower.strip_prefix(prefix))
        .unwrap_or(&lower);
    let body = body.split('.').next().unwrap_or(body);
    (7..=64).contains(&body.len())
        && body.bytes().all(|b| b.is_ascii_hexdigit())
        && body.bytes().any(|b| b.is_ascii_digit())
        && (body.bytes().any(|b| b.is_ascii_alphabetic()) || body.len() >= 40)
}

/// `20240115`, `202401151200` (a timestamp), `2024-01-15`, `2024.01.15`, `2024_01_15`, each
/// possibly followed by more.
fn is_date(tag: &str) -> bool {
    let digits = tag.bytes().take_while(u8::is_ascii_digit).count();
    let year_month_day = |y: &str, m: &str, d: &str| {
        let (Ok(y), Ok(m), Ok(d)) = (y.parse::<u32>(), m.parse::<u32>(), d.parse::<u32>()) else {
            return false;
        };
        (1970..2100).contains(&y) && (1..=12).contains(&m) && (1..=31).contains(&d)
    };
    if matches!(digits, 8 | 10 | 12 | 14) {
        return year_month_day(&tag[..4], &tag[4..6], &tag[6..8]);
    }
    let b = tag.as_bytes();
    if digits == 4 && b.len() >= 10 {
        let sep = b[4];
        return matches!(sep, b'-' | b'.' | b'_')
            && b[7] == sep
            && b[5..7].iter().chain(&b[8..10]).all(u8::is_ascii_digit)
            && b.get(10).is_none_or(|c| !c.is_ascii_digit())
            && year_month_day(&tag[..4], &tag[5..7], &tag[8..10]);
    }
    false
}

/// The track of an image: the versions of its repository's tags with the shape of its own,
/// ordered, and where its own stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Track {
    /// The image's own tag.
    pub current: Version,
    /// Every version on the track, its own included, ascending.
    pub versions: Vec<Version>,
}

impl Track {
    /// The track of `current` among `tags` (the repository's, in any order; duplicates and
    /// tags of other shapes ignored).
    pub fn new<'a>(
        current: &str,
        tags: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, NoTrack> {
        let current = Version::parse(current)?;
        let pre = current.is_pre_release();
        let mut versions: Vec<Version> = tags
            .into_iter()
            .filter_map(|tag| Version::parse(tag).ok())
            .filter(|v| v.same_shape(&current) && (pre || !v.is_pre_release()))
            .collect();
        if !versions.iter().any(|v| v.tag == current.tag) {
            versions.push(current.clone());
        }
        versions.sort();
        versions.dedup_by(|a, b| a.tag == b.tag);
        Ok(Self { current, versions })
    }

    /// The versions above the current one, ascending: where an upgrade is searched.
    pub fn above(&self) -> &[Version] {
        let at = self.versions.partition_point(|v| *v <= self.current);
        &self.versions[at..]
    }

    /// The highest version of the track (the current one when nothing is above it).
    pub fn newest(&self) -> &Version {
        self.versions.last().unwrap_or(&self.current)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn tags_without_a_track() {
        let cases = [
            ("latest", NoTrack::Latest),
            ("LATEST", NoTrack::Latest),
            ("stable", NoTrack::NotAVersion),
            ("jammy-20240111", NoTrack::NotAVersion),
            ("mainline-alpine", NoTrack::NotAVersion),
            ("release-1.2.3", NoTrack::NotAVersion),
            ("20240115", NoTrack::Date),
            ("20240115-1", NoTrack::Date),
            ("202401151230", NoTrack::Date),
            ("2024-01-15", NoTrack::Date),
            ("2024.01.15", NoTrack::Date),
            ("2024_01_15-alpine", NoTrack::Date),
            ("a1b2c3d", NoTrack::CommitHash),
            ("4f2e1d9", NoTrack::CommitHash),
            ("sha-4f2e1d9", NoTrack::CommitHash),
            ("g4f2e1d9", NoTrack::CommitHash),
            (
                "sha256-9b2f4a4c7d1e0f3a5b6c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c.sig",
                NoTrack::CommitHash,
            ),
            (
                "1234567890123456789012345678901234567890",
                NoTrack::CommitHash,
            ),
            ("", NoTrack::NotAVersion),
            ("1.2.3.4.5.6.7.8.9", NoTrack::NotAVersion),
            ("99999999999999999999999", NoTrack::NotAVersion),
        ];
        for (tag, reason) in cases {
            assert_eq!(Version::parse(tag).err(), Some(reason), "{tag}");
        }
    }

    #[test]
    fn version_tags_and_their_shapes() {
        // (tag, v, components, pre-release, build, suffix)
        let cases = [
            ("1.25.3", false, 3, false, false, ""),
            ("v1.25.3", true, 3, false, false, ""),
            ("1.25", false, 2, false, false, ""),
            ("17", false, 1, false, false, ""),
            ("1.25.3-alpine", false, 3, false, false, "-alpine"),
            ("1.25.3-alpine3.19", false, 3, false, false, "-alpine3.19"),
            (
                "3.12.1-slim-bookworm",
                false,
                3,
                false,
                false,
                "-slim-bookworm",
            ),
            ("1.2.0-bullseye", false, 3, false, false, "-bullseye"),
            ("21-jre17", false, 1, false, false, "-jre17"),
            ("1.25.3-debian-12-r5", false, 3, false, true, "-debian-12"),
            ("17.0.9_9-jre", false, 3, false, true, "-jre"),
            ("1.2.0-rc.1", false, 3, true, false, ""),
            ("1.2.0-rc1-alpine", false, 3, true, false, "-alpine"),
            ("1.2.0rc1", false, 3, true, false, ""),
            ("2.0.0-beta", false, 3, true, false, ""),
            ("1.0.0-M2", false, 3, true, false, ""),
            ("3.1.0.dev0", false, 3, true, false, ""),
            ("22-ea-30-jdk", false, 1, true, false, "-jdk"),
            ("24.04", false, 2, false, false, ""),
            ("5.0-apache", false, 2, false, false, "-apache"),
        ];
        for (tag, v, components, pre, build, suffix) in cases {
            let version = Version::parse(tag).unwrap_or_else(|e| panic!("{tag}: {e:?}"));
            assert_eq!(
                (
                    version.v,
                    version.numbers.len(),
                    version.is_pre_release(),
                    version.build.is_some(),
                    version.suffix.as_str()
                ),
                (v, components, pre, build, suffix),
                "{tag}"
            );
        }
    }

    #[test]
    fn versions_order_as_versions() {
        let ordered = [
            "1.2.0-dev",
            "1.2.0-alpha",
            "1.2.0-alpha.2",
            "1.2.0-beta.1",
            "1.2.0-rc.1",
            "1.2.0-rc.10",
            "1.2.0",
            "1.2.1",
            "1.10.0",
            "2.0.0",
        ];
        for pair in ordered.windows(2) {
            let (a, b) = (
                Version::parse(pair[0]).unwrap(),
                Version::parse(pair[1]).unwrap(),
            );
            assert!(a < b, "{} < {}", pair[0], pair[1]);
        }
        let builds = [
            "1.25.3-debian-12-r0",
            "1.25.3-debian-12-r5",
            "1.25.4-debian-12-r0",
        ];
        for pair in builds.windows(2) {
            assert!(Version::parse(pair[0]).unwrap() < Version::parse(pair[1]).unwrap());
        }
    }

    #[test]
    fn a_track_keeps_the_shape_of_the_current_tag() {
        let tags = [
            "1.0.0",
            "1.1.0",
            "1.2.0",
            "1.10.0",
            "1.2",
            "v1.3.0",
            "1.3.0-alpine",
            "1.4.0-rc.1",
            "latest",
            "stable",
            "1.1.5",
            "1.1.0",
        ];
        let track = Track::new("1.1.0", tags).unwrap();
        let tags_of = |vs: &[Version]| vs.iter().map(|v| v.tag().to_owned()).collect::<Vec<_>>();
        assert_eq!(
            tags_of(&track.versions),
            ["1.0.0", "1.1.0", "1.1.5", "1.2.0", "1.10.0"]
        );
        assert_eq!(tags_of(track.above()), ["1.1.5", "1.2.0", "1.10.0"]);
        assert_eq!(track.newest().tag(), "1.10.0");

        let alpine = Track::new("1.2.0-alpine", tags).unwrap();
        assert_eq!(tags_of(&alpine.versions), ["1.2.0-alpine", "1.3.0-alpine"]);
        let v = Track::new("v1.0.0", tags).unwrap();
        assert_eq!(tags_of(&v.versions), ["v1.0.0", "v1.3.0"]);
        // Pre-releases only from a pre-release.
        let pre = Track::new("1.4.0-rc.0", tags).unwrap();
        assert_eq!(tags_of(pre.above()), ["1.4.0-rc.1", "1.10.0"]);
        // A current tag the list lacks is still placed.
        let missing = Track::new("1.1.2", tags).unwrap();
        assert_eq!(tags_of(missing.above()), ["1.1.5", "1.2.0", "1.10.0"]);
        // Nothing above: the newest is the current one.
        let top = Track::new("1.10.0", tags).unwrap();
        assert!(top.above().is_empty());
        assert_eq!(top.newest().tag(), "1.10.0");
        assert_eq!(Track::new("latest", tags).err(), Some(NoTrack::Latest));
    }

    proptest::proptest! {
        /// Any text: a version or a reason, never a panic; a version's tag is the text.
        #[test]
        fn any_tag_parses_or_says_why(tag in "[A-Za-z0-9_.-]{0,40}") {
            if let Ok(version) = Version::parse(&tag) {
                proptest::prop_assert_eq!(version.tag(), tag.as_str());
            }
        }

        /// Built versions order as their numbers do, and every version of a track has its
        /// shape.
        #[test]
        fn tracks_are_ordered_and_of_one_shape(
            numbers in proptest::collection::vec(proptest::collection::vec(0u64..30, 3), 1..40),
            suffix in proptest::sample::select(vec!["", "-alpine", "-slim", "-debian-12-r3"]),
        ) {
            let tags: Vec<String> = numbers
                .iter()
                .map(|n| format!("{}.{}.{}{suffix}", n[0], n[1], n[2]))
                .chain(["latest".to_owned(), "1.0-alpine".to_owned(), "v9.9.9".to_owned()])
                .collect();
            let current = tags[0].clone();
            let track = Track::new(&current, tags.iter().map(String::as_str)).unwrap();
            let shape = track.current.shape();
            for pair in track.versions.windows(2) {
                proptest::prop_assert!(pair[0] < pair[1]);
                proptest::prop_assert!(pair[0].numbers <= pair[1].numbers);
            }
            for version in &track.versions {
                proptest::prop_assert_eq!(version.shape(), shape.clone());
            }
            for version in track.above() {
                proptest::prop_assert!(*version > track.current);
            }
        }
    }
}
