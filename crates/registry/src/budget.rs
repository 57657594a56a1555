//! What one registry request is about and the request budget of the lookup it belongs to: the
//! vocabulary shared by the HTTP client, the per-host throttle and the resolver.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::Error;

/// What a request is about, for error messages and metric labels, and the request budget of the
/// lookup it belongs to.
#[derive(Clone, Debug)]
pub struct Context {
    /// The image reference as the user wrote it, normalized.
    pub reference: String,
    /// The registry host (after proxies).
    pub registry: String,
    /// Shared by every request of one lookup.
    pub budget: Budget,
}

/// The requests a lookup may still send; clones share the count.
#[derive(Clone, Debug)]
pub struct Budget {
    left: Arc<AtomicUsize>,
    limit: usize,
}

impl Budget {
    pub fn new(limit: usize) -> Self {
        Self {
            left: Arc::new(AtomicUsize::new(limit)),
            limit,
        }
    }

    /// Takes one request; false when none is left.
    pub(crate) fn take(&self) -> bool {
        self.left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
    }

    pub fn remaining(&self) -> usize {
        self.left.load(Ordering::Relaxed)
    }

    /// The error of a lookup that ran out of requests.
    pub fn exhausted(&self, ctx: &Context) -> Error {
        Error::RequestBudget {
            reference: ctx.reference.clone(),
            registry: ctx.registry.clone(),
            limit: self.limit,
        }
    }
}
