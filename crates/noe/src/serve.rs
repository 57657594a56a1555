//! `noe` (or `noe serve`): the composition root. The only place where the server, the
//! admission, the resolver, the credentials, the Kubernetes client and the controllers are built
//! and connected.

pub mod facts;
pub mod gate;
pub mod platforms;
pub mod policy_endpoint;
pub mod process;
pub mod selection;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use noe_controller::{Controllers, Deps, Leadership, NodeView};
use noe_webhook::admission::gate::namespace_selection::NamespaceSelection;
use noe_webhook::admission::gate::{ExemptNamespaces, GateSettings, LookupMode};
use noe_webhook::admission::Admission;
use noe_webhook::resolve::pull_secrets::PullSecrets;
use noe_webhook::server::health::Readiness;
use noe_webhook::server::tls::{self, CertDir, Reloadable};
use noe_webhook::server::{self, BodyLimits, Limits, Running, Termination, CERT_POLL_INTERVAL};

use crate::app::{self, App};
use crate::config::{self, CertSource, ControllerSettings, ServerSettings};
use platforms::ResolverPlatforms;

/// How long the controllers may take to stop (a held Lease is released) before they are
/// abandoned.
const CONTROLLERS_STOP: Duration = Duration::from_secs(5);

/// Serves until SIGTERM, SIGINT or SIGHUP.
pub async fn run(config: config::Serve) -> ExitCode {
    match serve(config, server::termination()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(error = %format!("{error:#}"), "Cannot serve");
            eprintln!("noe: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Starts, serves until `shutdown` resolves, then shuts down: after SIGTERM not ready at once,
/// answering for `--shutdown-delay`, then draining; after SIGINT or SIGHUP draining at once.
pub async fn serve(
    config: config::Serve,
    shutdown: impl std::future::Future<Output = Termination>,
) -> anyhow::Result<()> {
    let delay = config.server.shutdown_delay;
    let serving = start(config).await?;
    let delay = match shutdown.await {
        Termination::Terminate => delay,
        Termination::Interrupt => Duration::ZERO,
    };
    tracing::info!(?delay, "Shutting down");
    serving.terminate(delay).await;
    Ok(())
}

/// The running server and controllers.
#[derive(Debug)]
pub struct Serving {
    pub webhook_addr: SocketAddr,
    /// The policy engines' lookup endpoint, when `--lookup-addr` is set.
    pub lookup_addr: Option<SocketAddr>,
    pub metrics_addr: SocketAddr,
    pub health_addr: SocketAddr,
    server: Running,
    controllers: Option<noe_controller::Running>,
}

impl Serving {
    /// What `/readyz` answers.
    pub fn readiness(&self) -> &Readiness {
        &self.server.readiness
    }

    /// The node reflector's view (`--watch-nodes`, remediation or taints).
    pub fn node_view(&self) -> Option<NodeView> {
        self.controllers.as_ref().and_then(|c| c.node_view())
    }

    /// The `NodeFeature` reflector's view (`--watch-node-features`).
    pub fn node_feature_view(&self) -> Option<noe_controller::NodeFeatureView> {
        self.controllers
            .as_ref()
            .and_then(|c| c.node_feature_view())
    }

    /// Whether this replica may run the writing controllers now (`None`: no controller runs).
    pub fn leadership(&self) -> Option<Leadership> {
        self.controllers.as_ref().map(|c| c.leadership())
    }

    /// Stops the controllers (releasing a held Lease) and the server, draining open admission
    /// connections.
    pub async fn shutdown(self) {
        futures::join!(stop(self.controllers), self.server.shutdown());
    }

    /// The shutdown a pod gets: the controllers stop at once (another replica takes the Lease
    /// over), admissions are still answered for `delay` while the endpoint is removed, then
    /// drained.
    pub async fn terminate(self, delay: Duration) {
        futures::join!(stop(self.controllers), self.server.terminate(delay));
    }
}

async fn stop(controllers: Option<noe_controller::Running>) {
    let Some(controllers) = controllers else {
        return;
    };
    if tokio::time::timeout(CONTROLLERS_STOP, controllers.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(timeout = ?CONTROLLERS_STOP, "Controllers did not stop in time; abandoned");
    }
}

/// Builds everything and starts serving.
pub async fn start(config: config::Serve) -> anyhow::Result<Serving> {
    let config::Serve {
        server:
            ServerSettings {
                cert,
                addresses,
                facts,
                shutdown_delay: _,
                metrics_max_namespaces,
                lookup: lookup_settings,
                verify_binaries,
            },
        kube,
        decision: config::Decision {
            policy,
            admission_deadline,
        },
        registry,
        controllers,
    } = config;
    let tls = match cert {
        CertSource::SelfSigned => {
            tracing::warn!("Serving a generated self-signed certificate (--dev-self-signed-cert): local trials only");
            let (key, _pem) = tls::self_signed()?;
            Reloadable::new(key)
        }
        CertSource::Dir(dir) => {
            // Starts without one (not ready) when cert-manager has not written it yet.
            let (watched, tls) = CertDir::open(&dir)?;
            tokio::spawn(watched.watch(tls.clone(), CERT_POLL_INTERVAL));
            tls
        }
    };
    let service_account_tokens = registry.sources.service_account_tokens;
    let app = App::build(registry).await?;
    // Cold lookups are verified in the background from now on; every decision leaves out what
    // the verdicts prove false (the one corrections seam every decider reads).
    let verification = verify_binaries.then(|| app.resolver.start_background_verification());
    let app = corrected(app, verify_binaries, None);
    process::register(&app.metrics).context("cannot register the process metrics")?;
    // One client for the pull secrets and the controllers.
    let client = match app::kube_client(&kube).await {
        Ok(client) => Some(client),
        Err(error) if controllers.config.is_enabled() => {
            return Err(error).context("the controllers need Kubernetes API access");
        }
        Err(error) => {
            tracing::warn!(error = %noe_webhook::resolve::one_line(&error), "No Kubernetes API access: image pull secrets are not read");
            None
        }
    };
    if controllers.leader_elect && controllers.config.leader_election.is_none() {
        tracing::info!("--leader-elect: no writing controller is enabled, nothing to elect");
    }
    let pull_secrets = client.clone().map(|client| match service_account_tokens {
        true => PullSecrets::new(client).with_service_account_tokens(),
        false => PullSecrets::new(client),
    });
    let client_for_facts = client.clone();
    let client_for_gate = client.clone();
    let mut running = match client {
        Some(client) if controllers.config.is_enabled() => Some(start_controllers(
            client,
            &controllers,
            &app,
            pull_secrets.clone(),
            metrics_max_namespaces,
        )?),
        _ => None,
    };
    // Verification mismatches are learned into the store (`--detect-exec-format-errors`), by
    // the Lease holder.
    if let Some(running) = running.as_mut() {
        running.learn_verifications(app.resolver.verdicts().subscribe());
    }
    // What nodes' exec format errors taught (`--detect-exec-format-errors`) reaches every
    // decider built from here on (admission, the gate's release), beside the verdicts.
    let app = match running.as_ref().and_then(|r| r.learned_view()) {
        Some(learned) => corrected(app, verify_binaries, Some(learned)),
        None => app,
    };
    // Built once every source of corrections is known, so the policy engines' answers leave
    // out what every replica's learned view holds too. Checked before anything listens: a bad
    // client CA or a missing API fails the start.
    let lookup = match lookup_settings
        .map(|settings| policy_endpoint::build(settings, &app, client_for_gate.clone(), &tls))
        .transpose()
    {
        Ok(lookup) => lookup,
        Err(error) => {
            stop(running).await;
            return Err(error);
        }
    };
    let gating = controllers.lookup_mode != LookupMode::Inline;
    let gate_policy = gating.then(|| policy.clone());
    let mut decider = app.decider(
        policy,
        admission_deadline,
        metrics_max_namespaces,
        pull_secrets.clone(),
    )?;
    let view = running
        .as_ref()
        .filter(|_| controllers.node_facts)
        .and_then(|r| r.node_view());
    let source = facts::source(
        facts,
        client_for_facts,
        decider.metrics().fact_errors.clone(),
        view,
    )?;
    // The gate controller decides with the same facts as inline admission (the namespace's
    // preference, the cluster's nodes).
    if let (Some(policy), Some(running)) = (gate_policy, running.as_mut()) {
        let planner = gate::DecisionPlanner::new(
            &app,
            &policy,
            platforms::DEADLINE,
            pull_secrets.clone(),
            source.clone(),
        )?
        .holding_for(verification.clone().filter(|_| controllers.gate_verify));
        running.start_gate(Arc::new(planner));
    }
    if let Some(source) = source {
        decider = decider.with_facts(source);
    }
    if let Some(settings) = controllers.image_selection {
        let Some(view) = running.as_ref().and_then(|r| r.node_view()) else {
            anyhow::bail!("--image-selection needs --watch-nodes and Kubernetes API access");
        };
        let features = running
            .as_mut()
            .filter(|_| settings.node_features)
            .map(|r| r.start_node_features());
        let discovery = match (settings.all_namespaces, &client_for_gate) {
            (true, _) => noe_webhook::selection::Discovery::Everywhere,
            (false, Some(client)) => noe_webhook::selection::Discovery::Labelled(Arc::new(
                noe_webhook::selection::opt_in::LabelledNamespaces::new(client.clone()),
            )),
            (false, None) => noe_webhook::selection::Discovery::Off,
        };
        decider = decider.with_selection(
            noe_webhook::selection::Selection::new(
                app.resolver.clone(),
                Arc::new(app.credentials(pull_secrets.clone())),
                Arc::new(selection::NodeViewNodes { view, features }),
                discovery,
            )
            .with_negative_ttl(settings.negative_ttl),
        );
    }
    let mut admission = Admission::deciding(decider);
    if gating {
        let exempt = ExemptNamespaces::default();
        if let Some(client) = &client_for_gate {
            gate::watch_webhook_namespaces(client.clone(), exempt.clone());
        }
        let namespaces = match (&client_for_gate, &controllers.gate_namespace_selector) {
            (_, selector) if selector.is_empty() => None,
            (Some(client), selector) => Some(
                NamespaceSelection::new(client.clone(), selector.clone())
                    .with_error_counter(admission.metrics().fact_errors.clone()),
            ),
            (None, _) => anyhow::bail!(
                "--gate-namespace-selector needs Kubernetes API access (in a pod, or --kubeconfig)"
            ),
        };
        admission = admission.with_gate(GateSettings {
            mode: controllers.lookup_mode,
            hybrid_budget: controllers.hybrid_budget,
            own_namespace: controllers.own_namespace.clone(),
            exempt,
            object_selector: controllers.gate_object_selector.clone(),
            namespaces,
        });
    }
    let limits = Limits {
        drain_timeout: admission_deadline.saturating_add(Duration::from_secs(5)),
        ..Limits::default()
    };
    let body = BodyLimits {
        read_timeout: admission_deadline,
        ..BodyLimits::default()
    };
    let routes = server::admission_routes(Arc::new(admission), body);
    let started = async {
        let mut server =
            server::start(addresses, tls.clone(), routes, limits, app.metrics.clone()).await?;
        let lookup_addr = match lookup {
            Some(endpoint) => {
                let added = server
                    .add_https(endpoint.addr, endpoint.config, tls, endpoint.routes, limits)
                    .await;
                match added {
                    Ok(addr) => Some(addr),
                    Err(error) => {
                        server.shutdown().await;
                        return Err(error);
                    }
                }
            }
            None => None,
        };
        Ok::<_, server::Error>((server, lookup_addr))
    };
    let (server, lookup_addr) = match started.await {
        Ok(started) => started,
        Err(error) => {
            stop(running).await;
            return Err(error.into());
        }
    };
    Ok(Serving {
        lookup_addr,
        webhook_addr: server.webhook_addr,
        metrics_addr: server.metrics_addr,
        health_addr: server.health_addr,
        server,
        controllers: running,
    })
}

/// Starts what the controller settings enable, with the webhook's lookups for the pods' images
/// and metrics on the App's registry.
/// `app` with what proves platforms false for every decider built from it: the verification
/// verdicts (`--verify-binaries`) and the learned store (`--detect-exec-format-errors`).
fn corrected(app: App, verdicts: bool, learned: Option<noe_controller::LearnedView>) -> App {
    let mut sources: Vec<Arc<dyn noe_core::truth::Corrections>> = Vec::new();
    if verdicts {
        sources.push(app.resolver.verdicts());
    }
    if let Some(learned) = learned {
        sources.push(Arc::new(learned));
    }
    if sources.is_empty() {
        return app;
    }
    app.with_corrections(Arc::new(noe_core::truth::Chain::new(sources)))
}

fn start_controllers(
    client: kube::Client,
    settings: &ControllerSettings,
    app: &App,
    pull_secrets: Option<PullSecrets>,
    max_namespaces: usize,
) -> anyhow::Result<noe_controller::Running> {
    let config = settings.config.clone();
    let writes = config.remediate != noe_controller::Remediate::Off
        || !config.taint_arches.is_empty()
        || config.gate.is_some()
        || config.detect.is_some();
    match (&config.leader_election, writes) {
        (Some(lease), _) => tracing::info!(
            lease = %lease.name, namespace = %lease.namespace, identity = %lease.identity,
            "Leader election: the writing controllers run on the Lease holder only"
        ),
        // Right for one replica (the chart turns election on for more): said, not warned.
        (None, true) if !settings.leader_elect => tracing::info!(
            "Writing controllers without --leader-elect: run one replica, or every replica writes"
        ),
        _ => {}
    }
    let platforms = ResolverPlatforms::new(app, pull_secrets, platforms::DEADLINE)?;
    let metrics = noe_controller::Metrics::new(&app.metrics, max_namespaces)
        .context("cannot register the controller metrics")?;
    let deps = Deps {
        platforms: Some(Arc::new(platforms)),
    };
    Ok(Controllers::start(client, config, deps, metrics)?)
}
