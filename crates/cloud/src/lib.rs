//! Registry credentials from the pod's own cloud workload identity, for the registries of that
//! cloud only: Amazon ECR (IRSA or EKS Pod Identity, then a SigV4-signed
//! `GetAuthorizationToken`), Google Artifact Registry and GCR (the metadata server's access token),
//! and Azure Container Registry (workload identity: an Entra token exchanged at the registry's
//! `/oauth2/exchange`).
//!
//! No Kubernetes and no registry client here: [`CloudCredentials::credential_for`] turns a
//! registry host into a username and password, and [`CloudCredentials`] is a
//! `noe_credentials::Source` (the credential chain decides what to do with them). Which host belongs to which provider is the pure function [`hosts::match_host`].
//!
//! Every request has a timeout and every response body a byte bound; tokens are cached until
//! shortly before they expire ([`cache::refresh_at`]) with one refresh in flight per key; a
//! credential's `Debug` never shows its secret; errors name the provider and the step
//! (`ecr: AssumeRoleWithWebIdentity: HTTP 403: AccessDenied: ...`).

pub mod acr;
pub mod aws;
pub mod cache;
mod credentials;
pub mod ecr;
mod env;
mod error;
pub mod gcp;
pub mod hosts;
mod http;
pub mod metrics;
mod source;
mod time;

pub use credentials::{http_client, CloudCredential, CloudCredentials, Config};
pub use env::Env;
pub use error::{Error, Step};
pub use hosts::{match_host, Provider, Target};
pub use metrics::Metrics;
