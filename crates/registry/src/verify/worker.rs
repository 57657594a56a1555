//! The reading of one platform's layers: the network side (async, on the runtime) takes each
//! layer's body chunk by chunk, counting the bytes against the budget, and hands the chunks
//! (copied, in pieces of at most [`PIECE`] bytes) through a channel of [`CHANNEL_CHUNKS`] to the
//! verification's task on a small pool of threads of its own ([`Pool`]), which hashes them,
//! decompresses them (gzip, zstd or none, told apart by their first bytes) into the tar reader
//! and feeds each entry to the [`Verification`]. No layer is buffered whole, nothing is written
//! to disk, and the CPU work never runs on the runtime's workers: however many verifications
//! run at once, they share the pool's few threads (in the server, of the idle scheduling
//! class: admissions first).

use std::io::{self, Write};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use noe_core::binary::tar::{Entry, TarError, TarReader};
use noe_core::binary::{Reason, Report, Verification};
use sha2::{Digest as _, Sha256, Sha512};
use tokio::sync::mpsc;

use super::{MAX_RATIO, RATIO_SLACK, ZSTD_WINDOW_LOG_MAX};

/// Pieces in flight between the network and the verification's task.
pub(crate) const CHANNEL_CHUNKS: usize = 2;
/// The most bytes one piece holds: what a layer's connection reads at once
/// ([`crate::client::blob::READ_BUFFER`]), so a chunk of it is one piece.
pub(crate) const PIECE: usize = crate::client::blob::READ_BUFFER;
/// Stack of a pool thread (the tar reader and the decoders keep their buffers on the heap).
const STACK: usize = 256 * 1024;
/// The most threads a pool has (fewer on a machine with fewer cores).
pub const MAX_POOL_THREADS: usize = 4;

/// The threads verifications decompress on, shared by every verification of the process: one
/// pool whose threads are of the idle scheduling class (the server's background
/// verifications), one of the normal class (`noe inspect --verify`).
struct Pool {
    idle: std::sync::OnceLock<io::Result<tokio::runtime::Runtime>>,
    normal: std::sync::OnceLock<io::Result<tokio::runtime::Runtime>>,
}

static POOL: Pool = Pool {
    idle: std::sync::OnceLock::new(),
    normal: std::sync::OnceLock::new(),
};

impl Pool {
    /// The pool's runtime (started on first use; kept for the process's life).
    fn handle(&'static self, idle: bool) -> io::Result<tokio::runtime::Handle> {
        let cell = if idle { &self.idle } else { &self.normal };
        match cell.get_or_init(|| start_pool(idle)) {
            Ok(runtime) => Ok(runtime.handle().clone()),
            Err(error) => Err(io::Error::new(error.kind(), error.to_string())),
        }
    }
}

fn start_pool(idle: bool) -> io::Result<tokio::runtime::Runtime> {
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, MAX_POOL_THREADS);
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .worker_threads(threads)
        .thread_name("noe-verify")
        .thread_stack_size(STACK);
    if idle {
        builder.on_thread_start(lower_priority);
    }
    builder.build()
}

enum ToWorker {
    /// A layer begins; its digest is checked if it is read to its end.
    Begin {
        digest: String,
    },
    Chunk(Bytes),
    /// The layer's data ended (`whole`: its body ended, not the budget).
    End {
        whole: bool,
    },
    /// Stop with this reason (a bound reached, a registry error).
    Fail {
        reason: Reason,
        evidence: String,
    },
}

enum FromWorker {
    Report(Report),
    /// The layer was read without a decision: the next one.
    Next,
}

/// What the network side learns of one layer.
pub(crate) enum Read {
    Decided(Report),
    /// Read to its end: the next layer is needed.
    Next,
}

/// Why the network side stopped a layer.
pub(crate) enum Stop {
    /// The budget of compressed bytes.
    Budget,
    /// The body is longer than the layer's descriptor states.
    Oversized,
    /// The body failed (a reset, a timeout).
    Body(String),
}

/// The handle of a verification's task.
pub(crate) struct Worker {
    tx: mpsc::Sender<ToWorker>,
    rx: mpsc::UnboundedReceiver<FromWorker>,
    decided: Option<Report>,
}

impl Worker {
    /// Starts the task of `verification` on the pool; `idle`: the pool of the idle scheduling
    /// class.
    pub fn spawn(verification: Verification, idle: bool) -> io::Result<Self> {
        let (tx, to_worker) = mpsc::channel(CHANNEL_CHUNKS);
        let (from_worker, rx) = mpsc::unbounded_channel();
        POOL.handle(idle)?.spawn(async move {
            run(verification, to_worker, &from_worker).await;
        });
        Ok(Self {
            tx,
            rx,
            decided: None,
        })
    }

    /// Streams one layer's `body` to the task, within `budget` compressed bytes left
    /// (counted into `read` and `progress`) and at most `size` bytes when its descriptor
    /// states one.
    pub async fn layer(
        &mut self,
        digest: &str,
        mut body: reqwest::Response,
        size: Option<u64>,
        budget: u64,
        read: &mut u64,
        progress: Option<&Arc<AtomicU64>>,
    ) -> Result<Read, Stop> {
        if let Some(report) = &self.decided {
            return Ok(Read::Decided(report.clone()));
        }
        let digest = digest.to_owned();
        if self.tx.send(ToWorker::Begin { digest }).await.is_err() {
            return Ok(Read::Decided(self.gone()));
        }
        let mut layer_bytes = 0u64;
        loop {
            let chunk = tokio::select! {
                biased;
                reply = self.rx.recv() => return Ok(self.reply(reply)),
                chunk = body.chunk() => chunk,
            };
            let chunk = match chunk {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(error) => {
                    return Err(Stop::Body(
                        crate::error::transport_detail(&error).to_owned(),
                    ))
                }
            };
            let len = chunk.len() as u64;
            layer_bytes = layer_bytes.saturating_add(len);
            *read = read.saturating_add(len);
            if let Some(progress) = progress {
                progress.fetch_add(len, Ordering::Relaxed);
            }
            if size.is_some_and(|size| layer_bytes > size) {
                return Err(Stop::Oversized);
            }
            if *read > budget {
                return Err(Stop::Budget);
            }
            // A chunk is a slice of the connection's read buffer: held in the channel, it would
            // keep that buffer alive and make the connection allocate another for its next
            // read. What waits is a copy, in pieces, and the chunk is dropped before the next.
            for piece in chunk.chunks(PIECE) {
                let piece = Bytes::copy_from_slice(piece);
                if self.tx.send(ToWorker::Chunk(piece)).await.is_err() {
                    return Ok(Read::Decided(self.gone()));
                }
            }
        }
        if self.tx.send(ToWorker::End { whole: true }).await.is_err() {
            return Ok(Read::Decided(self.gone()));
        }
        let reply = self.rx.recv().await;
        Ok(self.reply(reply))
    }

    /// Ends the verification with `reason` unless it has ended.
    pub async fn fail(&mut self, reason: Reason, evidence: String) -> Report {
        if let Some(report) = &self.decided {
            return report.clone();
        }
        if self
            .tx
            .send(ToWorker::Fail {
                reason,
                evidence: evidence.clone(),
            })
            .await
            .is_ok()
        {
            // The task answers at once unless the machine is busy (the idle-class pool
            // runs last): its report names the program looked for; else this one.
            let wait = std::time::Duration::from_secs(1);
            loop {
                match tokio::time::timeout(wait, self.rx.recv()).await {
                    Ok(Some(FromWorker::Report(report))) => {
                        self.decided = Some(report.clone());
                        return report;
                    }
                    Ok(Some(FromWorker::Next)) => continue,
                    Ok(None) | Err(_) => break,
                }
            }
        }
        let report = Report::unverifiable(reason, None, evidence);
        self.decided = Some(report.clone());
        report
    }

    fn reply(&mut self, reply: Option<FromWorker>) -> Read {
        match reply {
            Some(FromWorker::Report(report)) => {
                self.decided = Some(report.clone());
                Read::Decided(report)
            }
            Some(FromWorker::Next) => Read::Next,
            None => Read::Decided(self.gone()),
        }
    }

    fn gone(&mut self) -> Report {
        let report = Report::unverifiable(Reason::Budget, None, "the verification's task ended");
        self.decided = Some(report.clone());
        report
    }
}

/// Moves the calling thread to the idle scheduling class (`SCHED_IDLE`): it runs only when no
/// other thread wants the CPU. Where that is refused, it keeps its class.
fn lower_priority() {
    use thread_priority::{
        set_thread_priority_and_policy, thread_native_id, NormalThreadSchedulePolicy,
        ThreadPriority, ThreadSchedulePolicy,
    };
    let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
    if let Err(error) =
        set_thread_priority_and_policy(thread_native_id(), ThreadPriority::Min, idle)
    {
        tracing::debug!(?error, "verification thread keeps its scheduling class");
    }
}

/// The task: layers one after the other until a report, then it drains what is still sent.
async fn run(
    mut verification: Verification,
    mut rx: mpsc::Receiver<ToWorker>,
    tx: &mpsc::UnboundedSender<FromWorker>,
) {
    let mut totals = Totals::default();
    let mut decided = false;
    while let Some(message) = rx.recv().await {
        if decided {
            continue;
        }
        let reply = match message {
            ToWorker::Begin { digest } => {
                match read_layer(&mut verification, &mut rx, &digest, &mut totals).await {
                    Some(reply) => reply,
                    None => return,
                }
            }
            ToWorker::Fail { reason, evidence } => {
                FromWorker::Report(verification.fail(reason, evidence).clone())
            }
            ToWorker::Chunk(_) | ToWorker::End { .. } => continue,
        };
        decided = matches!(reply, FromWorker::Report(_));
        if tx.send(reply).is_err() {
            return;
        }
    }
}

#[derive(Default)]
struct Totals {
    compressed: u64,
    decompressed: u64,
}

/// Why the decompressed stream stopped.
enum Halt {
    /// The verification decided.
    Decided,
    /// More decompressed bytes than the ratio allows.
    Ratio,
    Tar(TarError),
}

/// Where decompressed bytes go: the tar reader, whose entries go to the verification.
struct Sink<'v> {
    verification: &'v mut Verification,
    reader: TarReader,
    decompressed: u64,
    allowed: u64,
    halt: Option<Halt>,
}

impl Write for Sink<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.halt.is_some() {
            return Err(io::Error::other("halted"));
        }
        self.decompressed = self.decompressed.saturating_add(buf.len() as u64);
        if self.decompressed > self.allowed {
            self.halt = Some(Halt::Ratio);
            return Err(io::Error::other("decompression ratio"));
        }
        let Self {
            verification,
            reader,
            ..
        } = self;
        let pushed = reader.push(
            buf,
            &mut |entry: &Entry<'_>| match verification.entry(entry) {
                Some(_) => ControlFlow::Break(()),
                None => ControlFlow::Continue(()),
            },
        );
        match pushed {
            Ok(ControlFlow::Continue(())) => Ok(buf.len()),
            Ok(ControlFlow::Break(())) => {
                self.halt = Some(Halt::Decided);
                Err(io::Error::other("decided"))
            }
            Err(error) => {
                self.halt = Some(Halt::Tar(error));
                Err(io::Error::other("tar"))
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A layer's decompression, chosen by its first bytes.
enum Decoder<'v> {
    Plain(Box<Sink<'v>>),
    Gzip(Box<flate2::write::MultiGzDecoder<Sink<'v>>>),
    Zstd(Box<zstd::stream::write::Decoder<'static, Sink<'v>>>),
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// Bytes that tell the compression apart.
const MAGIC_LEN: usize = 4;

impl<'v> Decoder<'v> {
    fn new(first: &[u8], sink: Sink<'v>) -> io::Result<Self> {
        if first.starts_with(&GZIP_MAGIC) {
            Ok(Self::Gzip(Box::new(flate2::write::MultiGzDecoder::new(
                sink,
            ))))
        } else if first.starts_with(&ZSTD_MAGIC) {
            let mut decoder = zstd::stream::write::Decoder::new(sink)?;
            decoder.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
            Ok(Self::Zstd(Box::new(decoder)))
        } else {
            Ok(Self::Plain(Box::new(sink)))
        }
    }

    fn sink(&mut self) -> &mut Sink<'v> {
        match self {
            Self::Plain(sink) => sink,
            Self::Gzip(decoder) => decoder.get_mut(),
            Self::Zstd(decoder) => decoder.get_mut(),
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Self::Plain(sink) => sink.write_all(bytes),
            Self::Gzip(decoder) => decoder.write_all(bytes),
            Self::Zstd(decoder) => decoder.write_all(bytes),
        }
    }

    /// The compressed stream ended: what the decoder still holds goes out, and a gzip stream
    /// must end with its trailer.
    fn finish(&mut self) -> io::Result<()> {
        match self {
            Self::Plain(_) => Ok(()),
            Self::Gzip(decoder) => decoder.try_finish(),
            Self::Zstd(decoder) => decoder.flush(),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Self::Plain(_) => "tar",
            Self::Gzip(_) => "gzip",
            Self::Zstd(_) => "zstd",
        }
    }
}

/// The layer's digest, computed as it streams.
enum Hasher {
    Sha256(Sha256),
    Sha512(Sha512),
}

impl Hasher {
    fn for_digest(digest: &str) -> Self {
        if digest.starts_with("sha512:") {
            Self::Sha512(Sha512::new())
        } else {
            Self::Sha256(Sha256::new())
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            Self::Sha256(h) => h.update(bytes),
            Self::Sha512(h) => h.update(bytes),
        }
    }

    fn finish(self) -> String {
        match self {
            Self::Sha256(h) => format!("sha256:{}", hex::encode(h.finalize())),
            Self::Sha512(h) => format!("sha512:{}", hex::encode(h.finalize())),
        }
    }
}

/// Reads one layer's chunks until its end (or a decision, or a failure): the reply, or `None`
/// when the network side has gone.
async fn read_layer(
    verification: &mut Verification,
    rx: &mut mpsc::Receiver<ToWorker>,
    digest: &str,
    totals: &mut Totals,
) -> Option<FromWorker> {
    verification.begin_layer();
    let mut hasher = Hasher::for_digest(digest);
    let mut sink = Some(Sink {
        verification,
        reader: TarReader::new(),
        decompressed: totals.decompressed,
        allowed: 0,
        halt: None,
    });
    let mut first: Vec<u8> = Vec::with_capacity(MAGIC_LEN);
    let mut decoder: Option<Decoder<'_>> = None;
    loop {
        let (chunk, whole) = match rx.recv().await? {
            ToWorker::Chunk(chunk) => (chunk, None),
            ToWorker::End { whole } => (Bytes::new(), Some(whole)),
            ToWorker::Fail { reason, evidence } => {
                let verification = match (decoder.as_mut(), sink.as_mut()) {
                    (Some(decoder), _) => &mut *decoder.sink().verification,
                    (None, Some(sink)) => &mut *sink.verification,
                    (None, None) => return None,
                };
                return Some(FromWorker::Report(
                    verification.fail(reason, evidence).clone(),
                ));
            }
            ToWorker::Begin { .. } => continue,
        };
        hasher.update(&chunk);
        totals.compressed = totals.compressed.saturating_add(chunk.len() as u64);
        let allowed = totals
            .compressed
            .saturating_mul(MAX_RATIO)
            .saturating_add(RATIO_SLACK);
        let mut input: &[u8] = &chunk;
        if decoder.is_none() {
            let take = (MAGIC_LEN - first.len()).min(input.len());
            first.extend_from_slice(&input[..take]);
            input = &input[take..];
            if first.len() < MAGIC_LEN && whole.is_none() {
                continue;
            }
            let mut made = match Decoder::new(&first, sink.take()?) {
                Ok(made) => made,
                Err(error) => {
                    return Some(FromWorker::Report(Report::unverifiable(
                        Reason::RegistryError,
                        None,
                        format!("the zstd decoder could not start ({error})"),
                    )))
                }
            };
            made.sink().allowed = allowed;
            let written = made.write_all(&first);
            let active = decoder.insert(made);
            if let Err(error) = written {
                return Some(halted(active, &error));
            }
        }
        let active = decoder.as_mut()?;
        active.sink().allowed = allowed;
        if !input.is_empty() {
            if let Err(error) = active.write_all(input) {
                return Some(halted(active, &error));
            }
        }
        if let Some(whole) = whole {
            if let Err(error) = active.finish() {
                return Some(halted(active, &error));
            }
            let sink = active.sink();
            totals.decompressed = sink.decompressed;
            if let Err(error) = sink.reader.finish() {
                let report = tar_failure(sink.verification, &error);
                return Some(FromWorker::Report(report));
            }
            if whole {
                let actual = std::mem::replace(&mut hasher, Hasher::for_digest(digest)).finish();
                if actual != digest {
                    let report = sink.verification.fail(
                        Reason::RegistryError,
                        format!("layer {digest} has digest {actual}"),
                    );
                    return Some(FromWorker::Report(report.clone()));
                }
            }
            return Some(match sink.verification.end_layer() {
                Some(report) => FromWorker::Report(report.clone()),
                None => FromWorker::Next,
            });
        }
    }
}

/// The reply when writing into `decoder` failed with `error`.
fn halted(decoder: &mut Decoder<'_>, error: &io::Error) -> FromWorker {
    let name = decoder.name();
    let sink = decoder.sink();
    let report = match sink.halt.take() {
        Some(Halt::Decided) => sink
            .verification
            .outcome()
            .cloned()
            .unwrap_or_else(|| Report::unverifiable(Reason::Budget, None, "")),
        Some(Halt::Ratio) => sink
            .verification
            .fail(
                Reason::Budget,
                format!("a layer decompresses to more than {MAX_RATIO} times its size"),
            )
            .clone(),
        Some(Halt::Tar(error)) => tar_failure(sink.verification, &error),
        // The decoder's own error: corrupt data, or a zstd window beyond the bound.
        None => {
            let text = error.to_string();
            let (reason, evidence) = if text.contains("memory") || text.contains("indow") {
                (
                    Reason::Budget,
                    format!(
                        "a zstd layer needs a window larger than {} MiB",
                        1 << (ZSTD_WINDOW_LOG_MAX - 20)
                    ),
                )
            } else {
                (
                    Reason::RegistryError,
                    format!("a layer is not valid {name} ({text})"),
                )
            };
            sink.verification.fail(reason, evidence).clone()
        }
    };
    FromWorker::Report(report)
}

fn tar_failure(verification: &mut Verification, error: &TarError) -> Report {
    let reason = match error {
        TarError::TooLong | TarError::PaxTooLarge => Reason::Budget,
        TarError::Malformed(_) | TarError::Truncated => Reason::RegistryError,
    };
    verification.fail(reason, error.to_string()).clone()
}
