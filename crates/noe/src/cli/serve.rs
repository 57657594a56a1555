//! `noe` (or `noe serve`): the composition root. The only place where the server, the
//! admission, the resolver, the credentials and the Kubernetes client are built and connected.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use noe_webhook::resolve::pull_secrets::PullSecrets;
use noe_webhook::server::tls::{self, CertDir, Reloadable};
use noe_webhook::server::{self, Limits, Running, Termination, CERT_POLL_INTERVAL};

use crate::app::App;
use crate::config::{self, CertSource, ServerSettings};

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
    let running = start(config).await?;
    let delay = match shutdown.await {
        Termination::Terminate => delay,
        Termination::Interrupt => Duration::ZERO,
    };
    tracing::info!(?delay, "Shutting down");
    running.terminate(delay).await;
    Ok(())
}

/// Builds everything and starts serving.
pub async fn start(config: config::Serve) -> anyhow::Result<Running> {
    let config::Serve {
        server:
            ServerSettings {
                cert,
                addresses,
                kubeconfig,
                leader_elect,
                shutdown_delay: _,
                metrics_max_namespaces,
            },
        decision: config::Decision {
            policy,
            admission_deadline,
        },
        registry,
    } = config;
    if leader_elect {
        tracing::info!("--leader-elect is accepted for noe compatibility and has no effect yet");
    }
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
    let app = App::build(registry).await?;
    let pull_secrets = match kube_client(kubeconfig.as_deref()).await {
        Ok(client) => Some(PullSecrets::new(client)),
        Err(error) => {
            tracing::warn!(error = %format!("{error:#}"), "No Kubernetes API access: image pull secrets are not read");
            None
        }
    };
    let admission = app.admission(
        policy,
        admission_deadline,
        metrics_max_namespaces,
        pull_secrets,
    )?;
    let limits = Limits {
        body_read_timeout: admission_deadline,
        drain_timeout: admission_deadline.saturating_add(Duration::from_secs(5)),
        ..Limits::default()
    };
    Ok(server::start(
        addresses,
        tls,
        Arc::new(admission),
        limits,
        app.metrics.clone(),
    )
    .await?)
}

/// A client from `kubeconfig`, else the in-cluster configuration.
async fn kube_client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read the kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await?
        }
        None => kube::Config::incluster()?,
    };
    Ok(kube::Client::try_from(config)?)
}
