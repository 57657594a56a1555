//! The serving certificate: loaded from `--cert-dir` and re-read when the files change, or
//! generated for local trials (`--dev-self-signed-cert`).
//!
//! Kubernetes updates a mounted Secret by swapping a symlink, which inotify on the file path
//! misses, so the files' *contents* are polled. A new pair that does not parse (or whose key does
//! not match the certificate) is logged and ignored: the old certificate keeps serving.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// File names inside `--cert-dir` (what cert-manager and kubernetes.io/tls Secrets use).
pub const CERT_FILE: &str = "tls.crt";
pub const KEY_FILE: &str = "tls.key";

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no PEM certificate in {path}")]
    NoCertificate { path: PathBuf },
    #[error("no PEM private key in {path}")]
    NoKey { path: PathBuf },
    #[error("the key in {key} does not match the certificate in {cert}")]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("cannot generate a self-signed certificate")]
    SelfSigned(#[source] rcgen::Error),
    #[error("cannot build the TLS configuration")]
    Config(#[source] rustls::Error),
}

/// The crypto provider used for serving (ring).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Parses a PEM certificate chain and private key into a key rustls can serve.
pub fn certified_key(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert_path: &Path,
    key_path: &Path,
) -> Result<CertifiedKey, TlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .filter_map(Result::ok)
        .collect();
    if chain.is_empty() {
        return Err(TlsError::NoCertificate {
            path: cert_path.to_owned(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|_| TlsError::NoKey {
        path: key_path.to_owned(),
    })?;
    CertifiedKey::from_der(chain, key, &provider()).map_err(|source| TlsError::Mismatch {
        cert: cert_path.to_owned(),
        key: key_path.to_owned(),
        source,
    })
}

/// A certificate resolver whose key can be swapped atomically while connections are accepted.
/// It may start empty (the certificate not written yet): handshakes then fail until one is
/// loaded.
pub struct Reloadable {
    current: RwLock<Option<Arc<CertifiedKey>>>,
    reloads: tokio::sync::watch::Sender<Reloads>,
}

/// What [`CertDir::watch`] did so far: each swap, and each poll whose changed files were not
/// usable (the current certificate kept serving).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reloads {
    pub loaded: u64,
    pub rejected: u64,
}

impl fmt::Debug for Reloadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reloadable")
            .field("has_certificate", &self.has_certificate())
            .finish()
    }
}

impl Reloadable {
    pub fn new(key: CertifiedKey) -> Arc<Self> {
        Self::holding(Some(Arc::new(key)))
    }

    /// Without a certificate yet.
    pub fn empty() -> Arc<Self> {
        Self::holding(None)
    }

    fn holding(key: Option<Arc<CertifiedKey>>) -> Arc<Self> {
        Arc::new(Self {
            current: RwLock::new(key),
            reloads: tokio::sync::watch::Sender::new(Reloads::default()),
        })
    }

    /// Replaces the served certificate; handshakes already running keep the old one.
    pub fn swap(&self, key: CertifiedKey) {
        let key = Some(Arc::new(key));
        match self.current.write() {
            Ok(mut guard) => *guard = key,
            Err(poisoned) => *poisoned.into_inner() = key,
        }
        self.reloads
            .send_modify(|r| r.loaded = r.loaded.saturating_add(1));
    }

    /// Changed files that were not usable: the current certificate keeps serving.
    fn rejected(&self) {
        self.reloads
            .send_modify(|r| r.rejected = r.rejected.saturating_add(1));
    }

    /// Follows the reloads: an event to wait on (tests, and anything that must know a rotation
    /// was seen) rather than a guess of how long the poll takes.
    pub fn reloads(&self) -> tokio::sync::watch::Receiver<Reloads> {
        self.reloads.subscribe()
    }

    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        match self.current.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub fn has_certificate(&self) -> bool {
        self.current().is_some()
    }

    /// A rustls server configuration serving this resolver's certificate (HTTP/2 and HTTP/1.1).
    pub fn server_config(self: &Arc<Self>) -> Result<ServerConfig, TlsError> {
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

impl ResolvesServerCert for Reloadable {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current()
    }
}

/// `tls.crt` and `tls.key` of a directory, watched by content.
#[derive(Debug)]
pub struct CertDir {
    cert: PathBuf,
    key: PathBuf,
    last: (Vec<u8>, Vec<u8>),
}

impl CertDir {
    /// Loads the pair when it is there; otherwise (cert-manager has not written the Secret yet,
    /// the usual install race) an empty resolver that [`CertDir::watch`] fills once the files
    /// appear. Errors other than missing files are returned: they will not fix themselves.
    pub fn open(dir: &Path) -> Result<(Self, Arc<Reloadable>), TlsError> {
        match Self::load(dir) {
            Ok((watched, key)) => Ok((watched, Reloadable::new(key))),
            Err(TlsError::Read { path, source })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                tracing::warn!(missing = %path.display(), "No serving certificate yet: not ready until it is written");
                let watched = Self {
                    cert: dir.join(CERT_FILE),
                    key: dir.join(KEY_FILE),
                    last: (Vec::new(), Vec::new()),
                };
                Ok((watched, Reloadable::empty()))
            }
            Err(error) => Err(error),
        }
    }

    /// Loads the pair once; the error names the file at fault.
    pub fn load(dir: &Path) -> Result<(Self, CertifiedKey), TlsError> {
        let cert = dir.join(CERT_FILE);
        let key = dir.join(KEY_FILE);
        let contents = (read(&cert)?, read(&key)?);
        let certified = certified_key(&contents.0, &contents.1, &cert, &key)?;
        Ok((
            Self {
                cert,
                key,
                last: contents,
            },
            certified,
        ))
    }

    /// `Ok(Some(key))` when the files changed and parse, `Ok(None)` when unchanged, `Err` when
    /// changed but unusable (the caller keeps serving the old certificate). A half-written pair is
    /// retried at the next poll, since the contents stay "changed" until they parse.
    pub fn poll(&mut self) -> Result<Option<CertifiedKey>, TlsError> {
        let contents = (read(&self.cert)?, read(&self.key)?);
        if contents == self.last {
            return Ok(None);
        }
        let certified = certified_key(&contents.0, &contents.1, &self.cert, &self.key)?;
        self.last = contents;
        Ok(Some(certified))
    }

    /// Polls every `interval` and swaps `target`'s key on change, until the task is dropped.
    pub async fn watch(mut self, target: Arc<Reloadable>, interval: Duration) {
        let poll = || -> Result<bool, TlsError> {
            let Some(key) = self.poll()? else {
                return Ok(false);
            };
            target.swap(key);
            tracing::info!(cert = %self.cert.display(), "Reloaded the serving certificate");
            Ok(true)
        };
        let rejected = |text: &str, new: bool| {
            target.rejected();
            if new {
                tracing::warn!(error = %text, "Keeping the current certificate: the new one is not usable");
            }
        };
        poll_every(interval, poll, rejected).await;
    }
}

/// Calls `poll` every `interval` (the first time one interval from now) until the task is
/// dropped; `poll` says whether it loaded something new. Each failure goes to `rejected` with
/// whether it is news: a persistent problem is logged once, not at every poll, until a load
/// succeeds.
pub(crate) async fn poll_every<E: fmt::Display>(
    interval: Duration,
    mut poll: impl FnMut() -> Result<bool, E>,
    mut rejected: impl FnMut(&str, bool),
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    let mut last_error: Option<String> = None;
    loop {
        ticker.tick().await;
        match poll() {
            Ok(false) => {}
            Ok(true) => last_error = None,
            Err(error) => {
                let text = error.to_string();
                let new = last_error.as_deref() != Some(text.as_str());
                rejected(&text, new);
                if new {
                    last_error = Some(text);
                }
            }
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

/// A throw-away self-signed certificate for `localhost`, `127.0.0.1` and `::1`.
pub fn self_signed() -> Result<(CertifiedKey, String), TlsError> {
    let generated = rcgen::generate_simple_self_signed(vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ])
    .map_err(TlsError::SelfSigned)?;
    let cert_pem = generated.cert.pem();
    let key_pem = generated.signing_key.serialize_pem();
    let key = certified_key(
        cert_pem.as_bytes(),
        key_pem.as_bytes(),
        Path::new("<self-signed>"),
        Path::new("<self-signed>"),
    )?;
    Ok((key, cert_pem))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn pair(name: &str) -> (String, String) {
        let generated = rcgen::generate_simple_self_signed(vec![name.to_owned()]).unwrap();
        (generated.cert.pem(), generated.signing_key.serialize_pem())
    }

    #[test]
    fn load_poll_and_keep_old_on_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = pair("one.test");
        std::fs::write(dir.path().join(CERT_FILE), &cert).unwrap();
        std::fs::write(dir.path().join(KEY_FILE), &key).unwrap();
        let (mut watched, first) = CertDir::load(dir.path()).unwrap();
        assert!(watched.poll().unwrap().is_none(), "unchanged files");

        // garbage: an error, and the next poll retries (still changed)
        std::fs::write(dir.path().join(CERT_FILE), "not a cert").unwrap();
        assert!(matches!(
            watched.poll(),
            Err(TlsError::NoCertificate { .. })
        ));
        assert!(matches!(
            watched.poll(),
            Err(TlsError::NoCertificate { .. })
        ));

        // a certificate with someone else's key
        let (cert2, key2) = pair("two.test");
        std::fs::write(dir.path().join(CERT_FILE), &cert2).unwrap();
        assert!(matches!(watched.poll(), Err(TlsError::Mismatch { .. })));

        std::fs::write(dir.path().join(KEY_FILE), &key2).unwrap();
        let second = watched.poll().unwrap().expect("changed");
        assert_ne!(first.cert, second.cert);
        assert!(watched.poll().unwrap().is_none());
    }

    #[test]
    fn missing_files_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let error = CertDir::load(dir.path()).unwrap_err().to_string();
        assert!(error.contains("tls.crt"), "{error}");
    }

    #[test]
    fn self_signed_serves() {
        let (key, pem) = self_signed().unwrap();
        assert!(pem.contains("BEGIN CERTIFICATE"));
        let resolver = Reloadable::new(key);
        assert!(resolver.server_config().is_ok());
    }
}
