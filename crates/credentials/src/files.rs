//! Local files (docker and containerd configuration, credential provider configuration,
//! `hosts.toml` and the certificates it names) read without ever blocking an async worker, the
//! admission path or the process's exit.
//!
//! A read can block forever: a FIFO opened for reading waits for a writer, a hung network mount
//! never answers. Each read therefore runs on a detached thread of its own (not tokio's blocking
//! pool, which the runtime waits for when it shuts down, and not an async worker), and the caller
//! waits at most the [`FileReader`]'s timeout. A path being read stays marked busy until its
//! thread ends: a second read of it meanwhile (two lookups that start together) waits for the
//! first, within its own timeout, then reads again; a read of a path whose earlier read is past
//! its timeout (stuck) fails at once, without starting another thread. At most [`MAX_STUCK`] reads are
//! outstanding per reader: a hung mount costs a bounded number of idle threads, never an
//! unbounded number, and never a hang.

use std::collections::HashMap;
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
    #[error("{path} is still being read by an earlier attempt that has not finished (a FIFO or a hung mount?)")]
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

/// The paths being read, each with when its read started and a receiver that wakes when its
/// reading thread ends.
type Outstanding =
    Arc<Mutex<HashMap<PathBuf, (tokio::time::Instant, tokio::sync::watch::Receiver<()>)>>>;

/// Runs file-system work on detached threads, each bounded by a timeout. Cheap to clone; clones
/// share the set of outstanding reads.
#[derive(Clone, Debug)]
pub struct FileReader {
    timeout: Duration,
    outstanding: Outstanding,
}

impl Default for FileReader {
    fn default() -> Self {
        Self::new(DEFAULT_TIMEOUT)
    }
}

/// Unmarks a path when its thread ends, even by a panic; then (its sender dropped) wakes the
/// reads that wait for it.
struct Marked {
    set: Outstanding,
    path: PathBuf,
    _ended: tokio::sync::watch::Sender<()>,
}

impl Drop for Marked {
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
            outstanding: Arc::new(Mutex::new(HashMap::new())),
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
        let started = tokio::time::Instant::now();
        let deadline = started + self.timeout;
        let guard = loop {
            let mut ended = {
                let mut set = self
                    .outstanding
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                match set.get(path) {
                    // Past its own timeout: stuck (a FIFO, a hung mount). Fail at once.
                    Some((since, _)) if started.duration_since(*since) >= self.timeout => {
                        return Err(FileError::StillBlocked {
                            path: path.to_owned(),
                        })
                    }
                    Some((_, ended)) => ended.clone(),
                    None if set.len() >= MAX_STUCK => {
                        return Err(FileError::Busy {
                            path: path.to_owned(),
                        })
                    }
                    None => {
                        let (sender, receiver) = tokio::sync::watch::channel(());
                        set.insert(path.to_owned(), (tokio::time::Instant::now(), receiver));
                        break Marked {
                            set: Arc::clone(&self.outstanding),
                            path: path.to_owned(),
                            _ended: sender,
                        };
                    }
                }
            };
            // Another read of this path is under way: wait for its thread to end (its sender is
            // dropped then), within this read's own timeout, and try again.
            if tokio::time::timeout_at(deadline, ended.changed())
                .await
                .is_err()
            {
                return Err(FileError::StillBlocked {
                    path: path.to_owned(),
                });
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
        match tokio::time::timeout_at(deadline, rx).await {
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
            if !reader.outstanding.lock().unwrap().contains_key(&path) {
                unmarked = true;
                break;
            }
            tokio::task::yield_now().await;
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(unmarked, "the reading thread never finished");
    }

    /// Reads of one path that start together (lookups at start-up) all get the file: the later
    /// ones wait for the first instead of failing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_of_one_path_at_once_all_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, "{}").unwrap();
        let reader = FileReader::default();
        let reads = futures::future::join_all((0..16).map(|_| reader.read(&path, 10))).await;
        for read in reads {
            assert_eq!(read.unwrap().unwrap(), b"{}");
        }
    }

    /// A read that waits for a slow one of the same path gets what it reads after it.
    #[tokio::test]
    async fn a_read_waits_for_a_slow_read_of_the_same_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("slow");
        let reader = FileReader::new(Duration::from_secs(5));
        let slow = reader.run(&path, || std::thread::sleep(Duration::from_millis(200)));
        let second = async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            reader.read(&path, 10).await
        };
        let (slow, second) = tokio::join!(slow, second);
        slow.unwrap();
        assert!(second.unwrap().is_none(), "the path does not exist");
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
