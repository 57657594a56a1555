//! Platforms proven by an image's own binaries (docs/architecture.md "Verification"): which
//! program a platform's config runs, where it is in the layers, and whether its ELF header is
//! the platform's machine. Pure: the registry crate streams the layers in and feeds each tar
//! entry to a [`Verification`]; nothing here reads a network, a disk or a clock.
//!
//! - [`elf`]: the ELF identification and the machine of each platform.
//! - [`program`]: `Entrypoint` + `Cmd`, `WorkingDir`, `PATH`, and `#!` lines.
//! - [`tar`]: a streamed tar reader with bounded buffers.
//! - [`path`]: paths inside an image.
//! - `search`: the merged view of the layers read so far (whiteouts, links).
//! - `verification`: the state machine from a config and a stream of entries to a [`Report`].

pub mod elf;
pub mod path;
pub mod program;
mod search;
pub mod tar;
mod verification;

use std::fmt;

use serde::{Deserialize, Serialize};

pub use elf::Machine;
pub use program::{Run, Shebang};
pub use search::{MAX_ENTRIES, MAX_HOPS, MAX_RECORDS, MAX_TEXT};
pub use verification::{Verification, MAX_LAYERS};

use crate::truth::{Correction, Source};
use crate::Platform;

/// What a verification concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The program is an ELF of the platform's machine.
    Verified,
    /// The program is an ELF of another machine: the platform's claim is false.
    Mismatch,
    /// Nothing can be said ([`Reason`]).
    Unverifiable,
}

impl Verdict {
    /// The wire and metric label form: `verified`, `mismatch`, `unverifiable`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Verified => "verified",
            Self::Mismatch => "mismatch",
            Self::Unverifiable => "unverifiable",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a platform is unverifiable. A bounded set: it is a metric label value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// No program to run, or no file at its path (a loop of links included).
    NotFound,
    /// The program is no ELF file (a JAR, data, a script whose interpreter is one of those).
    NotElf,
    /// A bound was reached (bytes, time, layers, entries, path length, decompression ratio).
    Budget,
    /// A Windows image (PE files, not ELF).
    Windows,
    /// The program's layer is foreign (non-distributable): it is not served by the registry.
    ForeignLayer,
    /// The registry failed, or served content that is not what its digest says.
    RegistryError,
    /// An architecture without a machine in the table (docs/architecture.md "Verification").
    UnknownPlatform,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotFound => "not-found",
            Self::NotElf => "not-elf",
            Self::Budget => "budget",
            Self::Windows => "windows",
            Self::ForeignLayer => "foreign-layer",
            Self::RegistryError => "registry-error",
            Self::UnknownPlatform => "unknown-platform",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Longest evidence text kept in a report.
pub const MAX_EVIDENCE_LEN: usize = 512;

/// The outcome of one platform's verification.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub verdict: Verdict,
    /// Set when the verdict is [`Verdict::Unverifiable`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    /// The program found (every link followed), or the path or name looked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// The machine of the ELF file that decided (the interpreter's, for a script).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Machine>,
    /// For people: `/app is an x86-64 ELF (EM_X86_64)`.
    pub evidence: String,
}

impl Report {
    /// An unverifiable report.
    pub fn unverifiable(
        reason: Reason,
        program: Option<&str>,
        evidence: impl Into<String>,
    ) -> Self {
        Self {
            verdict: Verdict::Unverifiable,
            reason: Some(reason),
            program: program.map(bounded),
            machine: None,
            evidence: bounded(&evidence.into()),
        }
    }

    /// The correction a mismatch makes of `platform` of the image `digest`; `None` for any
    /// other verdict.
    pub fn correction(&self, digest: &str, platform: &Platform) -> Option<Correction> {
        (self.verdict == Verdict::Mismatch).then(|| {
            Correction::new(
                digest,
                platform.clone(),
                Source::Verification,
                &self.evidence,
            )
        })
    }

    /// The verdict with its reason, as text: `mismatch`, `unverifiable: budget`.
    pub fn summary(&self) -> String {
        match self.reason {
            Some(reason) => format!("{}: {reason}", self.verdict),
            None => self.verdict.to_string(),
        }
    }
}

/// `text` cut to [`MAX_EVIDENCE_LEN`] bytes (on a character boundary), control characters
/// replaced: evidence quotes paths from layers.
fn bounded(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_EVIDENCE_LEN));
    for c in text.chars() {
        if out.len() + c.len_utf8() > MAX_EVIDENCE_LEN {
            break;
        }
        out.push(if c.is_control() { ' ' } else { c });
    }
    out
}

/// `a` or `an` before a machine's name (`an x86-64`, `an s390x`, `a riscv64`).
fn article(word: &str) -> &'static str {
    let first = word.chars().next().unwrap_or('m');
    if "aeiox".contains(first) || word.starts_with("s390") {
        "an"
    } else {
        "a"
    }
}
