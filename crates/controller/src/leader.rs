//! Leadership: who may write. Without election every replica leads ([`Leadership::always`]);
//! with it, only the holder of a `coordination.k8s.io/v1` Lease does, and only until its renew
//! deadline passes without a successful renewal — checked on the local monotonic clock at every
//! write, so a leader cut off from the API stops writing even if its election task is stuck.
//!
//! Why a hand-written lease loop (client-go's algorithm) rather than a crate: see
//! docs/architecture.md, "Leader election".

mod decide;
mod elector;

pub(crate) use decide::{decide, Attempt, Observed};
pub(crate) use elector::run as run_elector;

use tokio::sync::watch;
use tokio::time::Instant;

/// A cheap, clonable view of whether this replica may write now.
#[derive(Clone, Debug)]
pub struct Leadership {
    /// `Some(deadline)` while leading: writes are allowed until that instant unless renewed.
    state: watch::Receiver<Option<Instant>>,
}

/// The writer side, held by the elector.
#[derive(Debug)]
pub(crate) struct LeadershipWriter {
    state: watch::Sender<Option<Instant>>,
}

impl Leadership {
    /// Always leading (no election: one replica).
    pub fn always() -> Self {
        let (_, state) = watch::channel(Some(far_future()));
        Self { state }
    }

    pub(crate) fn elected() -> (LeadershipWriter, Self) {
        let (writer, state) = watch::channel(None);
        (LeadershipWriter { state: writer }, Self { state })
    }

    /// Whether this replica may write now.
    pub fn is_leader(&self) -> bool {
        matches!(*self.state.borrow(), Some(deadline) if Instant::now() < deadline)
    }

    /// Resolves once this replica leads (at once if it does).
    pub async fn leading(&mut self) {
        loop {
            if self.is_leader() {
                return;
            }
            if self.state.changed().await.is_err() {
                // The elector is gone: nobody will make us leader.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Resolves once this replica no longer leads: the elector said so, or the renew
    /// deadline passed without a renewal.
    pub async fn lost(&mut self) {
        loop {
            let deadline = *self.state.borrow_and_update();
            let Some(deadline) = deadline.filter(|deadline| Instant::now() < *deadline) else {
                return;
            };
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {}
                changed = self.state.changed() => {
                    if changed.is_err() {
                        // Elector gone: leadership ends at the last deadline.
                        tokio::time::sleep_until(deadline).await;
                        return;
                    }
                }
            }
        }
    }
}

impl LeadershipWriter {
    pub(crate) fn lead_until(&self, deadline: Instant) {
        self.state.send_replace(Some(deadline));
    }

    pub(crate) fn step_down(&self) {
        self.state.send_replace(None);
    }
}

/// An instant no test or process reaches (a century away, without overflow).
fn far_future() -> Instant {
    let now = Instant::now();
    now.checked_add(std::time::Duration::from_secs(100 * 365 * 24 * 3600))
        .unwrap_or(now)
}
