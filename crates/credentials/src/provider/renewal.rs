//! A plugin answer a registry refused: dropped from the cache and asked again, once.
//!
//! Only answers found on the webhook's own behalf are renewable: one found for a pod's service
//! account (`tokenAttributes`) is tied to that pod's request and is not kept past its token.

use std::sync::{Arc, PoisonError};

use futures::future::BoxFuture;

use super::{system_time, Identity, Provider, ProviderSource};
use crate::credential::{Renew, Renewal};
use crate::matching::image_matches;
use crate::{Credential, CredentialCandidate};

/// Renews the answer of one provider for one image.
#[derive(derive_more::Debug)]
#[debug("PluginRenewal {{ name: {name:?}, image: {image:?}, .. }}")]
pub(super) struct PluginRenewal {
    pub source: ProviderSource,
    pub provider: Arc<Provider>,
    pub image: String,
    /// The candidates' source name (`credential-provider:<name>`).
    pub name: String,
}

impl PluginRenewal {
    pub(super) fn handle(self) -> Renewal {
        Renewal::new(self)
    }
}

impl Renew for PluginRenewal {
    fn provider(&self) -> &'static str {
        "credential-provider"
    }

    fn renew<'a>(
        &'a self,
        refused: &'a Credential,
    ) -> BoxFuture<'a, Result<CredentialCandidate, String>> {
        Box::pin(async move {
            let provider = &*self.provider;
            {
                // Under the run lock: a renewal running now has either not stored its answer
                // yet (it is then asked below and waited for) or stored one without `refused`.
                let _running = provider.exec_lock.lock().await;
                let mut cache = provider
                    .cache
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                cache.retain(|(_, identity), (_, auth)| {
                    !identity.is_empty() || !auth.iter().any(|(_, c)| c == refused)
                });
            }
            let mut identity = Identity::node();
            let (auth, until) = self
                .source
                .lookup(provider, &self.image, &mut identity)
                .await
                .map_err(|error| format!("credential-provider: {error}"))?;
            let mut matched: Vec<&(String, Credential)> = auth
                .iter()
                .filter(|(pattern, _)| image_matches(pattern, &self.image))
                .collect();
            matched.sort_by(|a, b| b.0.cmp(&a.0));
            let fresh = matched
                .iter()
                .find(|(_, c)| c != refused)
                .or(matched.first())
                .ok_or_else(|| {
                    format!(
                        "credential-provider: {}: the renewed answer has no credential for the image",
                        provider.config.name
                    )
                })?;
            Ok(CredentialCandidate::new(&self.name, fresh.1.clone())
                .until(system_time(until, self.source.clock.now())))
        })
    }
}
