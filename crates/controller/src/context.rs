//! What a controller plugs into the runtime with: the [`Controller`] trait, the [`Context`] every
//! controller gets (shared client, config, leadership, node view, Event recorder, metrics), and
//! the stop signal. The runtime (`runtime.rs`) starts the controllers; they depend
//! on this module only, never on the runtime.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use kube::runtime::events::Recorder;

use crate::leader::Leadership;
use crate::nodes::NodeView;
use crate::{Config, Error, Metrics};

/// What every controller gets.
#[derive(Clone)]
pub(crate) struct Context {
    pub(crate) client: kube::Client,
    pub(crate) config: Arc<Config>,
    pub(crate) leadership: Leadership,
    pub(crate) nodes: NodeView,
    pub(crate) recorder: Recorder,
    pub(crate) metrics: Metrics,
    /// At most `--remediate-rate` evictions per minute, whoever evicts (remediation,
    /// exec-format-error detection).
    pub(crate) evictions: Arc<Mutex<noe_core::bucket::TokenBucket>>,
}

impl Context {
    /// `Err(NotLeader)` unless this replica may write now: call right before every write.
    pub(crate) fn check_leader(&self, action: impl FnOnce() -> String) -> Result<(), Error> {
        if self.leadership.is_leader() {
            Ok(())
        } else {
            Err(Error::NotLeader { action: action() })
        }
    }
}

/// Resolves when a controller must stop (leadership lost or shutdown).
pub(crate) type Stop = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + Sync>>;

/// A writing controller. It runs only while this replica leads: `run` is called when
/// leadership starts and must return soon after `stop` resolves (leadership lost or shutdown).
pub(crate) trait Controller: Send + Sync + 'static {
    /// For logs.
    fn name(&self) -> &'static str;
    /// Runs until `stop` resolves.
    fn run(&self, ctx: Context, stop: Stop) -> BoxFuture<'static, ()>;
}
