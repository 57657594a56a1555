//! The small runtime controllers plug into: one shared `kube::Client`, the node reflector,
//! leadership, an Event recorder, metrics and shutdown. A controller is a type implementing
//! [`Controller`]; adding one is a module and one line in [`Controllers::start`].

use std::sync::{Arc, Mutex};

use kube::runtime::events::{Recorder, Reporter};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::context::{Context, Controller, Stop};
use crate::leader::{self, Leadership};
use crate::learned::{LearnedView, LearnedWriter};
use crate::nodes::{self, NodeView};
use crate::shutdown::Shutdown;
use crate::{
    detect, learned, pods, remediate, taints, Config, Error, Metrics, PodPlatforms, Remediate,
};
use noe_core::bucket::TokenBucket;

/// What the composition root hands in.
#[derive(Clone, Default)]
pub struct Deps {
    /// Required with remediation (and used by detection before an eviction): what each pod's
    /// images can run on.
    pub platforms: Option<Arc<dyn PodPlatforms>>,
}

impl std::fmt::Debug for Deps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deps")
            .field("platforms", &self.platforms.is_some())
            .finish()
    }
}

/// Entry point.
#[derive(Debug)]
pub struct Controllers;

/// The running controllers.
#[derive(derive_more::Debug)]
#[debug("Running {{ nodes: {nodes:?}, tasks: {:?}, .. }}", tasks.len())]
pub struct Running {
    nodes: Option<NodeView>,
    leadership: Leadership,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
    /// What [`Running::start_gate`] needs.
    gate: Option<GateStart>,
    /// What [`Running::start_node_features`] needs, and what it started.
    features: FeatureStart,
    /// The learned store's read and write sides, when it is used.
    learned: Option<(LearnedView, LearnedWriter)>,
}

/// The node-feature reflector's part of the runtime.
struct FeatureStart {
    client: kube::Client,
    metrics: Metrics,
    view: Option<crate::NodeFeatureView>,
}

/// The gate controller's part of the configuration and runtime.
struct GateStart {
    client: kube::Client,
    config: crate::GateConfig,
    reporter: Reporter,
    metrics: Metrics,
}

impl Controllers {
    /// Starts what `config` enables (nothing when nothing is). Must be called within a tokio
    /// runtime. Admission serving never waits on anything started here.
    pub fn start(
        client: kube::Client,
        config: Config,
        deps: Deps,
        metrics: Metrics,
    ) -> Result<Running, Error> {
        config.validate()?;
        // Lists and watches back off on very short watches and honour Retry-After.
        let client = crate::pace::client(client);
        let (stop, stopped) = watch::channel(false);
        let shutdown = Shutdown(stopped);
        let mut tasks = JoinSet::new();
        let leadership = match &config.leader_election {
            Some(lease) => {
                let (writer, leadership) = Leadership::elected();
                let run = leader::run_elector(
                    client.clone(),
                    lease.clone(),
                    writer,
                    metrics.clone(),
                    shutdown.clone(),
                );
                tasks.spawn(run);
                leadership
            }
            None => {
                metrics.leader.set(1);
                Leadership::always()
            }
        };
        let reporter = Reporter {
            controller: config.controller_name.clone(),
            instance: config.instance.clone(),
        };
        let gate = config.gate.map(|gate| GateStart {
            client: client.clone(),
            config: gate,
            reporter: reporter.clone(),
            metrics: metrics.clone(),
        });
        let features = FeatureStart {
            client: client.clone(),
            metrics: metrics.clone(),
            view: None,
        };
        // Every replica reads the learned store; the writer writes only while leading.
        let learned = config.learned.clone().map(|store| {
            let view = LearnedView::new(store, Some(metrics.clone()));
            tasks.spawn(learned::watch(
                client.clone(),
                view.clone(),
                metrics.clone(),
                shutdown.clone(),
            ));
            let (writer, write) = learned::writer(
                client.clone(),
                config.controller_name.clone(),
                view.clone(),
                leadership.clone(),
                metrics.clone(),
                shutdown.clone(),
            );
            tasks.spawn(write);
            (view, writer)
        });
        let nodes = if config.needs_nodes() {
            let (nodes, reflect) =
                nodes::reflector(client.clone(), metrics.clone(), shutdown.clone());
            tasks.spawn(reflect);
            let ctx = Context {
                recorder: Recorder::new(client.clone(), reporter),
                client,
                config: Arc::new(config.clone()),
                leadership: leadership.clone(),
                nodes: nodes.clone(),
                metrics,
                evictions: Arc::new(Mutex::new(TokenBucket::new(
                    f64::from(config.remediate_rate_per_minute.max(1)) / 60.0,
                    config.remediate_rate_per_minute,
                    tokio::time::Instant::now().into_std(),
                ))),
            };
            if config.watches_pods() {
                let remediation = match config.remediate {
                    Remediate::Off => None,
                    Remediate::Report | Remediate::Evict => {
                        let platforms = deps.platforms.clone().ok_or_else(|| {
                            Error::Config("pod remediation needs the image platform lookup".into())
                        })?;
                        Some(remediate::Remediation::new(platforms, &config))
                    }
                };
                let detection = match (config.detect, &learned) {
                    (Some(detect), Some((_, writer))) => Some(detect::Detection::new(
                        detect,
                        writer.clone(),
                        deps.platforms.clone(),
                    )),
                    (Some(_), None) => {
                        return Err(Error::Config(
                            "exec-format-error detection needs the learned store".into(),
                        ))
                    }
                    (None, _) => None,
                };
                spawn_leading(
                    &mut tasks,
                    &ctx,
                    &shutdown,
                    pods::Pods {
                        remediation,
                        detection,
                    },
                );
            }
            if !config.taint_arches.is_empty() {
                spawn_leading(&mut tasks, &ctx, &shutdown, taints::Taints);
            }
            Some(nodes)
        } else {
            None
        };
        Ok(Running {
            nodes,
            leadership,
            stop,
            tasks,
            gate,
            features,
            learned,
        })
    }
}

/// Runs `controller` whenever this replica leads, until shutdown.
fn spawn_leading<C: Controller>(
    tasks: &mut JoinSet<()>,
    ctx: &Context,
    shutdown: &Shutdown,
    controller: C,
) {
    let ctx = ctx.clone();
    let mut shutdown = shutdown.clone();
    tasks.spawn(async move {
        let mut leadership = ctx.leadership.clone();
        loop {
            tokio::select! {
                () = leadership.leading() => {}
                () = shutdown.wait() => return,
            }
            tracing::info!(
                controller = controller.name(),
                "leading: controller started"
            );
            let mut lost = leadership.clone();
            let mut quit = shutdown.clone();
            let stop: Stop = Box::pin(async move {
                tokio::select! {
                    () = lost.lost() => {}
                    () = quit.wait() => {}
                }
            });
            controller.run(ctx.clone(), stop).await;
            tracing::info!(controller = controller.name(), "controller stopped");
            if *shutdown.0.borrow() {
                return;
            }
        }
    });
}

impl Running {
    /// The node store's read side (when node awareness, remediation or taints are on).
    pub fn node_view(&self) -> Option<NodeView> {
        self.nodes.clone()
    }

    /// Whether this replica may write now.
    pub fn leadership(&self) -> Leadership {
        self.leadership.clone()
    }

    /// Starts the gate controller (configured with [`crate::Config::gate`]) with the
    /// composition root's decision; it runs whenever this replica leads. Without a gate
    /// configuration (or a second time) nothing happens.
    pub fn start_gate(&mut self, planner: Arc<dyn crate::gate::GatePlanner>) {
        let Some(GateStart {
            client,
            config,
            reporter,
            metrics,
        }) = self.gate.take()
        else {
            return;
        };
        let state = crate::gate::State {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            leadership: self.leadership.clone(),
            metrics,
            config,
            planner,
            attempts: Mutex::default(),
        };
        let shutdown = Shutdown(self.stop.subscribe());
        self.tasks.spawn(crate::gate::run_leading(state, shutdown));
    }

    /// The learned store's read side (`Config::learned`): every replica's view of the
    /// corrections, for the decisions.
    pub fn learned_view(&self) -> Option<LearnedView> {
        self.learned.as_ref().map(|(view, _)| view.clone())
    }

    /// The learned store's write side: it writes only while this replica leads (verification
    /// mismatches are learned through it).
    pub fn learned_writer(&self) -> Option<LearnedWriter> {
        self.learned.as_ref().map(|(_, writer)| writer.clone())
    }

    /// Learns the verification mismatches `feed` brings into the learned store while this
    /// replica leads (`Verdicts::subscribe`); nothing without the learned store.
    pub fn learn_verifications(
        &mut self,
        feed: tokio::sync::broadcast::Receiver<noe_core::truth::Correction>,
    ) {
        if let Some((_, writer)) = &self.learned {
            self.tasks.spawn(learned::verified::learn(
                writer.clone(),
                feed,
                self.leadership.clone(),
                Shutdown(self.stop.subscribe()),
            ));
        }
    }

    /// The `NodeFeature` reflector's view, once [`Running::start_node_features`] started it.
    pub fn node_feature_view(&self) -> Option<crate::NodeFeatureView> {
        self.features.view.clone()
    }

    /// Starts the reflector of NFD's `NodeFeature` objects (`--watch-node-features`; RBAC
    /// `list/watch nodefeatures.nfd.k8s-sigs.io`) and returns its view; a second call returns
    /// the same view. Serving never waits for it: until it has listed, no node has features.
    pub fn start_node_features(&mut self) -> crate::NodeFeatureView {
        if let Some(view) = &self.features.view {
            return view.clone();
        }
        let (view, task) = crate::node_features::reflector(
            self.features.client.clone(),
            self.features.metrics.clone(),
            Shutdown(self.stop.subscribe()),
        );
        self.tasks.spawn(task);
        self.features.view = Some(view.clone());
        view
    }

    /// Stops every controller and reflector, releases a held lease, and waits for them.
    pub async fn shutdown(mut self) {
        self.stop.send_replace(true);
        while self.tasks.join_next().await.is_some() {}
    }
}
