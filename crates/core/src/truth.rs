//! Platform truth beyond what a registry claims: a platform of an image proven false, by the
//! image's own binaries (verification, docs/architecture.md "Verification") or by a pod that
//! crashed with `exec format error` on a node of that platform (docs/architecture.md "Learned
//! corrections"). A correction is keyed by the digest the image resolved to, so a rebuilt image
//! (a new digest) is trusted again, and a tag that still resolves to the corrected digest stays
//! corrected.
//!
//! Pure: the sources that know corrections (the verification cache, the learned store) implement
//! [`Corrections`]; the one decider asks them for each image's digest and applies [`correct`]
//! before the decision.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::Platform;

/// Longest evidence text a correction carries (characters); longer text is cut.
pub const MAX_EVIDENCE_CHARS: usize = 256;

/// Where a correction comes from. A bounded set: it is a metric label value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// The platform's entrypoint is an ELF binary of another machine.
    Verification,
    /// A container of the image failed with `exec format error` on a node of the platform.
    ExecFormatError,
}

impl Source {
    /// The wire and label form: `verification`, `exec-format-error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Verification => "verification",
            Self::ExecFormatError => "exec-format-error",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One platform of one image digest proven false.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Correction {
    /// The digest the image reference resolves to (`sha256:...`): the index's for a
    /// multi-platform image, the manifest's for a single one (what a container status's
    /// `imageID` names).
    pub digest: String,
    /// The platform claimed and proven false. A correction without a variant covers every
    /// variant of its OS and architecture; one without an OS covers every OS.
    pub platform: Platform,
    pub source: Source,
    /// What proves it, for people (`/app is an x86-64 ELF (EM_X86_64)`, or the pod, node and
    /// time of the crash); at most [`MAX_EVIDENCE_CHARS`].
    pub evidence: String,
}

impl Correction {
    /// A correction, its evidence cut to [`MAX_EVIDENCE_CHARS`] and stripped of control
    /// characters (it comes from registries and pod statuses).
    pub fn new(
        digest: impl Into<String>,
        platform: Platform,
        source: Source,
        evidence: &str,
    ) -> Self {
        let evidence = evidence
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(MAX_EVIDENCE_CHARS)
            .collect::<String>()
            .trim()
            .to_owned();
        Self {
            digest: digest.into(),
            platform,
            source,
            evidence,
        }
    }

    /// Whether it proves `claimed` false: same architecture, same OS (or either without one),
    /// and the same variant unless the correction names none.
    pub fn covers(&self, claimed: &Platform) -> bool {
        let os =
            self.platform.os.is_empty() || claimed.os.is_empty() || self.platform.os == claimed.os;
        let variant = self.platform.variant.is_none() || self.platform.variant == claimed.variant;
        self.platform.architecture == claimed.architecture && os && variant
    }

    /// The warning a decision carries for `image`:
    /// `image app:1: linux/arm64 is not used: verification: /app is an x86-64 ELF (EM_X86_64)`.
    pub fn warning(&self, image: &str) -> String {
        format!(
            "image {image}: {} is not used: {}: {}",
            self.platform, self.source, self.evidence
        )
    }
}

/// What knows corrections: the verification cache, the learned store, or several of them.
pub trait Corrections: Send + Sync + fmt::Debug {
    /// The corrections of `digest` (empty when none).
    fn for_digest(&self, digest: &str) -> Vec<Correction>;

    /// Changes whenever a correction is added or removed, so a decision remembered under one
    /// generation is not answered again under another.
    fn generation(&self) -> u64;
}

/// No correction at all.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoCorrections;

impl Corrections for NoCorrections {
    fn for_digest(&self, _digest: &str) -> Vec<Correction> {
        Vec::new()
    }

    fn generation(&self) -> u64 {
        0
    }
}

/// Several sources asked in turn; a correction two of them know is kept once.
#[derive(Clone, Debug, Default)]
pub struct Chain(Vec<Arc<dyn Corrections>>);

impl Chain {
    pub fn new(sources: Vec<Arc<dyn Corrections>>) -> Self {
        Self(sources)
    }
}

impl Corrections for Chain {
    fn for_digest(&self, digest: &str) -> Vec<Correction> {
        let mut all: Vec<Correction> = Vec::new();
        for source in &self.0 {
            for correction in source.for_digest(digest) {
                let known = all
                    .iter()
                    .any(|c| c.platform == correction.platform && c.source == correction.source);
                if !known {
                    all.push(correction);
                }
            }
        }
        all
    }

    fn generation(&self) -> u64 {
        // Each source's generation only grows; their sum changes whenever one of them does.
        self.0
            .iter()
            .fold(0u64, |sum, source| sum.wrapping_add(source.generation()))
    }
}

/// The platforms `claimed` keeps once `corrections` are applied, and the corrections that
/// removed at least one of them (in their given order, each once).
#[derive(Debug, PartialEq, Eq)]
pub struct Corrected<'a> {
    pub kept: Vec<Platform>,
    pub applied: Vec<&'a Correction>,
}

impl Corrected<'_> {
    /// Whether some platform was removed.
    pub fn changed(&self) -> bool {
        !self.applied.is_empty()
    }
}

/// Applies `corrections` to the platforms a registry `claimed`. An image left with no platform
/// supports no architecture: callers must not read an empty `kept` as arch-neutral when
/// [`Corrected::changed`].
pub fn correct<'a>(claimed: &[Platform], corrections: &'a [Correction]) -> Corrected<'a> {
    let mut applied: Vec<&'a Correction> = Vec::new();
    let kept = claimed
        .iter()
        .filter(|platform| {
            let Some(correction) = corrections.iter().find(|c| c.covers(platform)) else {
                return true;
            };
            if !applied.iter().any(|a| std::ptr::eq(*a, correction)) {
                applied.push(correction);
            }
            false
        })
        .cloned()
        .collect();
    Corrected { kept, applied }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linux(arch: &str) -> Platform {
        Platform::new("linux", arch, None)
    }

    fn correction(platform: Platform, source: Source) -> Correction {
        Correction::new(
            "sha256:ab",
            platform,
            source,
            "/app is an x86-64 ELF (EM_X86_64)",
        )
    }

    #[test]
    fn a_correction_removes_its_platform_and_every_variant() {
        let claimed = [
            linux("amd64"),
            linux("arm64"),
            Platform::new("linux", "arm64", Some("v8")),
            Platform::new("linux", "arm", Some("v7")),
        ];
        let corrections = [correction(linux("arm64"), Source::Verification)];
        let corrected = correct(&claimed, &corrections);
        assert_eq!(
            corrected.kept,
            vec![linux("amd64"), Platform::new("linux", "arm", Some("v7"))]
        );
        assert_eq!(corrected.applied, vec![&corrections[0]]);
        assert!(corrected.changed());
    }

    #[test]
    fn a_variant_correction_keeps_other_variants() {
        let claimed = [
            Platform::new("linux", "arm", Some("v6")),
            Platform::new("linux", "arm", Some("v7")),
        ];
        let corrections = [correction(
            Platform::new("linux", "arm", Some("v7")),
            Source::ExecFormatError,
        )];
        let corrected = correct(&claimed, &corrections);
        assert_eq!(
            corrected.kept,
            vec![Platform::new("linux", "arm", Some("v6"))]
        );
    }

    #[test]
    fn other_os_and_unrelated_corrections_change_nothing() {
        let claimed = [linux("amd64"), Platform::new("windows", "arm64", None)];
        let corrections = [correction(linux("arm64"), Source::Verification)];
        let corrected = correct(&claimed, &corrections);
        assert_eq!(corrected.kept, claimed.to_vec());
        assert!(!corrected.changed());
        // A correction without an OS covers every OS.
        let any_os = [correction(
            Platform::new("", "arm64", None),
            Source::Verification,
        )];
        assert_eq!(correct(&claimed, &any_os).kept, vec![linux("amd64")]);
    }

    #[test]
    fn every_platform_removed_is_reported_as_changed() {
        let claimed = [linux("arm64")];
        let corrections = [correction(linux("arm64"), Source::ExecFormatError)];
        let corrected = correct(&claimed, &corrections);
        assert!(corrected.kept.is_empty());
        assert!(corrected.changed());
    }

    #[test]
    fn evidence_is_bounded_and_has_no_control_characters() {
        let long = format!(
            "exec /app:\u{1b}[31m exec format error\n{}",
            "x".repeat(1000)
        );
        let c = Correction::new("sha256:ab", linux("arm64"), Source::ExecFormatError, &long);
        assert!(c.evidence.chars().count() <= MAX_EVIDENCE_CHARS);
        assert!(!c.evidence.chars().any(char::is_control));
        assert_eq!(
            c.warning("app:1").split(": ").take(3).collect::<Vec<_>>(),
            vec![
                "image app:1",
                "linux/arm64 is not used",
                "exec-format-error"
            ]
        );
    }

    #[derive(Debug)]
    struct Fixed(Vec<Correction>, u64);

    impl Corrections for Fixed {
        fn for_digest(&self, digest: &str) -> Vec<Correction> {
            self.0
                .iter()
                .filter(|c| c.digest == digest)
                .cloned()
                .collect()
        }
        fn generation(&self) -> u64 {
            self.1
        }
    }

    #[test]
    fn a_chain_asks_every_source_and_keeps_each_correction_once() {
        let verified = correction(linux("arm64"), Source::Verification);
        let learned = correction(linux("arm64"), Source::ExecFormatError);
        let chain = Chain::new(vec![
            Arc::new(Fixed(vec![verified.clone()], 2)),
            Arc::new(Fixed(vec![verified.clone(), learned.clone()], 3)),
            Arc::new(NoCorrections),
        ]);
        assert_eq!(chain.for_digest("sha256:ab"), vec![verified, learned]);
        assert!(chain.for_digest("sha256:cd").is_empty());
        assert_eq!(chain.generation(), 5);
    }
}
