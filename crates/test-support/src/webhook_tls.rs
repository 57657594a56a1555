//! TLS for tests of the webhook's own HTTPS server: a `--cert-dir` written the way a rotated
//! Secret volume appears, and clients that trust chosen CAs only.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;

use crate::TestCa;

/// Writes a loopback certificate of `ca` as `tls.crt` and `tls.key` into `dir`, written beside
/// and renamed, as a Secret volume update appears atomically.
pub fn write_cert_dir(ca: &TestCa, dir: &Path) -> anyhow::Result<()> {
    let cert = ca.loopback_cert()?;
    let tmp = dir.join(".tmp");
    std::fs::create_dir_all(&tmp).context("creating the staging directory")?;
    std::fs::write(tmp.join("tls.crt"), &cert.cert_pem)?;
    std::fs::write(tmp.join("tls.key"), &cert.key_pem)?;
    std::fs::rename(tmp.join("tls.key"), dir.join("tls.key"))?;
    std::fs::rename(tmp.join("tls.crt"), dir.join("tls.crt"))?;
    Ok(())
}

/// An HTTPS client that trusts only `cas`, opens a new connection per request and resumes no
/// TLS session, so every request verifies the certificate actually served.
pub fn https_client(cas: &[&TestCa]) -> anyhow::Result<reqwest::Client> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in cas {
        roots.add(ca.cert_der())?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.resumption = rustls::client::Resumption::disabled();
    reqwest::Client::builder()
        .use_preconfigured_tls(config)
        .pool_max_idle_per_host(0)
        .timeout(std::time::Duration::from_secs(20))
        .build()
        .context("building the HTTPS client")
}
