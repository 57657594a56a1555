//! The rustls client configuration: webpki roots, the system's roots, and `--registry-ca-file`;
//! for one containerd host, its own `ca` files too, or no verification at all (`skip_verify`),
//! and its `client` certificates (mTLS), presented to that host only.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustls::client::ResolvesClientCert;
use rustls::sign::CertifiedKey;
use rustls::{DistinguishedName, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::hosts::TlsFiles;
use crate::Error;

/// The roots every registry connection trusts: webpki's, the system's (read once, here), and
/// the extra CA bundle.
pub fn shared_roots(extra_ca_pem: Option<&[u8]>) -> Result<Arc<RootCertStore>, Error> {
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
    Ok(Arc::new(roots))
}

/// Builds the TLS configuration shared by every registry connection.
pub fn client_config(roots: &RootCertStore) -> Result<rustls::ClientConfig, Error> {
    host_config(roots, &TlsFiles::default(), false)
}

/// The TLS configuration of one containerd host: the shared roots plus the host's `ca` files,
/// or, with `skip_verify`, any certificate (signatures are still checked); and the host's
/// client certificates, when it has some.
pub fn host_config(
    roots: &RootCertStore,
    files: &TlsFiles,
    skip_verify: bool,
) -> Result<rustls::ClientConfig, Error> {
    build(roots, files, skip_verify, None)
}

/// The configuration of [`host_config`] presenting no client certificate and recording, in the
/// flag returned, whether the server asked for one: a diagnosis after a connection failed, on a
/// connection of its own, so the answer is that server's.
pub fn probe_config(
    roots: &RootCertStore,
    files: &TlsFiles,
    skip_verify: bool,
) -> Result<(rustls::ClientConfig, Arc<AtomicBool>), Error> {
    let asked = Arc::new(AtomicBool::new(false));
    let recorder = Arc::new(RecordsCertificateRequest(Arc::clone(&asked)));
    Ok((build(roots, files, skip_verify, Some(recorder))?, asked))
}

fn build(
    roots: &RootCertStore,
    files: &TlsFiles,
    skip_verify: bool,
    probe: Option<Arc<RecordsCertificateRequest>>,
) -> Result<rustls::ClientConfig, Error> {
    if let Some(reason) = &files.error {
        return Err(Error::Config {
            reason: reason.clone(),
        });
    }
    let mut roots = roots.clone();
    for pem in &files.ca {
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
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config {
            reason: format!("TLS setup: {e}"),
        })?
        .with_root_certificates(roots);
    let mut config = if let Some(probe) = probe {
        builder.with_client_cert_resolver(probe)
    } else if files.client.is_empty() {
        builder.with_no_client_auth()
    } else {
        let certs = files
            .client
            .iter()
            .map(|(cert, key)| ClientCert::from_pem(cert, key, &provider))
            .collect::<Result<Vec<_>, _>>()?;
        builder.with_client_cert_resolver(Arc::new(ClientCerts(certs)))
    };
    if skip_verify {
        config
            .dangerous()
            .set_certificate_verifier(Arc::new(AnyCertificate(provider)));
    }
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// One client certificate chain with its key, and the issuers of its certificates (DER names
/// with their SEQUENCE, as servers send `certificate_authorities`).
#[derive(Debug)]
struct ClientCert {
    key: Arc<CertifiedKey>,
    issuers: Vec<Vec<u8>>,
}

impl ClientCert {
    /// From PEM: every CERTIFICATE block of `cert` (the leaf first) and the first private key of
    /// `key` (which may be the same file). The key must match the leaf.
    fn from_pem(
        cert: &[u8],
        key: &[u8],
        provider: &rustls::crypto::CryptoProvider,
    ) -> Result<Self, Error> {
        let bad = |what: &str| Error::Config {
            reason: format!("hosts.toml client certificate: {what}"),
        };
        let chain = CertificateDer::pem_slice_iter(cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| bad("the certificate file is not valid PEM"))?;
        if chain.is_empty() {
            return Err(bad("the certificate file holds no certificate"));
        }
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|_| bad("no private key (PKCS#8, PKCS#1 or SEC1 PEM) in the key file"))?;
        let issuers = chain
            .iter()
            .filter_map(|c| webpki::EndEntityCert::try_from(c).ok())
            .map(|c| DistinguishedName::in_sequence(c.issuer()).as_ref().to_vec())
            .collect();
        let key = CertifiedKey::from_der(chain, key, provider)
            .map_err(|e| bad(&format!("unusable key ({e})")))?;
        Ok(Self {
            key: Arc::new(key),
            issuers,
        })
    }
}

/// Picks the client certificate to present, as Go's TLS client does for containerd: the first
/// whose key can sign with a scheme the server accepts and whose chain was issued by one of the
/// CAs the server names (any, when it names none); failing that, the first that can sign.
#[derive(Debug)]
struct ClientCerts(Vec<ClientCert>);

impl ResolvesClientCert for ClientCerts {
    fn resolve(
        &self,
        root_hint_subjects: &[&[u8]],
        sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        let usable = |c: &&ClientCert| c.key.key.choose_scheme(sigschemes).is_some();
        let named = |c: &&ClientCert| {
            root_hint_subjects.is_empty()
                || c.issuers
                    .iter()
                    .any(|issuer| root_hint_subjects.contains(&issuer.as_slice()))
        };
        self.0
            .iter()
            .filter(usable)
            .find(named)
            .or_else(|| self.0.iter().find(usable))
            .map(|c| Arc::clone(&c.key))
    }

    fn has_certs(&self) -> bool {
        !self.0.is_empty()
    }
}

/// Presents nothing; notes that the server asked (it sends a CertificateRequest).
#[derive(Debug)]
struct RecordsCertificateRequest(Arc<AtomicBool>);

impl ResolvesClientCert for RecordsCertificateRequest {
    fn resolve(&self, _: &[&[u8]], _: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        self.0.store(true, Ordering::Relaxed);
        None
    }

    fn has_certs(&self) -> bool {
        false
    }
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn bad_ca_files_are_configuration_errors() {
        for pem in [
            &b""[..],
            b"not pem",
            b"-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n",
        ] {
            assert!(matches!(shared_roots(Some(pem)), Err(Error::Config { .. })));
        }
        assert!(client_config(&shared_roots(None).unwrap()).is_ok());
    }

    #[test]
    fn bad_client_certificates_are_configuration_errors() {
        let files = |cert: &[u8], key: &[u8]| TlsFiles {
            client: vec![(cert.to_vec(), key.to_vec())],
            ..TlsFiles::default()
        };
        for (cert, key) in [
            (&b""[..], &b""[..]),
            (b"not pem", b"not pem"),
            (
                b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                b"no key here",
            ),
        ] {
            let error = host_config(&RootCertStore::empty(), &files(cert, key), false).unwrap_err();
            assert!(matches!(error, Error::Config { .. }), "{error:?}");
        }
        let unread = TlsFiles {
            error: Some("client certificate: /x does not exist".into()),
            ..TlsFiles::default()
        };
        let error = host_config(&RootCertStore::empty(), &unread, false).unwrap_err();
        assert!(error.to_string().contains("/x does not exist"), "{error}");
    }
}
