//! The install's key file (`--shared-cache-key-file`): any bytes (a raw binary key as well as
//! text), at most [`MAX_KEY_FILE_BYTES`], trailing newlines dropped. Only a regular file is read
//! (a FIFO or a device would block start-up or never end); a weak key or one that other users
//! may read is accepted with a warning ([`warnings`]), said when the shared cache starts. The
//! password file (`--shared-cache-password-file`) is read the same way ([`read_password_file`]),
//! and must be UTF-8.

use std::io::Read as _;
use std::path::{Path, PathBuf};

/// Largest key file read.
pub const MAX_KEY_FILE_BYTES: u64 = 4096;
/// Fewer distinct bytes than this make a weak key (`aaaa…`, sixteen spaces).
pub const MIN_DISTINCT_BYTES: usize = 8;

/// Why the key file cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyFileError {
    #[error("cannot read {path}: {source}", path = path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a regular file", path = path.display())]
    NotAFile { path: PathBuf },
    #[error("{path} is longer than {MAX_KEY_FILE_BYTES} bytes", path = path.display())]
    TooLarge { path: PathBuf },
    #[error("{path} is not UTF-8", path = path.display())]
    NotUtf8 { path: PathBuf },
}

/// The key read from a file, and the file's permission bits.
#[derive(Clone, derive_more::Debug)]
pub struct KeyFile {
    #[debug("{:?}", "<redacted>")]
    pub key: Vec<u8>,
    /// Unix permission bits of the file (`None` elsewhere).
    pub mode: Option<u32>,
}

/// Reads the password file like the key file (blocking, bounded to [`MAX_KEY_FILE_BYTES`],
/// a regular file only, trailing newlines dropped); its text must be UTF-8.
pub fn read_password_file(path: &Path) -> Result<String, KeyFileError> {
    let read = read_key_file(path)?;
    String::from_utf8(read.key).map_err(|_| KeyFileError::NotUtf8 {
        path: path.to_owned(),
    })
}

/// Reads the key file (blocking, bounded; never waits on a FIFO).
pub fn read_key_file(path: &Path) -> Result<KeyFile, KeyFileError> {
    let read_error = |source| KeyFileError::Read {
        path: path.to_owned(),
        source,
    };
    // Follows symlinks (a Kubernetes Secret volume's files are symlinks): the target must be a
    // regular file before it is opened, since opening a FIFO blocks until a writer comes.
    let metadata = std::fs::metadata(path).map_err(read_error)?;
    if !metadata.is_file() {
        return Err(KeyFileError::NotAFile {
            path: path.to_owned(),
        });
    }
    let file = std::fs::File::open(path).map_err(read_error)?;
    let opened = file.metadata().map_err(read_error)?;
    if !opened.is_file() {
        return Err(KeyFileError::NotAFile {
            path: path.to_owned(),
        });
    }
    let mut key = Vec::new();
    file.take(MAX_KEY_FILE_BYTES.saturating_add(1))
        .read_to_end(&mut key)
        .map_err(read_error)?;
    if u64::try_from(key.len()).unwrap_or(u64::MAX) > MAX_KEY_FILE_BYTES {
        return Err(KeyFileError::TooLarge {
            path: path.to_owned(),
        });
    }
    while key.last().is_some_and(|b| matches!(b, b'\n' | b'\r')) {
        key.pop();
    }
    Ok(KeyFile {
        key,
        mode: mode(&opened),
    })
}

#[cfg(unix)]
fn mode(metadata: &std::fs::Metadata) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt as _;
    Some(metadata.permissions().mode() & 0o7777)
}

#[cfg(not(unix))]
fn mode(_: &std::fs::Metadata) -> Option<u32> {
    None
}

/// What is wrong with an accepted key (said as warnings): fewer than [`MIN_DISTINCT_BYTES`]
/// distinct bytes, or a file that any user may read. A group-readable file is not said: a
/// Kubernetes Secret volume with `fsGroup` is always root-owned, in that group, mode 0440 (the
/// kubelet adds group read), which is how a non-root pod reads a Secret no other user can; a
/// warning there would be permanent noise that teaches operators to ignore it.
pub fn warnings(key: &[u8], mode: Option<u32>) -> Vec<&'static str> {
    let mut seen = [false; 256];
    for &byte in key {
        seen[usize::from(byte)] = true;
    }
    let distinct = seen.iter().filter(|s| **s).count();
    let mut warnings = Vec::new();
    if distinct < MIN_DISTINCT_BYTES {
        warnings.push(
            "the shared cache key has fewer than 8 distinct bytes: anyone who guesses it can forge shared cache values (use 32 random bytes)",
        );
    }
    if mode.is_some_and(|mode| mode & 0o007 != 0) {
        warnings.push(
            "the shared cache key file may be read by any user (mode 0400, or 0440 in a group of its own such as the chart's fsGroup, keeps it private)",
        );
    }
    warnings
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn any_bytes_are_a_key_and_weak_or_open_ones_are_said() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        let binary: Vec<u8> = (0u8..32).map(|i| i.wrapping_mul(37) ^ 0xa5).collect();
        std::fs::write(&path, &binary).unwrap();
        assert_eq!(read_key_file(&path).unwrap().key, binary);
        std::fs::write(&path, "0123456789abcdef\r\n\n").unwrap();
        assert_eq!(read_key_file(&path).unwrap().key, b"0123456789abcdef");

        assert!(warnings(&binary, Some(0o400)).is_empty());
        for weak in [&[b'a'; 16][..], &[b' '; 16], b"abababababababab"] {
            let said = warnings(weak, Some(0o400));
            assert_eq!(said.len(), 1, "{weak:?}");
            assert!(said[0].contains("distinct"), "{said:?}");
        }
        for open in [0o666, 0o644, 0o444, 0o404] {
            let said = warnings(&binary, Some(open));
            assert_eq!(said.len(), 1, "{open:o}");
            assert!(said[0].contains("any user"), "{said:?}");
        }
        // A Secret volume with fsGroup: root-owned, group-readable, nobody else.
        for private in [0o400, 0o600, 0o440, 0o640] {
            assert!(warnings(&binary, Some(private)).is_empty(), "{private:o}");
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
            assert_eq!(read_key_file(&path).unwrap().mode, Some(0o666));
        }

        std::fs::write(&path, vec![b'k'; 4097]).unwrap();
        assert!(matches!(
            read_key_file(&path),
            Err(KeyFileError::TooLarge { .. })
        ));
        assert!(matches!(
            read_key_file(dir.path()),
            Err(KeyFileError::NotAFile { .. })
        ));
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        // Without the file type check, this would block until a writer opened the FIFO.
        let error = read_key_file(&path).unwrap_err();
        assert!(error.to_string().contains("not a regular file"), "{error}");
        let error = read_password_file(&path).unwrap_err();
        assert!(error.to_string().contains("not a regular file"), "{error}");
    }

    #[test]
    fn a_password_file_is_bounded_text() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("password");
        std::fs::write(&path, "s3cret\n").unwrap();
        assert_eq!(read_password_file(&path).unwrap(), "s3cret");
        std::fs::write(&path, [0xff, 0xfe]).unwrap();
        assert!(matches!(
            read_password_file(&path),
            Err(KeyFileError::NotUtf8 { .. })
        ));
        std::fs::write(&path, vec![b'p'; 4097]).unwrap();
        assert!(matches!(
            read_password_file(&path),
            Err(KeyFileError::TooLarge { .. })
        ));
    }
}
