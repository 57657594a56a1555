//! The HTTPS listeners' connection slots, so that connections that never start TLS cannot keep a
//! new client waiting.
//!
//! A connection is *in handshake* from its accept until it holds an *established* slot (its TLS
//! handshake done, and room among the established connections), then *established* until it
//! closes. Each state has its own bound ([`SlotLimits`]):
//!
//! - **in handshake**: at most `max_handshakes` in all and `max_handshakes_per_source` per source
//!   address (an IPv6 source by its /64). A connection accepted beyond either bound sheds the
//!   oldest connection still in handshake (of its own source, for the per-source bound): the
//!   listener always accepts, and connections that never start TLS only replace each other —
//!   a new client's handshake is never queued behind them. Each ends after `handshake_timeout`
//!   anyway.
//! - **established**: at most `max_connections`. When they are all taken, the oldest one with no
//!   request in flight is asked to close gracefully, and the new connection waits for the slot
//!   it frees (still in handshake meanwhile: shed like one, and within the same timeout).
//!
//! Counted in [`ListenerMetrics`]: connections by state, and what was shed by reason.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts};
use tokio::sync::Notify;

use super::conn::Activity;

/// Bounds on one listener's connections.
#[derive(Clone, Copy, Debug)]
pub struct SlotLimits {
    /// Established connections at most.
    pub max_connections: usize,
    /// Connections in their TLS handshake (or waiting for an established slot) at most.
    pub max_handshakes: usize,
    /// Of those, from one source address (an IPv6 source: its /64) at most.
    pub max_handshakes_per_source: usize,
    /// From the accept to an established slot, at most.
    pub handshake_timeout: Duration,
}

/// Which listener (the `listener` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listener {
    /// The admission (`--webhook-addr`).
    Webhook,
    /// The policy engines' lookup endpoint (`--lookup-addr`).
    Lookup,
}

impl Listener {
    pub const ALL: [Self; 2] = [Self::Webhook, Self::Lookup];

    pub fn label(self) -> &'static str {
        match self {
            Self::Webhook => "webhook",
            Self::Lookup => "lookup",
        }
    }
}

/// Why a connection was closed before it was served (the `reason` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shed {
    /// In handshake when a newer connection found `max_handshakes` in handshake.
    Handshakes,
    /// In handshake when a newer connection from its source found `max_handshakes_per_source`.
    Source,
    /// Its handshake (or its wait for an established slot) took longer than the timeout.
    Timeout,
    /// Established with no request in flight, closed to make room for a new connection.
    Idle,
}

impl Shed {
    pub const ALL: [Self; 4] = [Self::Handshakes, Self::Source, Self::Timeout, Self::Idle];

    pub fn label(self) -> &'static str {
        match self {
            Self::Handshakes => "handshakes",
            Self::Source => "source",
            Self::Timeout => "timeout",
            Self::Idle => "idle",
        }
    }

    fn index(self) -> usize {
        match self {
            Self::Handshakes => 0,
            Self::Source => 1,
            Self::Timeout => 2,
            Self::Idle => 3,
        }
    }
}

/// The metric families of every listener, registered once.
#[derive(Clone, Debug)]
pub struct ConnectionMetrics {
    connections: IntGaugeVec,
    shed: IntCounterVec,
}

impl ConnectionMetrics {
    /// `noe_webhook_connections{listener,state}` and
    /// `noe_webhook_connections_shed_total{listener,reason}`.
    pub fn register(registry: &prometheus::Registry) -> Result<Self, prometheus::Error> {
        let connections = IntGaugeVec::new(
            Opts::new(
                "noe_webhook_connections",
                "Open connections of the HTTPS listeners, by listener and state (handshake: accepted, TLS not done or no established slot yet; established)",
            ),
            &["listener", "state"],
        )?;
        let shed = IntCounterVec::new(
            Opts::new(
                "noe_webhook_connections_shed_total",
                "Connections of the HTTPS listeners closed before they were served, by listener and reason (handshakes, source: shed for a newer connection; timeout; idle: an established connection closed to make room)",
            ),
            &["listener", "reason"],
        )?;
        registry.register(Box::new(connections.clone()))?;
        registry.register(Box::new(shed.clone()))?;
        for listener in Listener::ALL {
            for state in ["handshake", "established"] {
                let _ = connections.with_label_values(&[listener.label(), state]);
            }
        }
        Ok(Self { connections, shed })
    }

    /// The children of one listener.
    pub fn listener(&self, listener: Listener) -> ListenerMetrics {
        let label = listener.label();
        ListenerMetrics {
            handshaking: self.connections.with_label_values(&[label, "handshake"]),
            established: self.connections.with_label_values(&[label, "established"]),
            shed: Shed::ALL.map(|reason| self.shed.with_label_values(&[label, reason.label()])),
        }
    }
}

/// One listener's metrics.
#[derive(Clone, Debug)]
pub struct ListenerMetrics {
    handshaking: IntGauge,
    established: IntGauge,
    shed: [IntCounter; 4],
}

impl ListenerMetrics {
    pub(crate) fn shed(&self, reason: Shed) {
        if let Some(counter) = self.shed.get(reason.index()) {
            counter.inc();
        }
    }
}

/// The slots of one listener. Shared by its accept loop and its connections.
#[derive(Debug)]
pub struct Slots {
    limits: SlotLimits,
    state: Mutex<State>,
    /// Woken when an established slot frees.
    freed: Notify,
    metrics: ListenerMetrics,
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    /// By age: the first is the oldest.
    handshaking: BTreeMap<u64, Pending>,
    per_source: HashMap<IpAddr, usize>,
    established: BTreeMap<u64, Open>,
}

#[derive(Debug)]
struct Pending {
    source: IpAddr,
    shed: Arc<Notify>,
}

#[derive(Debug)]
struct Open {
    activity: Arc<Activity>,
    /// Asked to close to make room (once).
    asked: bool,
}

impl State {
    /// Removes `id` from the connections in handshake; whether it was there.
    fn leave_handshake(&mut self, id: u64) -> bool {
        let Some(pending) = self.handshaking.remove(&id) else {
            return false;
        };
        if let Some(count) = self.per_source.get_mut(&pending.source) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.per_source.remove(&pending.source);
            }
        }
        true
    }

    /// Sheds the oldest connection in handshake (from `source`, when given).
    fn shed_oldest(&mut self, source: Option<IpAddr>) -> bool {
        let oldest = self
            .handshaking
            .iter()
            .find(|(_, pending)| source.is_none_or(|source| pending.source == source))
            .map(|(id, pending)| (*id, pending.shed.clone()));
        let Some((id, shed)) = oldest else {
            return false;
        };
        self.leave_handshake(id);
        shed.notify_one();
        true
    }
}

/// The address a source is counted by: an IPv4 address (IPv4-mapped IPv6 included) as it is,
/// an IPv6 address by its /64 (one host may hold a whole /64).
fn source_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                IpAddr::V6(segments.into())
            }
        },
    }
}

impl Slots {
    pub fn new(limits: SlotLimits, metrics: ListenerMetrics) -> Arc<Self> {
        Arc::new(Self {
            limits: SlotLimits {
                max_connections: limits.max_connections.max(1),
                max_handshakes: limits.max_handshakes.max(1),
                max_handshakes_per_source: limits.max_handshakes_per_source.max(1),
                handshake_timeout: limits.handshake_timeout,
            },
            state: Mutex::default(),
            freed: Notify::new(),
            metrics,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn gauges(&self, state: &State) {
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.metrics.handshaking.set(count(state.handshaking.len()));
        self.metrics.established.set(count(state.established.len()));
    }

    /// A connection just accepted from `peer`: in handshake now, shedding the oldest one in
    /// handshake (of its source first) when a bound is reached.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Handshake {
        let source = source_of(peer);
        let shed = Arc::new(Notify::new());
        let mut state = self.lock();
        let from_source = state.per_source.get(&source).copied().unwrap_or(0);
        if from_source >= self.limits.max_handshakes_per_source {
            if state.shed_oldest(Some(source)) {
                self.metrics.shed(Shed::Source);
            }
        } else if state.handshaking.len() >= self.limits.max_handshakes && state.shed_oldest(None) {
            self.metrics.shed(Shed::Handshakes);
        }
        let id = state.next;
        state.next = id.wrapping_add(1);
        state.handshaking.insert(
            id,
            Pending {
                source,
                shed: shed.clone(),
            },
        );
        *state.per_source.entry(source).or_insert(0) += 1;
        self.gauges(&state);
        drop(state);
        Handshake {
            slots: self.clone(),
            id,
            shed,
            deadline: tokio::time::Instant::now() + self.limits.handshake_timeout,
        }
    }
}

/// A connection in handshake; leaves that state when dropped or established.
#[derive(Debug)]
pub struct Handshake {
    slots: Arc<Slots>,
    id: u64,
    shed: Arc<Notify>,
    deadline: tokio::time::Instant,
}

/// Why a connection in handshake was not established.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotEstablished {
    /// Shed for a newer connection (counted when shed).
    Shed,
    /// The handshake timeout passed (counted here).
    TimedOut,
}

impl Handshake {
    /// Runs `handshake` until it is done, the connection is shed, or the handshake timeout.
    pub async fn run<F: std::future::Future>(
        &self,
        handshake: F,
    ) -> Result<F::Output, NotEstablished> {
        tokio::select! {
            done = handshake => Ok(done),
            () = self.shed.notified() => Err(NotEstablished::Shed),
            () = tokio::time::sleep_until(self.deadline) => {
                self.slots.metrics.shed(Shed::Timeout);
                Err(NotEstablished::TimedOut)
            }
        }
    }

    /// Takes an established slot for the connection whose activity is `activity`, asking the
    /// oldest idle established connection to close when none is free, and waiting for one
    /// within the handshake timeout (shed meanwhile like any connection in handshake).
    pub async fn establish(self, activity: Arc<Activity>) -> Result<Established, NotEstablished> {
        let slots = self.slots.clone();
        let taken = self
            .run(async {
                loop {
                    let freed = slots.freed.notified();
                    tokio::pin!(freed);
                    freed.as_mut().enable();
                    {
                        let mut state = slots.lock();
                        if state.established.len() < slots.limits.max_connections {
                            if !state.leave_handshake(self.id) {
                                // Shed while it waited: the caller sees the shed notification.
                                return false;
                            }
                            state.established.insert(
                                self.id,
                                Open {
                                    activity: activity.clone(),
                                    asked: false,
                                },
                            );
                            slots.gauges(&state);
                            return true;
                        }
                        let idle = state
                            .established
                            .values_mut()
                            .find(|open| !open.asked && open.activity.is_idle());
                        if let Some(open) = idle {
                            open.asked = true;
                            open.activity.close_gracefully();
                            slots.metrics.shed(Shed::Idle);
                        }
                    }
                    freed.await;
                }
            })
            .await?;
        if !taken {
            return Err(NotEstablished::Shed);
        }
        Ok(Established { slots, id: self.id })
    }
}

impl Drop for Handshake {
    fn drop(&mut self) {
        let mut state = self.slots.lock();
        if state.leave_handshake(self.id) {
            self.slots.gauges(&state);
        }
    }
}

/// An established connection's slot, freed when dropped.
#[derive(Debug)]
pub struct Established {
    slots: Arc<Slots>,
    id: u64,
}

impl Drop for Established {
    fn drop(&mut self) {
        let mut state = self.slots.lock();
        if state.established.remove(&self.id).is_some() {
            self.slots.gauges(&state);
        }
        drop(state);
        self.slots.freed.notify_waiters();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
