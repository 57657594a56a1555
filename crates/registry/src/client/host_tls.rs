//! The TLS files of a registry host: `ca` bundles and `client` certificates named in
//! `hosts.toml`, or found in a docker-style `certs.d/HOST` directory (`*.crt` CAs, `*.cert` with
//! the `*.key` of the same name). Their contents are read once per load of the host
//! configuration (off the async workers, see [`crate::files`]) and travel with the endpoint, so
//! connecting never touches the disk; a rotated certificate is picked up at the next reload.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Largest certificate or key file read.
pub const MAX_TLS_FILE_BYTES: u64 = 1 << 20;
/// Most `ca` or `client` entries used per host.
pub const MAX_TLS_FILES: usize = 64;

/// One `client` entry: a certificate (chain) and its key, or one file holding both.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientCert {
    pub cert: PathBuf,
    /// `None`: the key is in `cert` (containerd's `client = "both.pem"`).
    pub key: Option<PathBuf>,
}

/// The contents of a host's TLS files. May hold private keys: `Debug` shows counts only.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct TlsFiles {
    /// PEM of each `ca` file, in order.
    pub ca: Vec<Vec<u8>>,
    /// PEM of each client certificate and of its key (the same bytes for a combined file).
    pub client: Vec<(Vec<u8>, Vec<u8>)>,
    /// Why a file could not be read; the endpoint is then unusable (as containerd refuses it).
    pub error: Option<String>,
}

impl std::fmt::Debug for TlsFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsFiles")
            .field("ca", &self.ca.len())
            .field("client", &self.client.len())
            .field("error", &self.error)
            .finish()
    }
}

/// Reads `ca` and `client` files (blocking: only inside [`noe_credentials::files::FileReader::run`]).
pub fn read_tls_files(ca: &[PathBuf], client: &[ClientCert]) -> TlsFiles {
    let mut files = TlsFiles::default();
    let read = |path: &Path| -> Result<Vec<u8>, String> {
        match noe_credentials::files::read_blocking(path, MAX_TLS_FILE_BYTES) {
            Ok(Some(bytes)) => Ok(bytes),
            Ok(None) => Err(format!("{} does not exist", path.display())),
            Err(error) => Err(error.to_string()),
        }
    };
    if ca.len() > MAX_TLS_FILES || client.len() > MAX_TLS_FILES {
        files.error = Some(format!("more than {MAX_TLS_FILES} ca or client files"));
        return files;
    }
    for path in ca {
        match read(path) {
            Ok(pem) => files.ca.push(pem),
            Err(error) => {
                files.error = Some(format!("hosts.toml ca file: {error}"));
                return files;
            }
        }
    }
    for pair in client {
        let cert = read(&pair.cert);
        let key = match &pair.key {
            Some(key) => read(key),
            None => cert.clone(),
        };
        match (cert, key) {
            (Ok(cert), Ok(key)) => files.client.push((cert, key)),
            (Err(error), _) | (_, Err(error)) => {
                files.error = Some(format!("client certificate: {error}"));
                return files;
            }
        }
    }
    files
}

/// A docker-style `certs.d/HOST` directory: its `*.crt` files (CAs) and `*.cert` files with the
/// `*.key` of the same name when there is one, each sorted by name, as containerd reads them.
pub fn docker_cert_dir(dir: &Path) -> (Vec<PathBuf>, Vec<ClientCert>) {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .take(MAX_TLS_FILES.saturating_mul(4))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let ca = names
        .iter()
        .filter(|n| n.ends_with(".crt"))
        .map(|n| dir.join(n))
        .collect();
    let client = names
        .iter()
        .filter_map(|n| n.strip_suffix(".cert"))
        .map(|stem| {
            let key = format!("{stem}.key");
            ClientCert {
                cert: dir.join(format!("{stem}.cert")),
                key: names.contains(&key).then(|| dir.join(key)),
            }
        })
        .collect();
    (ca, client)
}

/// A loaded [`TlsFiles`] shared by clones of an endpoint.
pub type SharedTlsFiles = Arc<TlsFiles>;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn docker_cert_dirs_pair_certs_with_their_keys() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "ca.crt",
            "b.cert",
            "b.key",
            "a.cert",
            "other.key",
            "notes.txt",
        ] {
            std::fs::write(dir.path().join(name), name).unwrap();
        }
        std::fs::create_dir(dir.path().join("sub.crt")).unwrap();
        let (ca, client) = docker_cert_dir(dir.path());
        assert_eq!(ca, [dir.path().join("ca.crt")]);
        assert_eq!(
            client,
            [
                ClientCert {
                    cert: dir.path().join("a.cert"),
                    key: None
                },
                ClientCert {
                    cert: dir.path().join("b.cert"),
                    key: Some(dir.path().join("b.key"))
                },
            ]
        );
    }

    #[test]
    fn reads_contents_and_names_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let both = dir.path().join("both.pem");
        std::fs::write(&both, "CERT+KEY").unwrap();
        let files = read_tls_files(
            &[],
            &[ClientCert {
                cert: both.clone(),
                key: None,
            }],
        );
        assert_eq!(files.client, [(b"CERT+KEY".to_vec(), b"CERT+KEY".to_vec())]);
        assert!(files.error.is_none());
        assert!(!format!("{files:?}").contains("KEY"));

        let missing = dir.path().join("missing.key");
        let files = read_tls_files(
            &[],
            &[ClientCert {
                cert: both,
                key: Some(missing.clone()),
            }],
        );
        assert!(files.client.is_empty());
        assert!(files
            .error
            .unwrap()
            .contains(&missing.display().to_string()));
    }
}
