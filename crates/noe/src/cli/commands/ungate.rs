//! `noe ungate`: releases every pod that still carries noe's scheduling gate
//! (`arch.noe.adevinta.com/platforms`), through the same release path as the gate controller
//! (lookups, decision, one KEP-3838 write), once, until none is left or `--deadline` passes.
//! `--force` releases without lookups (no arch constraint). The chart runs it before uninstall
//! and when `lookupMode` goes back to `inline`, after deleting the MutatingWebhookConfiguration
//! so no new pod is gated meanwhile.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use noe_controller::{Controllers, Deps, GateConfig, Running};
use noe_webhook::facts::FactSource;
use noe_webhook::resolve::one_line;

use crate::app::App;
use crate::config;
use crate::serve::gate::DecisionPlanner;
use crate::serve::{facts, platforms};

#[derive(Clone, Debug, Args)]
pub struct UngateArgs {
    /// Only the pods of this namespace.
    #[arg(long, short = 'n', conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,

    /// The pods of every namespace (the default without `--namespace`).
    #[arg(long, short = 'A')]
    pub all_namespaces: bool,

    /// Give up on pods still gated after this long (their lookups keep failing, or their
    /// release is refused): they are listed and the exit code is 1.
    #[arg(long, default_value = "5m", value_parser = crate::cli::flags::parse::positive_duration)]
    pub deadline: Duration,

    /// Release without looking images up: no arch constraint is written.
    #[arg(long)]
    pub force: bool,

    /// Delete this MutatingWebhookConfiguration first (noe's own, so no pod is gated while the
    /// others are released; the chart's uninstall hook passes it). Absent is fine.
    #[arg(long, value_name = "NAME")]
    pub delete_webhook_configuration: Option<String>,
}

impl UngateArgs {
    /// The namespace to release in (`None`: all), refusing a name that is not one.
    pub fn namespace(&self) -> Result<Option<String>, crate::cli::flags::parse::ConfigError> {
        let Some(namespace) = self.namespace.as_deref().map(str::trim) else {
            return Ok(None);
        };
        crate::cli::flags::parse::namespace(namespace).map(|name| Some(name.to_owned()))
    }
}

/// How long the nodes may take to be listed (`--watch-nodes`).
const NODES_LISTED: Duration = Duration::from_secs(60);

/// The facts the server's decision reads, from the same source ([`facts::source`]): the
/// namespace's preferred arch (`--namespace-preference`) and the cluster's nodes
/// (`--watch-nodes`: a node reflector, listed before anything is decided, returned to be
/// stopped).
async fn decision_facts(
    settings: config::FactSettings,
    watch_nodes: bool,
    client: &kube::Client,
) -> anyhow::Result<(Option<Running>, Option<Arc<dyn FactSource>>)> {
    let registry = prometheus::Registry::new();
    let errors = noe_webhook::metrics::Metrics::register(&registry)?.fact_errors;
    let mut running = None;
    let mut view = None;
    if watch_nodes {
        let nodes_only = noe_controller::Config {
            watch_nodes: true,
            ..noe_controller::Config::default()
        };
        let metrics = noe_controller::Metrics::new(&registry, 1)?;
        let nodes = Controllers::start(client.clone(), nodes_only, Deps::default(), metrics)?;
        let listed = nodes.node_view();
        running = Some(nodes);
        if let Some(listed) = &listed {
            if tokio::time::timeout(NODES_LISTED, listed.ready())
                .await
                .is_err()
            {
                anyhow::bail!(
                    "the nodes were not listed within {NODES_LISTED:?} (is `list nodes` granted?)"
                );
            }
        }
        view = listed;
    }
    let source = facts::source(settings, Some(client.clone()), errors, view)?;
    Ok((running, source))
}

/// Prints one line per outcome (`released OUTCOME: N`) and each pod left gated on stderr.
/// Exit codes: 0 no pod left gated, 1 some pod is still gated or the API failed, 2 no API
/// access could be configured.
pub async fn run(config: config::Ungate) -> ExitCode {
    let client = match super::kube_client(&config.kube).await {
        Ok(client) => client,
        Err(code) => return code,
    };
    if let Some(name) = &config.delete_webhook_configuration {
        let api: kube::Api<MutatingWebhookConfiguration> = kube::Api::all(client.clone());
        match api.delete(name, &kube::api::DeleteParams::default()).await {
            Ok(_) => eprintln!("noe: mutatingwebhookconfiguration/{name} deleted"),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => {
                eprintln!(
                    "noe: cannot delete mutatingwebhookconfiguration/{name}: {}",
                    one_line(&error)
                );
                return ExitCode::FAILURE;
            }
        }
    }
    let app = match App::build(config.registry).await {
        Ok(app) => app,
        Err(error) => {
            eprintln!("noe: {error:#}");
            return super::Exit::Unusable.into();
        }
    };
    let (nodes, facts) = match decision_facts(config.facts, config.watch_nodes, &client).await {
        Ok(facts) => facts,
        Err(error) => {
            eprintln!("noe: {error:#}");
            return ExitCode::FAILURE;
        }
    };
    let planner = match DecisionPlanner::new(
        &app,
        &config.decision.policy,
        platforms::DEADLINE,
        Some(noe_webhook::resolve::pull_secrets::PullSecrets::new(
            client.clone(),
        )),
        facts,
    ) {
        Ok(planner) => planner,
        Err(error) => {
            eprintln!("noe: {error:#}");
            return ExitCode::FAILURE;
        }
    };
    let gate = GateConfig {
        max_attempts: config.max_attempts,
        ..GateConfig::default()
    };
    let result = noe_controller::gate::ungate(
        client,
        config.namespace.as_deref(),
        Arc::new(planner),
        gate,
        config.force,
        config.deadline,
    )
    .await;
    if let Some(nodes) = nodes {
        nodes.shutdown().await;
    }
    match result {
        Ok(done) => {
            let mut stdout = std::io::stdout().lock();
            for (outcome, count) in &done.released {
                if writeln!(stdout, "released {outcome}: {count}").is_err() {
                    return ExitCode::FAILURE;
                }
            }
            for pod in &done.remaining {
                eprintln!("noe: still gated: {pod}");
            }
            let released: usize = done.released.values().sum();
            eprintln!(
                "noe: {released} pod(s) released, {} still gated",
                done.remaining.len()
            );
            if done.remaining.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(error) => {
            eprintln!("noe: {}", one_line(&error));
            ExitCode::FAILURE
        }
    }
}
