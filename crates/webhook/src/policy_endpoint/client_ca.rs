//! `--lookup-client-ca`, re-read when its contents change: a client-certificate verifier whose
//! trust anchors are swapped atomically while connections are accepted, like the serving
//! certificate ([`crate::server::tls::CertDir`]): the file is polled by content (Kubernetes
//! swaps a symlink, so a watch on the path would miss it), a change that does not parse keeps
//! the current CA, and handshakes already running finish with the CA they started with.
//!
//! The CertificateRequest carries no list of acceptable CA names (they would go stale with the
//! file): clients send their certificate whatever CA issued it, and the handshake verifies it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, UnixTime};

use super::PolicyEndpointError;
use crate::server::tls::{poll_every, provider, Reloads};

/// The client CA file and the verifier built from its current contents.
pub struct ClientCa {
    path: PathBuf,
    current: RwLock<Arc<dyn ClientCertVerifier>>,
    /// The contents the current verifier was built from.
    last: Mutex<Vec<u8>>,
    reloads: tokio::sync::watch::Sender<Reloads>,
}

impl std::fmt::Debug for ClientCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCa")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// A verifier trusting the PEM certificates of `pem` (read from `path`); clients without a
/// certificate are let through the handshake (they may still present a Bearer token).
fn verifier(pem: &[u8], path: &Path) -> Result<Arc<dyn ClientCertVerifier>, PolicyEndpointError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem).filter_map(Result::ok) {
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        return Err(PolicyEndpointError::ClientCa {
            path: path.to_owned(),
        });
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .allow_unauthenticated()
        .build()
        .map_err(|_| PolicyEndpointError::ClientCa {
            path: path.to_owned(),
        })
}

fn read(path: &Path) -> Result<Vec<u8>, PolicyEndpointError> {
    std::fs::read(path).map_err(|source| PolicyEndpointError::ReadClientCa {
        path: path.to_owned(),
        source,
    })
}

impl ClientCa {
    /// Reads the CA file; it must hold at least one usable PEM certificate.
    pub fn load(path: &Path) -> Result<Arc<Self>, PolicyEndpointError> {
        let pem = read(path)?;
        let verifier = verifier(&pem, path)?;
        Ok(Arc::new(Self {
            path: path.to_owned(),
            current: RwLock::new(verifier),
            last: Mutex::new(pem),
            reloads: tokio::sync::watch::Sender::new(Reloads::default()),
        }))
    }

    fn current(&self) -> Arc<dyn ClientCertVerifier> {
        match self.current.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Reads the file again: `Ok(true)` when it changed and the new CA is in use, `Ok(false)`
    /// when unchanged, `Err` when changed but unusable (the current CA stays; a half-written
    /// file is retried at the next poll, its contents still "changed").
    pub fn poll(&self) -> Result<bool, PolicyEndpointError> {
        let pem = read(&self.path)?;
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if *last == pem {
            return Ok(false);
        }
        let verifier = verifier(&pem, &self.path)?;
        match self.current.write() {
            Ok(mut guard) => *guard = verifier,
            Err(poisoned) => *poisoned.into_inner() = verifier,
        }
        *last = pem;
        drop(last);
        self.reloads
            .send_modify(|r| r.loaded = r.loaded.saturating_add(1));
        Ok(true)
    }

    /// Follows the reloads (an event to wait on rather than a guess of the poll's timing).
    pub fn reloads(&self) -> tokio::sync::watch::Receiver<Reloads> {
        self.reloads.subscribe()
    }

    /// Polls every `interval` until the task is dropped.
    pub async fn watch(self: Arc<Self>, interval: Duration) {
        let poll = || -> Result<bool, PolicyEndpointError> {
            let changed = self.poll()?;
            if changed {
                tracing::info!(ca = %self.path.display(), "Reloaded the lookup client CA");
            }
            Ok(changed)
        };
        let rejected = |text: &str, new: bool| {
            self.reloads
                .send_modify(|r| r.rejected = r.rejected.saturating_add(1));
            if new {
                tracing::warn!(error = %text, "Keeping the current lookup client CA: the new one is not usable");
            }
        };
        poll_every(interval, poll, rejected).await;
    }
}

impl ClientCertVerifier for ClientCa {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.current()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.current().supported_verify_schemes()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::server::tls::{certified_key, Reloadable};
    use noe_test_support::{ServerCert, TestCa};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::{TcpListener, TcpStream};

    /// Longest any step of a test may take (a bound, not a synchronisation).
    const BOUND: Duration = Duration::from_secs(20);

    /// One connection presenting `client`'s certificate: whether the server's handshake admits
    /// it with a verified certificate.
    async fn admitted(
        acceptor: &tokio_rustls::TlsAcceptor,
        listener: &TcpListener,
        serving_ca: &TestCa,
        client: &ServerCert,
    ) -> bool {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(serving_ca.cert_der()).unwrap();
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(client.chain_der().unwrap(), client.key_der().unwrap())
            .unwrap();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let addr = listener.local_addr().unwrap();
        let client_side = async {
            let tcp = TcpStream::connect(addr).await?;
            let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
            let mut tls = connector.connect(name, tcp).await?;
            tls.write_all(b"x").await?;
            let mut byte = [0u8; 1];
            tls.read_exact(&mut byte).await?;
            Ok::<_, std::io::Error>(())
        };
        let server_side = async {
            let (tcp, _) = listener.accept().await.unwrap();
            let Ok(mut tls) = acceptor.accept(tcp).await else {
                return false;
            };
            let verified = tls.get_ref().1.peer_certificates().is_some();
            let mut byte = [0u8; 1];
            let _ = tls.read_exact(&mut byte).await;
            let _ = tls.write_all(b"y").await;
            let _ = tls.flush().await;
            verified
        };
        let (client_result, server_result) =
            tokio::time::timeout(BOUND, async { tokio::join!(client_side, server_side) })
                .await
                .expect("the handshake ended");
        assert_eq!(client_result.is_ok(), server_result, "{client_result:?}");
        server_result
    }

    /// A replaced CA file is picked up by the watch: a certificate of the new CA is admitted,
    /// one of the old refused; a file that does not parse keeps the CA in use.
    #[tokio::test]
    async fn a_replaced_client_ca_is_used_for_the_next_handshakes() {
        let serving = TestCa::with_name("serving").unwrap();
        let cert = serving.loopback_cert().unwrap();
        let key = certified_key(
            cert.cert_pem.as_bytes(),
            cert.key_pem.as_bytes(),
            Path::new("tls.crt"),
            Path::new("tls.key"),
        )
        .unwrap();
        let (old, new) = (
            TestCa::with_name("old client CA").unwrap(),
            TestCa::with_name("new client CA").unwrap(),
        );
        let (old_client, new_client) = (
            old.client_cert("gatekeeper").unwrap(),
            new.client_cert("gatekeeper").unwrap(),
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.crt");
        std::fs::write(&path, old.cert_pem()).unwrap();
        let ca = ClientCa::load(&path).unwrap();
        let config = super::super::server_config(&Reloadable::new(key), Some(&ca)).unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();

        assert!(admitted(&acceptor, &listener, &serving, &old_client).await);
        assert!(!admitted(&acceptor, &listener, &serving, &new_client).await);

        let mut reloads = ca.reloads();
        let watch = tokio::spawn(ca.clone().watch(Duration::from_millis(10)));
        std::fs::write(&path, "not a certificate").unwrap();
        tokio::time::timeout(BOUND, reloads.wait_for(|r| r.rejected >= 1))
            .await
            .unwrap()
            .unwrap();
        assert!(admitted(&acceptor, &listener, &serving, &old_client).await);

        // Replaced the way a Secret volume does it: a new file renamed over the old.
        let next = dir.path().join("ca.crt.next");
        std::fs::write(&next, new.cert_pem()).unwrap();
        std::fs::rename(&next, &path).unwrap();
        tokio::time::timeout(BOUND, reloads.wait_for(|r| r.loaded >= 1))
            .await
            .unwrap()
            .unwrap();
        assert!(admitted(&acceptor, &listener, &serving, &new_client).await);
        assert!(!admitted(&acceptor, &listener, &serving, &old_client).await);
        watch.abort();

        assert!(!ca.poll().unwrap(), "unchanged");
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(
            ca.poll(),
            Err(PolicyEndpointError::ReadClientCa { .. })
        ));
    }
}
