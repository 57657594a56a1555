//! Pushing blobs and manifests through the registry's HTTP API.

use std::time::Duration;

use anyhow::{bail, Context as _};
use sha2::{Digest as _, Sha256};

use crate::token_server::{Access, TokenSigner};

/// How a [`Pusher`] authenticates.
#[derive(Clone)]
#[non_exhaustive]
pub enum PushAuth {
    /// No `Authorization` header.
    Anonymous,
    /// HTTP Basic.
    Basic {
        /// User name.
        username: String,
        /// Password.
        password: String,
    },
    /// One bearer token for every request.
    Bearer(String),
    /// A fresh token per repository, minted with the token server's key (pull + push).
    Signer(TokenSigner),
}

impl PushAuth {
    /// Basic credentials.
    pub fn basic(username: &str, password: &str) -> Self {
        Self::Basic {
            username: username.to_owned(),
            password: password.to_owned(),
        }
    }
}

impl std::fmt::Debug for PushAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Anonymous => f.write_str("Anonymous"),
            Self::Basic { username, .. } => f
                .debug_struct("Basic")
                .field("username", username)
                .field("password", &"<redacted>")
                .finish(),
            Self::Bearer(_) => f.write_str("Bearer(<redacted>)"),
            Self::Signer(_) => f.write_str("Signer"),
        }
    }
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// A reqwest client trusting `ca_pem` (or the webpki roots when None), no proxy, 30 s timeout.
/// A client trusting `ca_pem` (else the built-in roots) and presenting `identity_pem` (a
/// certificate chain and its key, PEM) to servers that ask for a client certificate.
pub(crate) fn http_client(
    ca_pem: Option<&str>,
    identity_pem: Option<&str>,
) -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none());
    if let Some(pem) = ca_pem {
        builder = builder
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes())?);
    }
    if let Some(pem) = identity_pem {
        builder = builder.identity(reqwest::Identity::from_pem(pem.as_bytes())?);
    }
    Ok(builder.build()?)
}

/// Pushes blobs and manifests to one registry (`base_url` like `http://127.0.0.1:5000`).
#[derive(Debug, Clone)]
pub struct Pusher {
    client: reqwest::Client,
    base_url: String,
    auth: PushAuth,
}

impl Pusher {
    /// A pusher for `base_url`, trusting `ca_pem` when given.
    pub fn new(base_url: &str, ca_pem: Option<&str>, auth: PushAuth) -> anyhow::Result<Self> {
        Self::with_identity(base_url, ca_pem, None, auth)
    }

    /// [`Pusher::new`], presenting the client certificate `identity_pem` (chain and key, PEM)
    /// to a registry that requires one.
    pub fn with_identity(
        base_url: &str,
        ca_pem: Option<&str>,
        identity_pem: Option<&str>,
        auth: PushAuth,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            client: http_client(ca_pem, identity_pem)?,
            base_url: base_url.trim_end_matches('/').to_owned(),
            auth,
        })
    }

    /// The same pusher with other credentials.
    pub fn with_auth(mut self, auth: PushAuth) -> Self {
        self.auth = auth;
        self
    }

    fn authorize(
        &self,
        request: reqwest::RequestBuilder,
        repository: &str,
    ) -> anyhow::Result<reqwest::RequestBuilder> {
        Ok(match &self.auth {
            PushAuth::Anonymous => request,
            PushAuth::Basic { username, password } => request.basic_auth(username, Some(password)),
            PushAuth::Bearer(token) => request.bearer_auth(token),
            PushAuth::Signer(signer) => {
                let token = signer.sign(
                    "noe-test-admin",
                    &[Access::repository(repository, &["pull", "push"])],
                    300,
                )?;
                request.bearer_auth(token)
            }
        })
    }

    /// Uploads `bytes` as a blob of `repository` (POST then monolithic PUT); returns its digest.
    /// Uploading a blob that already exists is harmless.
    pub async fn push_blob(&self, repository: &str, bytes: &[u8]) -> anyhow::Result<String> {
        let digest = sha256_digest(bytes);
        let start_url = format!("{}/v2/{repository}/blobs/uploads/", self.base_url);
        let started = self
            .authorize(self.client.post(&start_url), repository)?
            .send()
            .await
            .with_context(|| format!("POST {start_url}"))?;
        if started.status() != reqwest::StatusCode::ACCEPTED {
            bail!(
                "starting a blob upload to {repository}: status {}: {}",
                started.status(),
                started.text().await.unwrap_or_default()
            );
        }
        let location = started
            .headers()
            .get(http::header::LOCATION)
            .context("blob upload answer without Location")?
            .to_str()?
            .to_owned();
        let mut upload_url = url::Url::parse(&self.base_url)?.join(&location)?;
        upload_url.query_pairs_mut().append_pair("digest", &digest);
        let put = self
            .authorize(self.client.put(upload_url.clone()), repository)?
            .header(http::header::CONTENT_TYPE, "application/octet-stream")
            .body(bytes.to_vec())
            .send()
            .await
            .with_context(|| format!("PUT {upload_url}"))?;
        if put.status() != reqwest::StatusCode::CREATED {
            bail!(
                "uploading blob {digest} to {repository}: status {}: {}",
                put.status(),
                put.text().await.unwrap_or_default()
            );
        }
        Ok(digest)
    }

    /// PUTs a manifest under `reference` (a tag or the digest) with `Content-Type: media_type`;
    /// returns its digest, checked against `Docker-Content-Digest`.
    pub async fn push_manifest(
        &self,
        repository: &str,
        reference: &str,
        media_type: &str,
        body: &[u8],
    ) -> anyhow::Result<String> {
        let digest = sha256_digest(body);
        let url = format!("{}/v2/{repository}/manifests/{reference}", self.base_url);
        let response = self
            .authorize(self.client.put(&url), repository)?
            .header(http::header::CONTENT_TYPE, media_type)
            .body(body.to_vec())
            .send()
            .await
            .with_context(|| format!("PUT {url}"))?;
        if response.status() != reqwest::StatusCode::CREATED {
            bail!(
                "pushing manifest {repository}:{reference}: status {}: {}",
                response.status(),
                response.text().await.unwrap_or_default()
            );
        }
        if let Some(answered) = response.headers().get("docker-content-digest") {
            if answered.to_str()? != digest {
                bail!("registry computed digest {answered:?} for {repository}:{reference}, expected {digest}");
            }
        }
        Ok(digest)
    }

    /// Pushes a JSON manifest value (serialized compactly) and returns its digest and bytes.
    pub async fn push_manifest_json(
        &self,
        repository: &str,
        reference: &str,
        media_type: &str,
        manifest: &serde_json::Value,
    ) -> anyhow::Result<(String, Vec<u8>)> {
        let body = serde_json::to_vec(manifest)?;
        let digest = self
            .push_manifest(repository, reference, media_type, &body)
            .await?;
        Ok((digest, body))
    }
}
