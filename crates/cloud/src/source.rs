//! The cloud workload identity (`--cloud-credentials`) as a credential [`Source`] of the
//! credentials crate: for its own provider's registries only. The composition root plugs it in
//! with `noe_credentials::Sources::with_cloud`.

use futures::future::BoxFuture;
use noe_credentials::{Credential, CredentialCandidate, Renew, Renewal, Request, Source};

use crate::{CloudCredential, CloudCredentials};

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
            let host = request.host();
            match self.credential_for(host).await {
                Some(Ok(found)) => vec![candidate(self, host, &found)],
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

/// `found` as a candidate for `host`, renewable when the registry refuses it.
fn candidate(cloud: &CloudCredentials, host: &str, found: &CloudCredential) -> CredentialCandidate {
    let renewal = Renewal::new(CloudRenewal {
        cloud: cloud.clone(),
        host: host.to_owned(),
        provider: found.provider.as_str(),
    });
    CredentialCandidate::new(
        found.source(),
        Credential::Basic {
            username: found.username.clone(),
            password: found.password().to_owned(),
        },
    )
    .until(found.refresh_at)
    .renewable(renewal)
}

/// Renews the cloud token of one registry host.
#[derive(Debug)]
struct CloudRenewal {
    cloud: CloudCredentials,
    host: String,
    provider: &'static str,
}

impl Renew for CloudRenewal {
    fn provider(&self) -> &'static str {
        self.provider
    }

    fn renew<'a>(
        &'a self,
        refused: &'a Credential,
    ) -> BoxFuture<'a, Result<CredentialCandidate, String>> {
        Box::pin(async move {
            let Credential::Basic { password, .. } = refused else {
                return Err(format!("{}: not a token of this provider", self.provider));
            };
            match self.cloud.renew(&self.host, password).await {
                Some(Ok(found)) => Ok(candidate(&self.cloud, &self.host, &found)),
                Some(Err(error)) => Err(error.to_string()),
                None => Err(format!("{}: provider no longer enabled", self.provider)),
            }
        })
    }
}
