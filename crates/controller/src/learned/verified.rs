//! Verification mismatches (the registry's verdict cache, `Verdicts::subscribe`) learned into
//! the store with `source: verification`, on the Lease holder: a replica that does not lead
//! drops what its own verification finds (its verdict cache keeps it, and the leader verifies
//! the same images as they are admitted), so one writer stays the only writer.

use noe_core::truth::{Correction, Source};
use tokio::sync::broadcast::{self, error::RecvError};

use super::entry::{Entry, Evidence};
use super::write::LearnedWriter;
use crate::leader::Leadership;
use crate::shutdown::Shutdown;

/// The entry a verification mismatch becomes: no image (the verdict is the digest's), its
/// evidence the verdict's words, at the time it was learned.
pub fn entry(correction: &Correction, time: String) -> Entry {
    Entry::new(
        "",
        &correction.digest,
        &correction.platform,
        Source::Verification,
        Evidence {
            message: correction.evidence.clone(),
            time,
            ..Evidence::default()
        },
    )
}

/// Learns what `feed` brings while this replica leads, until the feed closes or shutdown.
pub(crate) async fn learn(
    writer: LearnedWriter,
    mut feed: broadcast::Receiver<Correction>,
    leadership: Leadership,
    mut shutdown: Shutdown,
) {
    loop {
        let correction = tokio::select! {
            () = shutdown.wait() => return,
            next = feed.recv() => match next {
                Ok(correction) => correction,
                Err(RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "verification mismatches not learned: the learned store fell behind");
                    continue;
                }
                Err(RecvError::Closed) => return,
            },
        };
        if correction.source != Source::Verification || !leadership.is_leader() {
            continue;
        }
        let entry = entry(&correction, super::now());
        if let Err(error) = writer.learn(entry).await {
            tracing::warn!(%error, digest = %correction.digest, platform = %correction.platform,
                "verification mismatch not learned");
        }
    }
}
