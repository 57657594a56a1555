//! Platform overrides (`--platform-overrides FILE`): images whose platforms are stated by the
//! operator instead of read from their registry, consulted before any registry lookup — for
//! registries the webhook cannot reach, images whose metadata is wrong, and artifacts known to
//! be arch-neutral.
//!
//! The file is a YAML (or JSON) list; the first entry with a pattern matching the image wins:
//!
//! ```yaml
//! - images: ["registry.internal.corp/team", "docker.io/library/busybox:1.36"]
//!   platforms: ["linux/amd64", "linux/arm64/v8"]
//! - images: ["ghcr.io/org/wasm-module"]
//!   platforms: ["*"]          # arch-neutral: constrains nothing
//! ```
//!
//! Patterns have the kubelet `matchImages` syntax ([`noe_credentials::matching`]) and are
//! matched against the normalized reference the pod names, before `--registry-proxies`
//! (`nginx` is `docker.io/library/nginx:latest`; the path is a string prefix, so
//! `docker.io/library/nginx` also matches its tags), and a glob only in the host (a glob in the
//! path matches nothing: refused). A pattern naming a tag or a digest matches that tag or digest
//! exactly (`busybox:1.3` is not `busybox:1.36`). The file is bounded ([`MAX_FILE_BYTES`],
//! [`MAX_ENTRIES`], [`MAX_PATTERNS`] per entry, [`MAX_PATTERN_LEN`], at most
//! [`MAX_PLATFORMS`](noe_core::platform::MAX_PLATFORMS) platforms per entry), validated at start
//! with an error naming the entry, and read again in the background (every
//! [`DEFAULT_RELOAD_INTERVAL`](noe_credentials::DEFAULT_RELOAD_INTERVAL), off the async
//! workers through [`crate::files`]); a new version that cannot be read, is invalid, or is empty
//! (while the running one is not) is logged, counted in
//! `noe_registry_platform_overrides_reload_failures_total{reason}`, and the last good one kept.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::{Reference, Resolution};
use noe_core::platform::{Platform, WireFields, MAX_PLATFORMS};
use noe_credentials::files::FileReader;
use noe_credentials::matching::{check_pattern, image_matches};
use noe_credentials::reload::Reloading;

/// Largest file read.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Most entries in the file.
pub const MAX_ENTRIES: usize = 1024;
/// Most image patterns in one entry.
pub const MAX_PATTERNS: usize = 64;
/// Longest image pattern.
pub const MAX_PATTERN_LEN: usize = 255;

/// Why the overrides file cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OverridesError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: noe_credentials::files::FileError,
    },
    #[error("{path} does not exist")]
    Missing { path: PathBuf },
    #[error("{path} is empty while the running version has entries")]
    Emptied { path: PathBuf },
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: Invalid },
}

impl OverridesError {
    /// A bounded label for the error.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Read { .. } => "read",
            Self::Missing { .. } => "missing",
            Self::Emptied { .. } => "empty",
            Self::Invalid { .. } => "invalid",
        }
    }
}

/// What is wrong with the contents: the whole file, or one entry (numbered from 1).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Invalid {
    #[error("not a YAML list of {{images: [...], platforms: [...]}}: {0}")]
    Format(String),
    #[error("{0} entries (at most {MAX_ENTRIES})")]
    TooManyEntries(usize),
    #[error("entry {entry}: {reason}")]
    Entry { entry: usize, reason: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    images: Vec<String>,
    platforms: Vec<String>,
}

#[derive(Clone, Debug)]
struct Entry {
    images: Vec<String>,
    platforms: Arc<[Platform]>,
}

/// The parsed file: entries in file order.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    entries: Vec<Entry>,
}

/// The entry that answered for an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matched {
    /// The entry's position in the file, from 1.
    pub entry: usize,
    /// The pattern that matched, as written.
    pub pattern: String,
    /// The platforms it states (sorted; `[*]` for arch-neutral, see [`Platform::is_any`]).
    pub platforms: Arc<[Platform]>,
}

impl Matched {
    /// The [`Resolution`] an override gives `reference`: no registry contacted, so no digest,
    /// media type or credential.
    pub fn resolution(&self, reference: &Reference) -> Resolution {
        Resolution {
            image: reference.to_string(),
            resolved: reference.to_string(),
            digest: String::new(),
            media_type: String::new(),
            credential_source: None,
            platforms: self.platforms.to_vec(),
            answered_by: crate::cache::Answered::Override,
        }
    }

    /// The platforms it states, as written in the file's form, separated by spaces.
    pub fn platforms_text(&self) -> String {
        let platforms: Vec<String> = self.platforms.iter().map(ToString::to_string).collect();
        platforms.join(" ")
    }
}

/// `os/arch[/variant]` (validated as a registry's fields are), or `*`.
fn parse_platform(text: &str) -> Result<Platform, String> {
    if text == "*" {
        return Ok(Platform::any());
    }
    let parts: Vec<&str> = text.split('/').collect();
    let (os, architecture, variant) = match parts.as_slice() {
        [os, arch] => (*os, *arch, None),
        [os, arch, variant] => (*os, *arch, Some(*variant)),
        _ => {
            return Err(format!(
                "platform {:?} is not os/arch[/variant] or \"*\"",
                shorten(text)
            ))
        }
    };
    if os.is_empty() || variant.is_some_and(str::is_empty) {
        return Err(format!("platform {:?} has an empty part", shorten(text)));
    }
    Platform::from_wire(WireFields {
        os,
        architecture,
        variant,
        ..WireFields::default()
    })
    .map_err(|error| format!("platform {:?}: {error}", shorten(text)))
}

/// The error and its source on one line.
fn with_source(error: &OverridesError) -> String {
    match std::error::Error::source(error) {
        Some(source) => format!("{error}: {source}"),
        None => error.to_string(),
    }
}

fn shorten(text: &str) -> String {
    text.chars().take(64).collect()
}

/// `Err(empty)` when `items` is empty, an error naming them as `what` when there are more
/// than `max`.
fn count(items: &[String], empty: &str, what: &str, max: usize) -> Result<(), String> {
    if items.is_empty() {
        return Err(empty.to_owned());
    }
    if items.len() > max {
        return Err(format!("{} {what} (at most {max})", items.len()));
    }
    Ok(())
}

fn entry(raw: RawEntry) -> Result<Entry, String> {
    let RawEntry { images, platforms } = raw;
    count(&images, "images is empty", "image patterns", MAX_PATTERNS)?;
    for pattern in &images {
        let valid_glob = pattern
            .split('/')
            .next()
            .is_some_and(|host| host.split('.').all(noe_credentials::glob::is_valid));
        if pattern.is_empty()
            || pattern.len() > MAX_PATTERN_LEN
            || pattern.chars().any(|c| c.is_whitespace() || c.is_control())
            || !valid_glob
        {
            return Err(format!(
                "image pattern {:?} is not a kubelet matchImages pattern (at most {MAX_PATTERN_LEN} characters, no spaces)",
                shorten(pattern)
            ));
        }
        check_pattern(pattern).map_err(|reason| format!("image pattern {reason}"))?;
    }
    let empty = "platforms is empty (use [\"*\"] for an arch-neutral image)";
    count(&platforms, empty, "platforms", MAX_PLATFORMS)?;
    let mut parsed = platforms
        .iter()
        .map(|p| parse_platform(p))
        .collect::<Result<Vec<_>, _>>()?;
    if parsed.len() > 1 && parsed.iter().any(Platform::is_any) {
        return Err("\"*\" stands alone: it already means every platform".into());
    }
    parsed.sort();
    parsed.dedup();
    Ok(Entry {
        images,
        platforms: parsed.into(),
    })
}

impl Overrides {
    /// Parses and validates the file's contents; an empty file has no entry.
    pub fn parse(text: &str) -> Result<Self, Invalid> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let raw: Option<Vec<yaml_serde::Value>> =
            yaml_serde::from_str(text).map_err(|e| Invalid::Format(e.to_string()))?;
        let raw = raw.unwrap_or_default();
        if raw.len() > MAX_ENTRIES {
            return Err(Invalid::TooManyEntries(raw.len()));
        }
        let mut entries = Vec::with_capacity(raw.len());
        for (index, value) in raw.into_iter().enumerate() {
            let number = index.saturating_add(1);
            let parsed = yaml_serde::from_value::<RawEntry>(value)
                .map_err(|e| e.to_string())
                .and_then(entry)
                .map_err(|reason| Invalid::Entry {
                    entry: number,
                    reason,
                })?;
            entries.push(parsed);
        }
        Ok(Self { entries })
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The first entry with a pattern matching `reference` (normalized, before proxies).
    pub fn find(&self, reference: &Reference) -> Option<Matched> {
        let image = reference.to_string();
        self.entries.iter().enumerate().find_map(|(index, entry)| {
            let pattern = entry.images.iter().find(|p| matches(p, &image))?;
            Some(Matched {
                entry: index.saturating_add(1),
                pattern: pattern.clone(),
                platforms: entry.platforms.clone(),
            })
        })
    }
}

/// Whether the override pattern `pattern` answers for `image` (normalized): as the kubelet
/// matches, except that a pattern naming a tag or a digest names exactly that one (the kubelet's
/// string prefix would let `:1.3` match `:1.36` and `:1.3-evil`).
fn matches(pattern: &str, image: &str) -> bool {
    if !image_matches(pattern, image) {
        return false;
    }
    let pattern_path = pattern.trim().split_once('/').map_or("", |(_, path)| path);
    let last = pattern_path.rsplit('/').next().unwrap_or_default();
    let pins_digest = pattern_path.contains('@');
    if !pins_digest && !last.contains(':') {
        return true;
    }
    let image_path = image.split_once('/').map_or("", |(_, path)| path);
    // `image_matches` checked the prefix; what follows it must be nothing, or, after a tag,
    // the image's digest.
    let rest = image_path.get(pattern_path.len()..).unwrap_or("x");
    rest.is_empty() || (!pins_digest && rest.starts_with('@'))
}

/// The overrides file, read again in the background. Cheap to share behind an `Arc`.
#[derive(derive_more::Debug)]
#[debug("PlatformOverrides {{ path: {path:?}, .. }}")]
pub struct PlatformOverrides {
    path: PathBuf,
    files: FileReader,
    current: Reloading<Overrides>,
    failures: prometheus::IntCounterVec,
}

fn parse_bytes(path: &Path, bytes: &[u8]) -> Result<Overrides, OverridesError> {
    let text = std::str::from_utf8(bytes).map_err(|_| OverridesError::Invalid {
        path: path.to_owned(),
        reason: Invalid::Format("not UTF-8".into()),
    })?;
    Overrides::parse(text).map_err(|reason| OverridesError::Invalid {
        path: path.to_owned(),
        reason,
    })
}

impl PlatformOverrides {
    /// Reads and validates `path` now (start-up: blocking, bounded to [`MAX_FILE_BYTES`]); it is
    /// read again every `every` once lookups run.
    pub fn load(path: &Path, every: Duration) -> Result<Self, OverridesError> {
        let bytes = noe_credentials::files::read_blocking(path, MAX_FILE_BYTES)
            .map_err(|source| OverridesError::Read {
                path: path.to_owned(),
                source,
            })?
            .ok_or_else(|| OverridesError::Missing {
                path: path.to_owned(),
            })?;
        let overrides = parse_bytes(path, &bytes)?;
        let failures = prometheus::IntCounterVec::new(
            prometheus::Opts::new(
                "noe_registry_platform_overrides_reload_failures_total",
                "Platform overrides file versions not taken, the last good one kept, by reason (read, missing, invalid, empty)",
            ),
            &["reason"],
        )
        .map_err(|e| OverridesError::Invalid {
            path: path.to_owned(),
            reason: Invalid::Format(e.to_string()),
        })?;
        Ok(Self {
            path: path.to_owned(),
            files: FileReader::default(),
            current: Reloading::with_value(overrides, every),
            failures,
        })
    }

    /// Reloads that kept the last good version, by reason: registered with the resolver's
    /// metrics.
    pub fn failures(&self) -> &prometheus::IntCounterVec {
        &self.failures
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The entry answering for `reference`, from the last good version of the file.
    pub async fn find(&self, reference: &Reference) -> Option<Matched> {
        let current = self.current.get(|previous| self.read_again(previous)).await;
        current.find(reference)
    }

    /// The last good version of the file without waiting (the warm path); a reload starts in
    /// the background when it is due. `None` only before the first load (never after
    /// [`PlatformOverrides::load`]).
    pub fn now(&self) -> Option<Arc<Overrides>> {
        self.current.now(|previous| self.read_again(previous))
    }

    /// Reads the file again; what cannot be used keeps `previous`.
    fn read_again(
        &self,
        previous: Option<Arc<Overrides>>,
    ) -> impl std::future::Future<Output = Overrides> + Send + 'static {
        let path = self.path.clone();
        let files = self.files.clone();
        let failures = self.failures.clone();
        async move {
            let read = files.read(&path, MAX_FILE_BYTES).await;
            let had_entries = previous.as_ref().is_some_and(|p| !p.is_empty());
            let loaded = match read {
                Ok(Some(bytes)) => parse_bytes(&path, &bytes).and_then(|parsed| {
                    // Emptied (a truncated write, a ConfigMap key gone): like an invalid
                    // version, not "no override any more".
                    if parsed.is_empty() && had_entries {
                        Err(OverridesError::Emptied { path: path.clone() })
                    } else {
                        Ok(parsed)
                    }
                }),
                Ok(None) => Err(OverridesError::Missing { path: path.clone() }),
                Err(source) => Err(OverridesError::Read {
                    path: path.clone(),
                    source,
                }),
            };
            match loaded {
                Ok(overrides) => overrides,
                Err(error) => {
                    failures.with_label_values(&[error.kind()]).inc();
                    tracing::warn!(error = %with_source(&error), "platform overrides not read again: keeping the last good version");
                    previous.map(|p| (*p).clone()).unwrap_or_default()
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
