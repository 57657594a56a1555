//! The pure reading of a container's status and of its previous log: is it an exec format
//! error (a detection), a container that crashed too fast to tell without its log (a suspect),
//! or nothing. Table-tested in `crates/controller/tests/controller/tables.rs`.

use crate::objects::{ContainerRun, Termination};

/// A run that ended non-zero within this many seconds of its start is a suspect.
pub const SUSPECT_WITHIN_SECONDS: i64 = 10;
/// The longest evidence line kept from a message or a log (bytes).
pub const MAX_EVIDENCE_LINE: usize = 256;

/// The reasons the kubelet sets when the runtime could not start the container's process: their
/// message is the runtime's, never the program's.
const RUNTIME_REASONS: [&str; 4] = [
    "StartError",
    "RunContainerError",
    "CreateContainerError",
    "ContainerCannotRun",
];

/// What the runtimes and shells write when the kernel refuses a binary of another machine
/// (`execve` answering `ENOEXEC`): runc `exec /app: exec format error` (older runc
/// `standard_init_linux.go:228: exec user process caused: exec format error`), busybox and musl
/// `Exec format error`, bash `cannot execute binary file`. Compared case-insensitively.
const NEEDLES: [&[u8]; 2] = [b"exec format error", b"cannot execute binary file"];

/// Who wrote the text that says exec format error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The kubelet or the runtime (a waiting message, or a termination whose reason says the
    /// process never started): the program never ran, it cannot have written it.
    Runtime,
    /// The container's own output (a termination message, or its log): the runtime writes the
    /// error there too, but so could the program.
    Output,
}

/// What a container's status says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// Its status says exec format error.
    Detection(Origin),
    /// It restarted and its last run ended non-zero within [`SUSPECT_WITHIN_SECONDS`]: its
    /// previous log may say why.
    Suspect,
    /// Nothing to look at.
    Nothing,
}

/// Whether `text` says exec format error (case-insensitive, any bytes).
pub fn says_exec_format_error(text: &[u8]) -> bool {
    first_match(text).is_some()
}

/// Where the first needle starts in `text`.
fn first_match(text: &[u8]) -> Option<usize> {
    NEEDLES
        .iter()
        .filter_map(|needle| {
            text.windows(needle.len())
                .position(|window| window.eq_ignore_ascii_case(needle))
        })
        .min()
}

/// The line of `text` that says exec format error, for people: lossy UTF-8, control characters
/// replaced by spaces, trimmed, at most [`MAX_EVIDENCE_LINE`] bytes.
pub fn evidence_line(text: &[u8]) -> Option<String> {
    let at = first_match(text)?;
    let start = text
        .get(..at)
        .and_then(|before| before.iter().rposition(|b| *b == b'\n'))
        .map_or(0, |newline| newline.saturating_add(1));
    let end = text
        .get(at..)
        .and_then(|after| after.iter().position(|b| *b == b'\n'))
        .map_or(text.len(), |newline| at.saturating_add(newline));
    let line = String::from_utf8_lossy(text.get(start..end).unwrap_or_default());
    let clean: String = line
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    Some(crate::objects::cut(clean.trim(), MAX_EVIDENCE_LINE))
}

/// The status text that says exec format error, and who wrote it.
pub fn status_evidence(run: &ContainerRun) -> Option<(Origin, &str)> {
    if let Some(waiting) = &run.waiting {
        if says_exec_format_error(waiting.message.as_bytes()) {
            // Waiting messages are the kubelet's.
            return Some((Origin::Runtime, &waiting.message));
        }
    }
    for ended in [&run.ended, &run.last].into_iter().flatten() {
        if says_exec_format_error(ended.message.as_bytes()) {
            let origin = if RUNTIME_REASONS.contains(&ended.reason.as_str()) {
                Origin::Runtime
            } else {
                Origin::Output
            };
            return Some((origin, &ended.message));
        }
    }
    None
}

/// Whether a run ended non-zero within [`SUSPECT_WITHIN_SECONDS`] of its start.
fn crashed_fast(run: &Termination) -> bool {
    let (Some(started), Some(finished)) = (run.started_at, run.finished_at) else {
        return false;
    };
    let lasted = finished.saturating_sub(started);
    run.exit_code != 0 && (0..=SUSPECT_WITHIN_SECONDS).contains(&lasted)
}

/// What `run`'s status says.
pub fn signal(run: &ContainerRun) -> Signal {
    if let Some((origin, _)) = status_evidence(run) {
        return Signal::Detection(origin);
    }
    match &run.last {
        Some(last) if run.restart_count > 0 && crashed_fast(last) => Signal::Suspect,
        _ => Signal::Nothing,
    }
}
