//! The policy engines' lookup endpoint (`--lookup-addr`), built from the App's resolver, node
//! credentials and metrics registry, and the webhook's certificate.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use noe_webhook::policy_endpoint::{
    self, Auth, ClientCa, KubeTokenReviews, Metrics, PolicyEndpoint, RegistryImages, TokenAuth,
};
use noe_webhook::server::tls::Reloadable;
use noe_webhook::server::CERT_POLL_INTERVAL;

use crate::app::App;
use crate::config::LookupSettings;

/// How long one TokenReview may take.
const TOKEN_REVIEW_TIMEOUT: Duration = Duration::from_secs(2);

/// What the server starts for the endpoint.
pub struct Endpoint {
    pub addr: SocketAddr,
    pub config: rustls::ServerConfig,
    pub routes: policy_endpoint::Routes,
}

/// Builds the endpoint (within the runtime: the client CA's watch is spawned); fails when no caller could ever be admitted, when the client CA is
/// unusable, or when token checks are asked for without Kubernetes API access.
pub fn build(
    settings: LookupSettings,
    app: &App,
    client: Option<kube::Client>,
    tls: &Arc<Reloadable>,
) -> anyhow::Result<Endpoint> {
    let LookupSettings {
        addr,
        client_ca,
        token_audience,
        deadline,
        token_review_qps,
    } = settings;
    if client_ca.is_none() && token_audience.is_none() {
        anyhow::bail!(
            "--lookup-addr needs --lookup-client-ca and/or --lookup-token-audience: a caller with neither gets nothing"
        );
    }
    let metrics =
        Metrics::register(&app.metrics).context("cannot register the lookup endpoint metrics")?;
    let tokens = match (token_audience, client) {
        (None, _) => None,
        (Some(audience), Some(client)) => Some(
            TokenAuth::new(
                Arc::new(KubeTokenReviews::new(client, TOKEN_REVIEW_TIMEOUT)),
                audience,
            )
            .with_reviews_per_second(f64::from(token_review_qps))
            .with_metrics(metrics.tokens()),
        ),
        (Some(_), None) => anyhow::bail!(
            "--lookup-token-audience needs Kubernetes API access (in a pod, or --kubeconfig) for its TokenReviews"
        ),
    };
    let auth = Auth {
        certificates: client_ca.is_some(),
        tokens,
    };
    let client_ca = client_ca.as_deref().map(ClientCa::load).transpose()?;
    if let Some(ca) = &client_ca {
        // Re-read like the serving certificate: a rotated CA Secret needs no restart.
        tokio::spawn(ca.clone().watch(CERT_POLL_INTERVAL));
    }
    let config = policy_endpoint::server_config(tls, client_ca.as_ref())?;
    let images = RegistryImages::new(app.resolver.clone(), Arc::new(app.credentials(None)));
    let endpoint = PolicyEndpoint::new(
        auth,
        Arc::new(images),
        deadline,
        app.lookups.max_concurrent,
        metrics,
    );
    let endpoint = match app.corrections() {
        Some(corrections) => endpoint.with_corrections(corrections),
        None => endpoint,
    };
    Ok(Endpoint {
        addr,
        config,
        routes: policy_endpoint::routes(Arc::new(endpoint)),
    })
}
