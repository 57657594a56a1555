//! Verdicts by digest, kept: a platform manifest's digest is immutable, so its verification is
//! done once. In process, each platform's report is kept under its manifest digest (bounded by
//! its bytes, never expired); the shared cache (`crate::shared`) holds them for every replica,
//! MACed like every value. A mismatch is also a [`Correction`], kept under the digest the image
//! resolves to (the index's, or the single manifest's) and under the platform manifest's own,
//! and answered through [`Corrections`] to the one decider; each new one changes the
//! [`Corrections::generation`] and is sent to [`Verdicts::subscribe`]rs (the learned store's
//! writer).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use noe_core::truth::{Correction, Corrections};

use super::PlatformReport;

/// Bytes of reports kept in process by default.
pub const DEFAULT_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// Digests whose corrections are kept (each a few hundred bytes).
pub const MAX_CORRECTED_DIGESTS: usize = 16_384;
/// Corrections a new subscriber may fall behind by before it misses some.
const FEED_CAPACITY: usize = 256;

#[derive(Clone, Copy, Debug)]
struct ByWeight;

impl quick_cache::Weighter<String, Arc<PlatformReport>> for ByWeight {
    fn weight(&self, key: &String, report: &Arc<PlatformReport>) -> u64 {
        let report_bytes = report
            .report
            .evidence
            .len()
            .saturating_add(report.report.program.as_ref().map_or(0, String::len))
            .saturating_add(report.digest.len())
            .saturating_add(std::mem::size_of::<PlatformReport>());
        u64::try_from(key.len().saturating_add(report_bytes)).unwrap_or(u64::MAX)
    }
}

/// The verdicts this process knows.
pub struct Verdicts {
    reports: quick_cache::sync::Cache<String, Arc<PlatformReport>, ByWeight>,
    corrections: quick_cache::sync::Cache<String, Arc<[Correction]>>,
    /// Serializes the read-modify-write of a digest's corrections.
    adding: Mutex<()>,
    /// Corrections added so far.
    generation: AtomicU64,
    feed: tokio::sync::broadcast::Sender<Correction>,
}

impl std::fmt::Debug for Verdicts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verdicts")
            .field("reports", &self.reports.len())
            .field("corrected", &self.corrections.len())
            .field("generation", &self.generation())
            .finish()
    }
}

impl Default for Verdicts {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_BYTES)
    }
}

impl Verdicts {
    /// At most `max_bytes` of reports.
    pub fn new(max_bytes: u64) -> Self {
        let (feed, _) = tokio::sync::broadcast::channel(FEED_CAPACITY);
        Self {
            reports: quick_cache::sync::Cache::with_weighter(4096, max_bytes.max(1), ByWeight),
            corrections: quick_cache::sync::Cache::new(MAX_CORRECTED_DIGESTS),
            adding: Mutex::new(()),
            generation: AtomicU64::new(0),
            feed,
        }
    }

    /// The report of the platform manifest `digest`, if it was verified.
    pub fn report(&self, digest: &str) -> Option<Arc<PlatformReport>> {
        self.reports.get(digest)
    }

    /// Keeps `report`, a platform of the image that resolves to `image_digest`; a mismatch
    /// becomes a correction of both digests (a new one changes the generation and is sent to
    /// the subscribers).
    pub fn record(&self, image_digest: &str, report: &PlatformReport) {
        self.reports
            .insert(report.digest.clone(), Arc::new(report.clone()));
        let Some(correction) = report.report.correction(image_digest, &report.platform) else {
            return;
        };
        let mut added = false;
        {
            let _adding = self.adding.lock().unwrap_or_else(PoisonError::into_inner);
            for digest in [image_digest, report.digest.as_str()] {
                let mut kept: Vec<Correction> = self
                    .corrections
                    .get(digest)
                    .map(|known| known.to_vec())
                    .unwrap_or_default();
                if kept.iter().any(|c| c.platform == correction.platform) {
                    continue;
                }
                kept.push(Correction {
                    digest: digest.to_owned(),
                    ..correction.clone()
                });
                self.corrections.insert(digest.to_owned(), kept.into());
                added = true;
            }
        }
        if added {
            self.generation.fetch_add(1, Ordering::Release);
            // No subscriber is no error: the caches still hold it.
            let _ = self.feed.send(correction);
        }
    }

    /// Every new correction, as it is found (a subscriber that falls more than 256 behind
    /// misses the oldest: `RecvError::Lagged`).
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Correction> {
        self.feed.subscribe()
    }

    /// Reports kept.
    pub fn len(&self) -> usize {
        self.reports.len()
    }

    /// Whether no report is kept.
    pub fn is_empty(&self) -> bool {
        self.reports.is_empty()
    }
}

impl Corrections for Verdicts {
    fn for_digest(&self, digest: &str) -> Vec<Correction> {
        if self.generation() == 0 {
            return Vec::new();
        }
        self.corrections
            .get(digest)
            .map(|known| known.to_vec())
            .unwrap_or_default()
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use noe_core::binary::{Reason, Report, Verdict};
    use noe_core::truth::Source;
    use noe_core::Platform;

    use super::*;

    fn report(digest: &str, arch: &str, verdict: Verdict) -> PlatformReport {
        PlatformReport {
            platform: Platform::new("linux", arch, None),
            digest: digest.to_owned(),
            report: Report {
                verdict,
                reason: None,
                program: Some("/app".into()),
                machine: None,
                evidence: "/app is an x86-64 ELF (EM_X86_64)".into(),
            },
            bytes: 10,
            transient: false,
        }
    }

    #[test]
    fn a_mismatch_corrects_the_image_and_the_platform_manifest_once() {
        let verdicts = Verdicts::default();
        let mut feed = verdicts.subscribe();
        verdicts.record(
            "sha256:index",
            &report("sha256:amd", "amd64", Verdict::Verified),
        );
        assert_eq!(verdicts.generation(), 0);
        assert!(verdicts.for_digest("sha256:index").is_empty());
        let mismatch = report("sha256:arm", "arm64", Verdict::Mismatch);
        verdicts.record("sha256:index", &mismatch);
        verdicts.record("sha256:index", &mismatch);
        assert_eq!(verdicts.generation(), 1);
        let by_image = verdicts.for_digest("sha256:index");
        assert_eq!(by_image.len(), 1);
        assert_eq!(by_image[0].platform, Platform::new("linux", "arm64", None));
        assert_eq!(by_image[0].source, Source::Verification);
        assert_eq!(by_image[0].digest, "sha256:index");
        assert_eq!(verdicts.for_digest("sha256:arm")[0].digest, "sha256:arm");
        assert!(verdicts.for_digest("sha256:amd").is_empty());
        assert_eq!(feed.try_recv().unwrap().digest, "sha256:index");
        assert!(feed.try_recv().is_err());
        assert_eq!(
            verdicts.report("sha256:amd").unwrap().report.verdict,
            Verdict::Verified
        );
        assert_eq!(verdicts.len(), 2);
    }

    #[test]
    fn reports_are_bounded_by_their_bytes() {
        let verdicts = Verdicts::new(64 * 1024);
        for i in 0..10_000 {
            let mut unverifiable =
                report(&format!("sha256:{i:064}"), "amd64", Verdict::Unverifiable);
            unverifiable.report.reason = Some(Reason::NotFound);
            verdicts.record("sha256:x", &unverifiable);
        }
        assert!(verdicts.len() < 1000, "{}", verdicts.len());
    }
}
