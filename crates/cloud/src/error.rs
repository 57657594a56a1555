//! The crate's one error type: every variant names the provider and the step that failed.

use std::fmt;

use crate::Provider;

/// One request (or file read) of a provider's token exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Step {
    /// Reading a projected service-account token file.
    TokenFile,
    /// AWS: static keys from the environment (no request).
    Environment,
    /// AWS STS `AssumeRoleWithWebIdentity` (IRSA).
    AssumeRoleWithWebIdentity,
    /// AWS: the EKS Pod Identity agent.
    PodIdentity,
    /// ECR `GetAuthorizationToken`.
    GetAuthorizationToken,
    /// GCP: the metadata server's access token.
    MetadataToken,
    /// Azure: the Entra ID token endpoint.
    EntraToken,
    /// ACR: the registry's `/oauth2/exchange`.
    AcrExchange,
}

impl Step {
    /// The metric label (a bounded set).
    pub fn label(self) -> &'static str {
        match self {
            Self::TokenFile => "token_file",
            Self::Environment => "environment",
            Self::AssumeRoleWithWebIdentity => "assume_role_with_web_identity",
            Self::PodIdentity => "pod_identity",
            Self::GetAuthorizationToken => "get_authorization_token",
            Self::MetadataToken => "metadata_token",
            Self::EntraToken => "entra_token",
            Self::AcrExchange => "acr_exchange",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::TokenFile => "token file",
            Self::Environment => "environment",
            Self::AssumeRoleWithWebIdentity => "AssumeRoleWithWebIdentity",
            Self::PodIdentity => "EKS Pod Identity",
            Self::GetAuthorizationToken => "GetAuthorizationToken",
            Self::MetadataToken => "metadata server token",
            Self::EntraToken => "Entra token",
            Self::AcrExchange => "oauth2/exchange",
        })
    }
}

/// Why a cloud credential could not be had. Messages never carry a token or a secret.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The provider is enabled but the pod lacks the identity it needs.
    #[error("{provider}: not configured: {reason}")]
    NotConfigured { provider: Provider, reason: String },
    /// The request could not be sent or its answer not read (connection, timeout, size bound).
    #[error("{provider}: {step}: {reason}")]
    Transport {
        provider: Provider,
        step: Step,
        reason: String,
    },
    /// The service answered with an error status; `excerpt` is a bounded excerpt of its body.
    #[error("{provider}: {step}: HTTP {status}: {excerpt}")]
    Status {
        provider: Provider,
        step: Step,
        status: u16,
        excerpt: String,
    },
    /// The answer had the success status but not the expected shape.
    #[error("{provider}: {step}: malformed answer: {reason}")]
    Malformed {
        provider: Provider,
        step: Step,
        reason: String,
    },
    /// The host is not one of the provider's registries (or its provider is not enabled).
    #[error("{host}: not a registry of an enabled cloud provider")]
    NotCloudHost { host: String },
}

impl Error {
    /// The provider the error is about, if any.
    pub fn provider(&self) -> Option<Provider> {
        match self {
            Self::NotConfigured { provider, .. }
            | Self::Transport { provider, .. }
            | Self::Status { provider, .. }
            | Self::Malformed { provider, .. } => Some(*provider),
            Self::NotCloudHost { .. } => None,
        }
    }

    /// The step that failed, if any.
    pub fn step(&self) -> Option<Step> {
        match self {
            Self::Transport { step, .. }
            | Self::Status { step, .. }
            | Self::Malformed { step, .. } => Some(*step),
            Self::NotConfigured { .. } | Self::NotCloudHost { .. } => None,
        }
    }

    pub(crate) fn malformed(provider: Provider, step: Step, reason: impl Into<String>) -> Self {
        Self::Malformed {
            provider,
            step,
            reason: reason.into(),
        }
    }
}
