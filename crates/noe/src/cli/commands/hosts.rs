//! Registry hosts that time out fail fast: `noe inspect` and `noe explain` resolve images
//! concurrently, a few per registry host at a time, and after a host's first timeout the images
//! of that host not yet started fail at once instead of each waiting the timeout.

use std::collections::HashMap;

use noe_core::decide::{LookupError, LookupKind};
use noe_webhook::resolve::one_line;

/// A lookup's failure when the admission deadline passed (the admission's own wording).
const DEADLINE: &str = "deadline exceeded";
/// The `registry` label of these failures: no metric counts them.
const OTHER: &str = "other";

/// Images of one registry host resolved at the same time: after a host's first timeout, the
/// images of that host not yet started fail at once instead of each waiting the timeout.
const PER_HOST: usize = 2;

/// The registry hosts of this run that timed out, and how many lookups each has running.
#[derive(Default)]
pub struct Hosts {
    state: std::sync::Mutex<HashMap<String, HostState>>,
    changed: tokio::sync::Notify,
}

#[derive(Default)]
struct HostState {
    running: usize,
    /// The first timeout's message, once the host timed out.
    timed_out: Option<String>,
}

impl Hosts {
    /// Waits for a slot at `host`; `Err` with the first timeout's message once it timed out.
    pub async fn enter(&self, host: &str) -> Result<(), String> {
        loop {
            let changed = self.changed.notified();
            {
                let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
                let entry = state.entry(host.to_owned()).or_default();
                if let Some(message) = &entry.timed_out {
                    return Err(message.clone());
                }
                if entry.running < PER_HOST {
                    entry.running = entry.running.saturating_add(1);
                    return Ok(());
                }
            }
            changed.await;
        }
    }

    /// Gives the slot back; `timeout` marks the host as timed out.
    pub fn leave(&self, host: &str, timeout: Option<&str>) {
        {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let entry = state.entry(host.to_owned()).or_default();
            entry.running = entry.running.saturating_sub(1);
            if let (None, Some(message)) = (&entry.timed_out, timeout) {
                entry.timed_out = Some(message.to_owned());
            }
        }
        self.changed.notify_waiters();
    }
}

impl Hosts {
    /// Runs `lookup`, an image's lookup at `host` (`None`: a reference that does not parse, run
    /// as it is), in one of the host's slots and within `deadline`; `Err` with the failure in one
    /// line, or with why it was not tried once the host timed out earlier in this run. A timeout
    /// (the registry's, or the deadline) marks the host.
    pub async fn run<T>(
        &self,
        host: Option<&str>,
        deadline: std::time::Duration,
        lookup: impl std::future::Future<Output = Result<T, noe_registry::Error>>,
    ) -> Result<T, LookupError> {
        use noe_webhook::resolve::kind_of;
        let lookup = async {
            match tokio::time::timeout(deadline, lookup).await {
                Ok(Ok(answer)) => Ok(answer),
                Ok(Err(error)) => Err((
                    error.kind() == "timeout",
                    LookupError::new(kind_of(&error), OTHER, one_line(&error)),
                )),
                Err(_) => Err((
                    true,
                    LookupError::new(LookupKind::Deadline, OTHER, DEADLINE),
                )),
            }
        };
        let Some(host) = host else {
            return lookup.await.map_err(|(_, error)| error);
        };
        if let Err(first) = self.enter(host).await {
            return Err(LookupError::new(
                LookupKind::Timeout,
                OTHER,
                format!("not tried: {host} timed out earlier in this run ({first})"),
            ));
        }
        let answer = lookup.await;
        let timeout = match &answer {
            Err((true, error)) => Some(error.message.as_str()),
            _ => None,
        };
        self.leave(host, timeout);
        answer.map_err(|(_, error)| error)
    }
}
