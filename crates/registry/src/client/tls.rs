//! The rustls client configuration: webpki roots, the system's roots, and `--registry-ca-file`;
//! for one containerd host, its own `ca` files too, or no verification at all (`skip_verify`).

use std::sync::Arc;

use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

use crate::Error;

/// Builds the TLS configuration shared by every registry connection.
pub fn client_config(extra_ca_pem: Option<&[u8]>) -> Result<rustls::ClientConfig, Error> {
    host_config(extra_ca_pem, &[], false)
}

/// The TLS configuration of one containerd host: the shared roots plus `host_cas` (PEM file
/// contents), or, with `skip_verify`, any certificate (signatures are still checked).
pub fn host_config(
    extra_ca_pem: Option<&[u8]>,
    host_cas: &[Vec<u8>],
    skip_verify: bool,
) -> Result<rustls::ClientConfig, Error> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let native = rustls_native_certs::load_native_certs();
    for cert in native.certs {
        // A broken system certificate must not prevent start-up; the others still count.
        let _ = roots.add(cert);
    }
    if let Some(pem) = extra_ca_pem {
        let mut added = 0;
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| Error::Config {
                reason: format!("registry CA file is not valid PEM: {e}"),
            })?;
            roots.add(cert).map_err(|e| Error::Config {
                reason: format!("registry CA file holds an unusable certificate: {e}"),
            })?;
            added += 1;
        }
        if added == 0 {
            return Err(Error::Config {
                reason: "registry CA file holds no certificate".into(),
            });
        }
    }
    for pem in host_cas {
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| Error::Config {
                reason: format!("hosts.toml ca file is not valid PEM: {e}"),
            })?;
            roots.add(cert).map_err(|e| Error::Config {
                reason: format!("hosts.toml ca file holds an unusable certificate: {e}"),
            })?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config {
            reason: format!("TLS setup: {e}"),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    if skip_verify {
        config
            .dangerous()
            .set_certificate_verifier(Arc::new(AnyCertificate(provider)));
    }
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// containerd's `skip_verify`: any server certificate is accepted; the handshake signatures are
/// still verified, so the connection is encrypted to whoever holds the presented key.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls_pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_ca_files_are_configuration_errors() {
        for pem in [
            &b""[..],
            b"not pem",
            b"-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n",
        ] {
            assert!(matches!(
                client_config(Some(pem)),
                Err(Error::Config { .. })
            ));
        }
        assert!(client_config(None).is_ok());
    }
}
