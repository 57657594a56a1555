//! The rustls client configuration: webpki roots, the system's roots, and `--registry-ca-file`.

use std::sync::Arc;

use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

use crate::Error;

/// Builds the TLS configuration shared by every registry connection.
pub fn client_config(extra_ca_pem: Option<&[u8]>) -> Result<rustls::ClientConfig, Error> {
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
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config {
            reason: format!("TLS setup: {e}"),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
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
