//! Credentials as data: where they come from is the caller's business.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::SystemTime;

use futures::future::BoxFuture;

/// A secret credential for one registry. `Debug` never prints the secret.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Credential {
    /// Username and password (docker `auth`, `username`/`password`).
    Basic { username: String, password: String },
    /// A docker `identitytoken`: an OAuth2 refresh token exchanged at the token realm.
    IdentityToken(String),
    /// A docker `registrytoken`: sent directly as `Authorization: Bearer`.
    RegistryToken(String),
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Basic { username, .. } => f
                .debug_struct("Basic")
                .field("username", username)
                .field("password", &"<redacted>")
                .finish(),
            Self::IdentityToken(_) => f.write_str("IdentityToken(<redacted>)"),
            Self::RegistryToken(_) => f.write_str("RegistryToken(<redacted>)"),
        }
    }
}

/// One credential to try, with a human-readable, secret-free name of its source
/// (e.g. `pull-secret:default/regcred`, `docker-config:/root/.docker/config.json`).
///
/// Equality and hashing (cache keys, [`fingerprint`]) ignore [`CredentialCandidate::expires`]:
/// one credential is one identity however long the source vouches for it.
#[derive(Clone, Debug)]
pub struct CredentialCandidate {
    pub source: String,
    pub credential: Credential,
    /// `None`: for the image's own registry (after proxies). `Some(host)`: matched for the
    /// mirror `host[:port]` (containerd `hosts.toml`) and sent to that mirror only.
    pub mirror: Option<String>,
    /// Only some callers have it (a pod's pull secret, not the node's own credentials): what it
    /// finds is cached under the caller's credential scope (the registry's `cache::Scope`), never
    /// for everyone.
    pub scoped: bool,
    /// Until when the source vouches for it (a cloud token's refresh time, a plugin answer's
    /// cache expiry); `None`: until the source's configuration changes.
    pub expires: Option<SystemTime>,
    /// How to get a fresh credential when the registry refuses this one (a cached cloud token,
    /// a cached plugin answer); `None`: the source has nothing fresher to give.
    pub renewal: Option<Renewal>,
}

/// A credential source that can replace a credential a registry refused (a 401): its cached
/// copy is dropped, if it is still the refused one, and fetched again.
pub trait Renew: Send + Sync + fmt::Debug {
    /// Who renews, for messages and the `provider` metric label (a fixed set: `ecr`, `gcp`,
    /// `acr`, `credential-provider`).
    fn provider(&self) -> &'static str;

    /// A fresh candidate replacing `refused`. One refresh runs at a time; callers refused the
    /// same credential meanwhile get the renewed one. The error is one secret-free line naming
    /// the provider and the step (`ecr: GetAuthorizationToken: HTTP 500 ...`).
    fn renew<'a>(
        &'a self,
        refused: &'a Credential,
    ) -> BoxFuture<'a, Result<CredentialCandidate, String>>;
}

/// A shared [`Renew`] handle carried by a [`CredentialCandidate`].
#[derive(Clone, Debug)]
pub struct Renewal(Arc<dyn Renew>);

impl Renewal {
    pub fn new(renew: impl Renew + 'static) -> Self {
        Self(Arc::new(renew))
    }

    /// See [`Renew::provider`].
    pub fn provider(&self) -> &'static str {
        self.0.provider()
    }

    /// See [`Renew::renew`].
    pub async fn renew(&self, refused: &Credential) -> Result<CredentialCandidate, String> {
        self.0.renew(refused).await
    }
}

impl PartialEq for CredentialCandidate {
    fn eq(&self, other: &Self) -> bool {
        self.identity() == other.identity()
    }
}

impl Eq for CredentialCandidate {}

impl Hash for CredentialCandidate {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.identity().hash(state);
    }
}

impl CredentialCandidate {
    /// What equality and hashing compare: everything but when it expires and how it renews.
    fn identity(&self) -> (&str, &Credential, Option<&str>, bool) {
        let Self {
            source,
            credential,
            mirror,
            scoped,
            expires: _,
            renewal: _,
        } = self;
        (source, credential, mirror.as_deref(), *scoped)
    }

    pub fn new(source: impl Into<String>, credential: Credential) -> Self {
        Self {
            source: source.into(),
            credential,
            mirror: None,
            scoped: false,
            expires: None,
            renewal: None,
        }
    }

    /// The same credential, good until `at` (see
    /// [`CredentialCandidate::expires`](#structfield.expires)).
    #[must_use]
    pub fn until(mut self, at: SystemTime) -> Self {
        self.expires = Some(at);
        self
    }

    /// The same credential, renewable by `renewal` when a registry refuses it.
    #[must_use]
    pub fn renewable(mut self, renewal: Renewal) -> Self {
        self.renewal = Some(renewal);
        self
    }

    /// The same credential, marked as one only some callers have (see
    /// [`CredentialCandidate::scoped`](#structfield.scoped)).
    #[must_use]
    pub fn in_scope(mut self) -> Self {
        self.scoped = true;
        self
    }

    /// The same credential, usable only on the mirror `host[:port]` it was matched for.
    #[must_use]
    pub fn for_mirror(mut self, host: impl Into<String>) -> Self {
        self.mirror = Some(host.into());
        self
    }
}

/// A fingerprint of an ordered list of candidates, for cache keys.
///
/// It is a keyed hash with a per-process random key: equal lists give equal fingerprints within
/// one process, and the value reveals nothing about the secrets (no offline guessing either).
pub fn fingerprint(candidates: &[CredentialCandidate]) -> u64 {
    use std::sync::OnceLock;
    static KEY: OnceLock<(u64, u64)> = OnceLock::new();
    let (k0, k1) = *KEY.get_or_init(|| (rand::random(), rand::random()));
    let mut hasher = std::hash::BuildHasher::build_hasher(&KeyedState(k0, k1));
    candidates.len().hash(&mut hasher);
    for candidate in candidates {
        candidate.hash(&mut hasher);
    }
    hasher.finish()
}

struct KeyedState(u64, u64);

impl std::hash::BuildHasher for KeyedState {
    type Hasher = std::collections::hash_map::DefaultHasher;
    fn build_hasher(&self) -> Self::Hasher {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.0.hash(&mut hasher);
        self.1.hash(&mut hasher);
        hasher
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_secrets() {
        let basic = Credential::Basic {
            username: "u".into(),
            password: "hunter2".into(),
        };
        let printed = format!(
            "{basic:?} {:?} {:?}",
            Credential::IdentityToken("tok1".into()),
            Credential::RegistryToken("tok2".into())
        );
        assert!(
            !printed.contains("hunter2") && !printed.contains("tok1") && !printed.contains("tok2"),
            "{printed}"
        );
        assert!(printed.contains("<redacted>"));
    }

    #[test]
    fn fingerprint_depends_on_order_and_content() {
        let a = CredentialCandidate::new("a", Credential::RegistryToken("x".into()));
        let b = CredentialCandidate::new("b", Credential::RegistryToken("y".into()));
        assert_eq!(
            fingerprint(&[a.clone(), b.clone()]),
            fingerprint(&[a.clone(), b.clone()])
        );
        assert_ne!(
            fingerprint(&[a.clone(), b.clone()]),
            fingerprint(&[b, a.clone()])
        );
        assert_ne!(fingerprint(std::slice::from_ref(&a)), fingerprint(&[]));
        let later = a.clone().until(std::time::SystemTime::UNIX_EPOCH);
        assert_eq!(a, later, "expiry is not identity");
        assert_eq!(fingerprint(&[a]), fingerprint(&[later]));
    }
}
