//! Local files (docker and containerd configuration, credential provider configuration,
//! `hosts.toml` and the certificates it names) read without ever blocking an async worker, the
//! admission path or the process's exit.
//!
//! A read can block forever: a FIFO opened for reading waits for a writer, a hung network mount
//! never answers. Each read therefore runs on a detached thread of its own (not tokio's blocking
//! pool, which the runtime waits for when it shuts down, and not an async worker), and the caller
//! waits at most the [`FileReader`]'s timeout. A thread still stuck on a path keeps that path
//! marked busy, so a later read of it fails at once instead of starting another thread, and at
//! most [`MAX_STUCK`] reads are outstanding per reader: a hung mount costs a bounded number of
//! idle threads, never an unbounded number, and never a hang.

use std::collections::HashSet;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one file operation may take by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);
/// Most operations outstanding at once per reader (each may hold a thread stuck in the kernel).
pub const MAX_STUCK: usize = 32;

/// Why a file could not be read. Never carries the file's content.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    #[error("reading {path} did not finish within {timeout_ms} ms (a FIFO or a hung mount?)")]
    TimedOut { path: PathBuf, timeout_ms: u64 },
    #[error("{path} is still being read by an earlier attempt that has not finished")]
    StillBlocked { path: PathBuf },
    #[error("too many file reads are stuck; not reading {path}")]
    Busy { path: PathBuf },
    #[error("{path} is larger than {max} bytes")]
    TooLarge { path: PathBuf, max: u64 },
    #[error("cannot read {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: Arc<std::io::Error>,
    },
}

/// Runs file-system work on detached threads, each bounded by a timeout. Cheap to clone; clones
/// share the set of outstanding reads.
#[derive(Clone, Debug)]
pub struct FileReader {
    timeout: Duration,
    outstanding: Arc<Mutex<HashSet<PathBuf>>>,
}

impl Default for FileReader {
    fn default() -> Self {
        Self::new(DEFAULT_TIMEOUT)
    }
}

/// Unmarks a path when its thread ends, even by a panic.
struct Outstanding {
    set: Arc<Mutex<HashSet<PathBuf>>>,
    path: PathBuf,
}

impl Drop for Outstanding {
    fn drop(&mut self) {
        self.set
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.path);
    }
}

impl FileReader {
    pub fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            outstanding: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    /// The timeout of one operation.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs `work` (file-system operations on `path`, which names the work in errors and marks
    /// it busy) on a detached thread and waits at most the timeout for its result.
    pub async fn run<T, F>(&self, path: &Path, work: F) -> Result<T, FileError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let guard = {
            let mut set = self
                .outstanding
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if set.contains(path) {
                return Err(FileError::StillBlocked {
                    path: path.to_owned(),
                });
            }
            if set.len() >= MAX_STUCK {
                return Err(FileError::Busy {
                    path: path.to_owned(),
                });
            }
            set.insert(path.to_owned());
            Outstanding {
                set: Arc::clone(&self.outstanding),
                path: path.to_owned(),
            }
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let spawned = std::thread::Builder::new()
            .name("noe-file-read".to_owned())
            .spawn(move || {
                let _guard = guard;
                let _ = tx.send(work());
            });
        if let Err(source) = spawned {
            // The closure (and with it the guard) was dropped: the path is unmarked.
            return Err(FileError::Io {
                path: path.to_owned(),
                source: Arc::new(source),
            });
        }
        match tokio::time::timeout(self.timeout, rx).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(_)) => Err(FileError::Io {
                path: path.to_owned(),
                source: Arc::new(std::io::Error::other("the reading thread panicked")),
            }),
            Err(_) => Err(FileError::TimedOut {
                path: path.to_owned(),
                timeout_ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    /// The contents of `path`, at most `max` bytes; `Ok(None)` when it does not exist.
    pub async fn read(&self, path: &Path, max: u64) -> Result<Option<Vec<u8>>, FileError> {
        let owned = path.to_owned();
        self.run(path, move || read_blocking(&owned, max))
            .await
            .and_then(|result| result)
    }
}

/// Reads at most `max` bytes of `path` on the calling thread; `Ok(None)` when it does not exist.
/// Only for threads that may block (inside [`FileReader::run`]).
pub fn read_blocking(path: &Path, max: u64) -> Result<Option<Vec<u8>>, FileError> {
    let io = |source| FileError::Io {
        path: path.to_owned(),
        source: Arc::new(source),
    };
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > max {
        return Err(FileError::TooLarge {
            path: path.to_owned(),
            max,
        });
    }
    Ok(Some(bytes))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn fifo(dir: &Path) -> PathBuf {
        let path = dir.join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success());
        path
    }

    #[tokio::test]
    async fn reads_small_files_and_misses() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a");
        std::fs::write(&path, "hello").unwrap();
        let reader = FileReader::default();
        assert_eq!(reader.read(&path, 5).await.unwrap().unwrap(), b"hello");
        assert!(reader
            .read(&dir.path().join("missing"), 5)
            .await
            .unwrap()
            .is_none());
        assert!(matches!(
            reader.read(&path, 4).await,
            Err(FileError::TooLarge { max: 4, .. })
        ));
    }

    #[tokio::test]
    async fn a_fifo_times_out_and_stays_marked_until_it_unblocks() {
        let dir = tempfile::tempdir().unwrap();
        let path = fifo(dir.path());
        let reader = FileReader::new(Duration::from_millis(50));
        assert!(matches!(
            reader.read(&path, 10).await,
            Err(FileError::TimedOut { timeout_ms: 50, .. })
        ));
        // The thread is still blocked in open(): no second thread for the same path.
        assert!(matches!(
            reader.read(&path, 10).await,
            Err(FileError::StillBlocked { .. })
        ));
        // A writer releases it; the path becomes readable again.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map(drop)
            .unwrap();
        let mut unmarked = false;
        for _ in 0..200 {
            if !reader.outstanding.lock().unwrap().contains(&path) {
                unmarked = true;
                break;
            }
            tokio::task::yield_now().await;
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(unmarked, "the reading thread never finished");
    }

    #[tokio::test]
    async fn stuck_reads_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let reader = FileReader::new(Duration::from_millis(1));
        let mut fifos = Vec::new();
        for i in 0..=MAX_STUCK {
            let sub = dir.path().join(i.to_string());
            std::fs::create_dir(&sub).unwrap();
            fifos.push(fifo(&sub));
        }
        for path in &fifos[..MAX_STUCK] {
            assert!(matches!(
                reader.read(path, 10).await,
                Err(FileError::TimedOut { .. })
            ));
        }
        assert!(matches!(
            reader.read(&fifos[MAX_STUCK], 10).await,
            Err(FileError::Busy { .. })
        ));
        // Release every stuck thread so the test leaves none behind.
        for path in &fifos[..MAX_STUCK] {
            std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map(drop)
                .unwrap();
        }
    }
}
