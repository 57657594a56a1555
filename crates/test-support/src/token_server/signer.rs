//! Signing registry tokens: ES256 JWTs whose `x5c` header carries a self-signed certificate the
//! registry trusts through `auth.token.rootcertbundle`.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use rcgen::{CertificateParams, DnType, KeyPair};
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

/// One `access` claim entry: a repository and the actions granted on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// Repository name, e.g. `library/app`.
    pub repository: String,
    /// Granted actions (`pull`, `push`, ...). May be empty (a Docker Hub style denial).
    pub actions: Vec<String>,
}

impl Access {
    /// `repository` with `actions`.
    pub fn repository(repository: &str, actions: &[&str]) -> Self {
        Self {
            repository: repository.to_owned(),
            actions: actions.iter().map(|a| (*a).to_owned()).collect(),
        }
    }
}

/// Mints tokens the registry accepts. Cheap to clone.
///
/// The algorithm is ES256 (ECDSA P-256): the registry verifies any libtrust key type, and ring
/// generates P-256 keys instantly where RSA key generation would need another dependency.
#[derive(Clone)]
pub struct TokenSigner {
    inner: Arc<Inner>,
}

struct Inner {
    key: EcdsaKeyPair,
    rng: SystemRandom,
    cert_der: Vec<u8>,
    cert_pem: String,
    issuer: String,
    service: String,
}

impl std::fmt::Debug for TokenSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSigner")
            .field("issuer", &self.inner.issuer)
            .field("service", &self.inner.service)
            .finish_non_exhaustive()
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

impl TokenSigner {
    /// A new key and self-signed certificate; tokens carry `iss: issuer` and `aud: service`.
    pub fn new(issuer: &str, service: &str) -> anyhow::Result<Self> {
        let key_pair = KeyPair::generate().context("generating the token signing key")?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, "noe-rs test token signer");
        let cert = params.self_signed(&key_pair)?;
        let rng = SystemRandom::new();
        let key = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            key_pair.serialized_der(),
            &rng,
        )
        .map_err(|e| anyhow::anyhow!("loading the token signing key: {e}"))?;
        Ok(Self {
            inner: Arc::new(Inner {
                key,
                rng,
                cert_der: cert.der().to_vec(),
                cert_pem: cert.pem(),
                issuer: issuer.to_owned(),
                service: service.to_owned(),
            }),
        })
    }

    /// The signing certificate, PEM: the registry's `rootcertbundle`.
    pub fn cert_pem(&self) -> &str {
        &self.inner.cert_pem
    }

    /// The `iss` claim.
    pub fn issuer(&self) -> &str {
        &self.inner.issuer
    }

    /// The `aud` claim (the registry's `service`).
    pub fn service(&self) -> &str {
        &self.inner.service
    }

    /// A JWT for `subject` granting `access`, valid for `expires_in` seconds.
    pub fn sign(
        &self,
        subject: &str,
        access: &[Access],
        expires_in: u64,
    ) -> anyhow::Result<String> {
        let header = serde_json::json!({
            "typ": "JWT",
            "alg": "ES256",
            "x5c": [STANDARD.encode(&self.inner.cert_der)],
        });
        let now = now();
        let access: Vec<serde_json::Value> = access
            .iter()
            .map(|a| {
                serde_json::json!({
                    "type": "repository",
                    "name": a.repository,
                    "actions": a.actions,
                })
            })
            .collect();
        let mut nonce = [0u8; 12];
        ring::rand::SecureRandom::fill(&self.inner.rng, &mut nonce)
            .map_err(|_| anyhow::anyhow!("no randomness for the token id"))?;
        let claims = serde_json::json!({
            "iss": self.inner.issuer,
            "sub": subject,
            "aud": self.inner.service,
            "exp": now + expires_in,
            "nbf": now.saturating_sub(10),
            "iat": now,
            "jti": hex::encode(nonce),
            "access": access,
        });
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&header)?),
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims)?)
        );
        let signature = self
            .inner
            .key
            .sign(&self.inner.rng, signing_input.as_bytes())
            .map_err(|_| anyhow::anyhow!("signing the token"))?;
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature.as_ref())
        ))
    }
}

/// Decodes a token's claims without verifying it (for assertions in tests).
pub fn decode_claims(token: &str) -> anyhow::Result<serde_json::Value> {
    let claims = token.split('.').nth(1).context("not a JWT")?;
    Ok(serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims)?)?)
}
