//! noe-rs controllers (docs/architecture.md, "Controllers"), on kube-runtime with one shared
//! `kube::Client`. Every part is opt-in ([`Config`]):
//!
//! - **node awareness**: a Node reflector and [`NodeView`], a cheap synchronous read view for the
//!   admission side (`archs()`, `node(name)`);
//! - **pod remediation** ([`Remediate`]): pods bound to a node their images cannot run on get an
//!   Event and a metric, and with `Evict` an eviction through the Eviction API, rate-limited;
//! - **node taints by arch** (`taint_arches`): `arch.noe.adevinta.com/arch=<arch>:NoSchedule` on
//!   nodes of those arches; [`untaint`] removes ours;
//! - **gate release** ([`gate`], `--lookup-mode=gate|hybrid`): pods the admission gated are
//!   released with their constraints in one write, by [`Running::start_gate`];
//! - **exec-format-error detection** ([`detect`], `Config::detect`): containers that crash
//!   with `exec format error` become corrections in the **learned store** ([`learned`], a
//!   ConfigMap every replica reads: [`LearnedView`] answers `noe_core::truth::Corrections`);
//! - **leader election** on a Lease ([`LeaseConfig`]): writing controllers run only on the
//!   leader and check leadership right before every write; reflectors run everywhere.
//!
//! The registry side comes in through [`PodPlatforms`], implemented by the composition root; this
//! crate does not depend on the webhook. Decisions are pure functions ([`remediate::screen`],
//! [`remediate::judge`], [`taints::apply`]) tested by tables.
//!
//! ```no_run
//! # async fn demo(client: kube::Client, platforms: std::sync::Arc<dyn noe_controller::PodPlatforms>) -> anyhow::Result<()> {
//! use noe_controller::{Config, Controllers, Deps, Metrics, Remediate};
//! let config = Config { remediate: Remediate::Report, ..Config::default() };
//! let metrics = Metrics::new(&prometheus::Registry::new(), config.metrics_max_namespaces)?;
//! let running = Controllers::start(client, config, Deps { platforms: Some(platforms) }, metrics)?;
//! let nodes = running.node_view(); // hand to the admission side
//! running.shutdown().await;
//! # Ok(()) }
//! ```

mod config;
mod context;
pub mod detect;
mod error;
pub mod gate;
mod jitter;
mod leader;
pub mod learned;
mod metrics;
pub mod node_features;
mod nodes;
pub mod objects;
mod pace;
mod platforms;
mod pods;
mod queue;
pub mod remediate;
mod runtime;
mod shutdown;
pub mod taints;

pub use config::{Config, GateConfig, LeaseConfig, Remediate, Timings, KUBE_SYSTEM};
pub use detect::DetectConfig;
pub use error::Error;
pub use leader::Leadership;
pub use learned::{LearnedConfig, LearnedView, LearnedWriter};
pub use metrics::{Metrics, OTHER_NAMESPACE};
pub use node_features::NodeFeatureView;
pub use nodes::NodeView;
pub use platforms::{ImageLookup, LookupError, Platform, PodImages, PodPlatforms, Support};
pub use runtime::{Controllers, Deps, Running};
pub use taints::untaint;
