//! The transport: three listeners, each serving a [`Router`] (a `tower::Service` routing by
//! path): the HTTPS one the routes it is given (the admission at [`MUTATE_PATH`], answered by a
//! [`Post`] route over a [`Handler`]), plain HTTP `/metrics`, and plain HTTP `/healthz` and
//! `/readyz`; optionally a second HTTPS listener ([`Running::add_https`]: the policy engines'
//! lookup routes, `crate::policy_endpoint`) with the same limits and drain. It knows nothing of
//! admission; the routes know nothing of the listeners.

pub mod conn;
pub mod health;
pub mod https;
pub mod plain;
pub mod post;
pub mod router;
pub mod slots;
pub mod tls;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

pub use https::{ClientCertificate, Limits, Routes};
pub use post::{Answerer, Answering, BodyLimits, Handler, Post, MAX_BODY_BYTES};
pub use router::Router;
pub use slots::{ConnectionMetrics, Listener};

/// The admission route (the chart's MutatingWebhookConfiguration points here).
pub const MUTATE_PATH: &str = "/mutate";

/// The admission routes: `handler` answering the bodies POSTed to [`MUTATE_PATH`].
pub fn admission_routes<H: Handler>(
    handler: Arc<H>,
    limits: BodyLimits,
) -> Router<router::Route<Answering<Post<H>>, router::NotFound>> {
    Router::new().route(MUTATE_PATH, Answering(Post::new(handler, limits)))
}

use health::Readiness;
use tls::Reloadable;

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
    Tls(#[from] tls::TlsError),
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
    connections: ConnectionMetrics,
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

    /// Binds `addr` and serves `routes` there over TLS with `config` (the policy engines' lookup
    /// endpoint: the same certificate, its own client authentication), with `limits`; stopped
    /// and drained with the others. Returns the bound address.
    pub async fn add_https<R: Routes>(
        &mut self,
        addr: SocketAddr,
        config: rustls::ServerConfig,
        tls: Arc<Reloadable>,
        routes: R,
        limits: Limits,
    ) -> Result<SocketAddr, Error> {
        let listener = bind(addr).await?;
        let bound = listener
            .local_addr()
            .map_err(|source| Error::Bind { addr, source })?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        // Its own readiness: `/readyz` is the admission listener's.
        let readiness = Readiness::new(tls);
        let slots = slots::Slots::new(limits.slots(), self.connections.listener(Listener::Lookup));
        self.tasks.push(tokio::spawn(https::serve(
            listener,
            acceptor,
            routes,
            limits,
            slots,
            readiness,
            self.shutdown.subscribe(),
        )));
        tracing::info!(addr = %bound, "Serving");
        Ok(bound)
    }

    /// The shutdown a pod gets: not ready at once (so its endpoint is removed), still answering
    /// for `delay` (requests the apiserver routed here before it saw the endpoint go), then
    /// [`Running::shutdown`].
    pub async fn terminate(self, delay: Duration) {
        self.readiness.set_terminating();
        if !delay.is_zero() {
            tracing::info!(?delay, "Not ready; answering until the endpoint is gone");
            tokio::time::sleep(delay).await;
        }
        self.shutdown().await;
    }
}

/// Binds the three listeners and starts serving: `routes` on the HTTPS one. Port 0 picks a free
/// port (tests).
pub async fn start<R: Routes>(
    addresses: Addresses,
    tls: Arc<Reloadable>,
    routes: R,
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
    let readiness = Readiness::new(tls.clone());
    let (shutdown, receiver) = watch::channel(false);
    let connections = ConnectionMetrics::register(&registry)?;
    let slots = slots::Slots::new(limits.slots(), connections.listener(Listener::Webhook));

    let metrics_routes =
        Router::new().route("/metrics", router::get(move || plain::metrics(&registry)));
    let probe_readiness = readiness.clone();
    let health_routes = Router::new()
        .route("/healthz", router::get(health::healthz))
        .route(
            "/readyz",
            router::get(move || health::readyz(&probe_readiness)),
        );

    let tasks = vec![
        tokio::spawn(https::serve(
            webhook,
            acceptor,
            routes,
            limits,
            slots,
            readiness.clone(),
            receiver.clone(),
        )),
        tokio::spawn(plain::serve(metrics, metrics_routes, receiver.clone())),
        tokio::spawn(plain::serve(health, health_routes, receiver)),
    ];
    tracing::info!(%webhook_addr, %metrics_addr, %health_addr, "Serving");
    Ok(Running {
        webhook_addr,
        metrics_addr,
        health_addr,
        readiness,
        connections,
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

/// The signal that ends the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Termination {
    /// SIGTERM: the kubelet stopping the pod (its endpoint is being removed).
    Terminate,
    /// SIGINT or SIGHUP: a person at a terminal (Ctrl-C, the terminal closed).
    Interrupt,
}

/// Resolves with the first of SIGTERM, SIGINT or SIGHUP.
pub async fn termination() -> Termination {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (term, hangup) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        );
        match (term, hangup) {
            (Ok(mut term), Ok(mut hangup)) => tokio::select! {
                _ = term.recv() => Termination::Terminate,
                _ = hangup.recv() => Termination::Interrupt,
                _ = tokio::signal::ctrl_c() => Termination::Interrupt,
            },
            _ => {
                let _ = tokio::signal::ctrl_c().await;
                Termination::Interrupt
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        Termination::Interrupt
    }
}

/// How often a certificate directory is re-read.
pub const CERT_POLL_INTERVAL: Duration = Duration::from_secs(5);
