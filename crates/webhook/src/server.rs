//! The serving process: the HTTPS admission endpoint, `/metrics`, and the health probes.

pub mod https;
pub mod plain;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

pub use https::{Handler, Limits, MAX_BODY_BYTES, MUTATE_PATH};

use crate::admission::Admission;
use crate::args::{PolicyArgs, RegistryArgs, ServerArgs};
use crate::health::Readiness;
use crate::lookup::Credentials;
use crate::pull_secrets::PullSecrets;
use crate::tls::Reloadable;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Tls(#[from] crate::tls::Error),
    #[error("cannot register metrics")]
    Metrics(#[from] prometheus::Error),
}

/// Where to listen.
#[derive(Clone, Copy, Debug)]
pub struct Addresses {
    pub webhook: SocketAddr,
    pub metrics: SocketAddr,
    pub health: SocketAddr,
}

/// A started server: its bound addresses, and the handle to stop it.
#[derive(Debug)]
pub struct Running {
    pub webhook_addr: SocketAddr,
    pub metrics_addr: SocketAddr,
    pub health_addr: SocketAddr,
    pub readiness: Readiness,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Running {
    /// Stops accepting, drains open admission connections, and returns when done.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Binds the three listeners and starts serving. Port 0 picks a free port (tests).
pub async fn start<H: Handler>(
    addresses: Addresses,
    tls: Arc<Reloadable>,
    handler: Arc<H>,
    limits: Limits,
    registry: prometheus::Registry,
) -> Result<Running, Error> {
    let webhook = bind(addresses.webhook).await?;
    let metrics = bind(addresses.metrics).await?;
    let health = bind(addresses.health).await?;
    let local = |listener: &TcpListener, addr| {
        listener
            .local_addr()
            .map_err(|source| Error::Bind { addr, source })
    };
    let webhook_addr = local(&webhook, addresses.webhook)?;
    let metrics_addr = local(&metrics, addresses.metrics)?;
    let health_addr = local(&health, addresses.health)?;

    let acceptor = TlsAcceptor::from(Arc::new(tls.server_config()?));
    let readiness = Readiness::default();
    let (shutdown, receiver) = watch::channel(false);

    let metrics_router: plain::Router = Arc::new(move |path: &str| {
        (path == "/metrics").then(|| crate::metrics::respond(&registry))
    });
    let probe_readiness = readiness.clone();
    let health_router: plain::Router =
        Arc::new(move |path: &str| crate::health::respond(path, &probe_readiness));

    let tasks = vec![
        tokio::spawn(https::serve(
            webhook,
            acceptor,
            handler,
            limits,
            readiness.clone(),
            receiver.clone(),
        )),
        tokio::spawn(plain::serve(metrics, metrics_router, receiver.clone())),
        tokio::spawn(plain::serve(health, health_router, receiver)),
    ];
    tracing::info!(%webhook_addr, %metrics_addr, %health_addr, "Serving");
    Ok(Running {
        webhook_addr,
        metrics_addr,
        health_addr,
        readiness,
        shutdown,
        tasks,
    })
}

/// Binds `addr`; Go's `:port` (the IPv6 wildcard here) falls back to IPv4 when IPv6 is disabled.
async fn bind(addr: SocketAddr) -> Result<TcpListener, Error> {
    match TcpListener::bind(addr).await {
        Ok(listener) => Ok(listener),
        Err(_) if addr.is_ipv6() && addr.ip().is_unspecified() => {
            let v4 = SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), addr.port());
            TcpListener::bind(v4)
                .await
                .map_err(|source| Error::Bind { addr, source })
        }
        Err(source) => Err(Error::Bind { addr, source }),
    }
}

/// Resolves when SIGTERM or SIGINT arrives.
pub async fn termination() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// How often `--cert-dir` is re-read.
pub const CERT_POLL_INTERVAL: Duration = Duration::from_secs(5);

/// `noe` without a subcommand: serves until SIGTERM or SIGINT.
pub async fn run(server: ServerArgs, policy: PolicyArgs, registry: RegistryArgs) -> ExitCode {
    match serve(server, policy, registry, termination()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(error = %format!("{error:#}"), "Cannot serve");
            eprintln!("noe: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Builds everything from the flags, serves until `shutdown` resolves, then drains.
pub async fn serve(
    server: ServerArgs,
    policy: PolicyArgs,
    registry: RegistryArgs,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let running = start_from_args(server, policy, registry).await?;
    shutdown.await;
    tracing::info!("Shutting down: draining connections");
    running.shutdown().await;
    Ok(())
}

/// Builds everything from the flags and starts serving.
pub async fn start_from_args(
    server: ServerArgs,
    policy: PolicyArgs,
    registry: RegistryArgs,
) -> anyhow::Result<Running> {
    let ServerArgs {
        cert_dir,
        dev_self_signed_cert,
        webhook_addr,
        metrics_addr,
        health_probe_addr,
        kubeconfig,
        leader_elect,
    } = server;
    if leader_elect {
        tracing::info!("--leader-elect is accepted for noe compatibility and has no effect yet");
    }
    let decision_policy = policy.to_policy().map_err(anyhow::Error::msg)?;
    let metrics_registry = prometheus::Registry::new();
    let tls = if dev_self_signed_cert {
        tracing::warn!("Serving a generated self-signed certificate (--dev-self-signed-cert): local trials only");
        let (key, _pem) = crate::tls::self_signed()?;
        Reloadable::new(key)
    } else {
        let (watched, key) = crate::tls::CertDir::load(&cert_dir)?;
        let tls = Reloadable::new(key);
        tokio::spawn(watched.watch(tls.clone(), CERT_POLL_INTERVAL));
        tls
    };
    let (resolver, sources) = registry
        .build(&metrics_registry)
        .await
        .map_err(anyhow::Error::msg)?;
    let pull_secrets = match kube_client(kubeconfig.as_deref()).await {
        Ok(client) => Some(PullSecrets::new(client)),
        Err(error) => {
            tracing::warn!(error = %format!("{error:#}"), "No Kubernetes API access: image pull secrets are not read");
            None
        }
    };
    let credentials = Credentials {
        resolver: resolver.clone(),
        sources: Arc::new(sources),
        pull_secrets,
    };
    let metrics = crate::metrics::Metrics::register(&metrics_registry)?;
    let admission = Admission::new(
        Arc::new(resolver),
        Arc::new(credentials),
        decision_policy,
        policy.admission_deadline,
        metrics,
        registry.configured_hosts(),
    )
    .with_memo(registry.cache_ttl);
    let limits = Limits {
        body_read_timeout: policy.admission_deadline,
        drain_timeout: policy.admission_deadline + Duration::from_secs(5),
        ..Limits::default()
    };
    let addresses = Addresses {
        webhook: webhook_addr,
        metrics: metrics_addr,
        health: health_probe_addr,
    };
    Ok(start(
        addresses,
        tls,
        Arc::new(admission),
        limits,
        metrics_registry,
    )
    .await?)
}

/// A client from `--kubeconfig`, else the in-cluster configuration.
async fn kube_client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig.filter(|p| !p.as_os_str().is_empty()) {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await?
        }
        None => kube::Config::incluster()?,
    };
    Ok(kube::Client::try_from(config)?)
}
