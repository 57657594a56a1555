//! Registry hosts that time out fail fast: `noe inspect` and `noe explain` resolve images
//! concurrently, a few per registry host at a time, and after a host's first timeout the images
//! of that host not yet started fail at once instead of each waiting the timeout.

use std::collections::HashMap;

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
