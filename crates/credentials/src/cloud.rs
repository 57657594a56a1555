//! The cloud workload identity (`--cloud-credentials`) as a credential [`Source`]: for its own
//! provider's registries only.

use futures::future::BoxFuture;
use noe_cloud::CloudCredentials;

use crate::source::{Request, Source};
use crate::{Credential, CredentialCandidate};

impl Source for CloudCredentials {
    fn kind(&self) -> &'static str {
        "cloud"
    }

    /// The registries of an enabled provider (`*.dkr.ecr.*.amazonaws.com` for ECR, ...).
    fn serves(&self, host: &str) -> bool {
        self.provider_for(host).is_some()
    }

    fn credentials<'a>(&'a self, request: Request<'a>) -> BoxFuture<'a, Vec<CredentialCandidate>> {
        Box::pin(async move {
            match self.credential_for(request.host()).await {
                Some(Ok(found)) => vec![CredentialCandidate::new(
                    found.source(),
                    Credential::Basic {
                        username: found.username.clone(),
                        password: found.password().to_owned(),
                    },
                )
                .until(found.refresh_at)],
                // Logged once per failed refresh by the cloud crate; the other sources still count.
                Some(Err(error)) => {
                    tracing::debug!(%error, "no cloud credential");
                    Vec::new()
                }
                None => Vec::new(),
            }
        })
    }
}
