//! A scripted source of platform corrections ([`noe_core::truth::Corrections`]): what the
//! verification cache and the learned store answer, for tests of every path that decides.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use noe_core::truth::{Correction, Corrections, Source};
use noe_core::Platform;

/// Corrections by digest, changed while a test runs; each change moves the generation.
#[derive(Debug, Default)]
pub struct FakeCorrections {
    by_digest: Mutex<BTreeMap<String, Vec<Correction>>>,
    generation: AtomicU64,
    asked: AtomicU64,
}

impl FakeCorrections {
    /// linux/arm64 of `digest` proven false by verification
    /// (`/app is an x86-64 ELF (EM_X86_64)`).
    pub fn arm64_false(digest: &str) -> Arc<Self> {
        let fake = Arc::new(Self::default());
        fake.add(Correction::new(
            digest,
            Platform::new("linux", "arm64", None),
            Source::Verification,
            "/app is an x86-64 ELF (EM_X86_64)",
        ));
        fake
    }

    /// Adds `correction` (a new generation).
    pub fn add(&self, correction: Correction) {
        self.by_digest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(correction.digest.clone())
            .or_default()
            .push(correction);
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Removes every correction (a new generation).
    pub fn clear(&self) {
        self.by_digest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// How many times a digest was asked about.
    pub fn asked(&self) -> u64 {
        self.asked.load(Ordering::SeqCst)
    }
}

impl Corrections for FakeCorrections {
    fn for_digest(&self, digest: &str) -> Vec<Correction> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.by_digest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(digest)
            .cloned()
            .unwrap_or_default()
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }
}
