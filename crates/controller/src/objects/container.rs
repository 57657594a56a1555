//! What exec-format-error detection keeps of a container's status: its name and image, the
//! `imageID` the kubelet pulled, the restart count, the last and current termination
//! (exit code, reason, start and end, the first [`MAX_MESSAGE`] bytes of the message) and the
//! waiting reason and message. A pod record keeps these only for the containers whose status is
//! a signal ([`crate::detect::signal`]): a healthy pod keeps none.

use serde::Deserialize;

use super::meta::nullable;

/// The longest message kept (bytes, cut at a character boundary).
pub const MAX_MESSAGE: usize = 512;
/// Container statuses read per pod (the apiserver allows no more containers than this in
/// practice); the others are ignored.
pub(crate) const MAX_STATUSES: usize = 64;
/// Longest name, image, `imageID` or reason kept.
const MAX_FIELD: usize = 512;

/// How a container's run ended (`state.terminated` or `lastState.terminated`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Termination {
    /// `exitCode`.
    pub exit_code: i32,
    /// `reason` (`Error`, `StartError`, `OOMKilled`, ...).
    pub reason: String,
    /// `startedAt`, seconds since the epoch.
    pub started_at: Option<i64>,
    /// `finishedAt`, seconds since the epoch.
    pub finished_at: Option<i64>,
    /// The first [`MAX_MESSAGE`] bytes of `message`.
    pub message: String,
}

/// `state.waiting`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Waiting {
    /// `reason` (`CrashLoopBackOff`, `RunContainerError`, `CreateContainerError`, ...).
    pub reason: String,
    /// The first [`MAX_MESSAGE`] bytes of `message`.
    pub message: String,
}

/// A container's status, as detection reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerRun {
    /// The container's name.
    pub name: String,
    /// Its image as the pod spec writes it.
    pub image: String,
    /// `imageID`: what the kubelet pulled (`registry/repo@sha256:...` for a registry image).
    pub image_id: String,
    /// `restartCount`.
    pub restart_count: u32,
    /// The spec sets `command` or `args`: what the container printed is not only the image's
    /// own program's (or the runtime's), so its output is no evidence.
    pub program_overridden: bool,
    /// `lastState.terminated`: the run before the current one.
    pub last: Option<Termination>,
    /// `state.terminated`: the current run, ended.
    pub ended: Option<Termination>,
    /// `state.waiting`.
    pub waiting: Option<Waiting>,
}

impl ContainerRun {
    /// A status built in code (tests, benches): `restarts` restarts, the last run ended with
    /// `exit_code` after `seconds` seconds.
    pub fn crashed(
        name: &str,
        image: &str,
        image_id: &str,
        restarts: u32,
        exit_code: i32,
        seconds: i64,
    ) -> Self {
        Self {
            name: name.to_owned(),
            image: image.to_owned(),
            image_id: image_id.to_owned(),
            restart_count: restarts,
            program_overridden: false,
            last: Some(Termination {
                exit_code,
                reason: "Error".to_owned(),
                started_at: Some(1_700_000_000),
                finished_at: Some(1_700_000_000_i64.saturating_add(seconds)),
                message: String::new(),
            }),
            ended: None,
            waiting: None,
        }
    }
}

/// `text`, cut to `max` bytes at a character boundary.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end = end.saturating_sub(1);
    }
    text.get(..end).unwrap_or_default().to_owned()
}

/// Seconds since the epoch of an RFC 3339 time (`None` when it is not one).
fn epoch(text: &str) -> Option<i64> {
    k8s_openapi::chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|time| time.timestamp())
}

/// A container of the pod spec, as detection reads it.
#[derive(Default, Deserialize)]
pub(crate) struct RawSpecContainer {
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) image: String,
    /// Only whether they are set matters.
    #[serde(default, deserialize_with = "nullable")]
    command: Vec<serde::de::IgnoredAny>,
    #[serde(default, deserialize_with = "nullable")]
    args: Vec<serde::de::IgnoredAny>,
}

impl RawSpecContainer {
    pub(crate) fn overrides_program(&self) -> bool {
        !self.command.is_empty() || !self.args.is_empty()
    }
}

/// `status.containerStatuses[]` / `initContainerStatuses[]`.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RawStatus {
    #[serde(default, deserialize_with = "nullable")]
    name: String,
    #[serde(default, rename = "imageID", deserialize_with = "nullable")]
    image_id: String,
    #[serde(default, deserialize_with = "nullable")]
    restart_count: i64,
    #[serde(default, deserialize_with = "nullable")]
    state: RawState,
    #[serde(default, deserialize_with = "nullable")]
    last_state: RawState,
}

#[derive(Default, Deserialize)]
struct RawState {
    #[serde(default)]
    terminated: Option<RawTerminated>,
    #[serde(default)]
    waiting: Option<RawWaiting>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawTerminated {
    #[serde(default, deserialize_with = "nullable")]
    exit_code: i64,
    #[serde(default, deserialize_with = "nullable")]
    reason: String,
    #[serde(default, deserialize_with = "nullable")]
    message: String,
    #[serde(default, deserialize_with = "nullable")]
    started_at: String,
    #[serde(default, deserialize_with = "nullable")]
    finished_at: String,
}

#[derive(Default, Deserialize)]
struct RawWaiting {
    #[serde(default, deserialize_with = "nullable")]
    reason: String,
    #[serde(default, deserialize_with = "nullable")]
    message: String,
}

impl RawTerminated {
    fn trim(self) -> Termination {
        Termination {
            exit_code: i32::try_from(self.exit_code).unwrap_or(if self.exit_code < 0 {
                i32::MIN
            } else {
                i32::MAX
            }),
            reason: cut(&self.reason, MAX_FIELD),
            started_at: epoch(&self.started_at),
            finished_at: epoch(&self.finished_at),
            message: cut(&self.message, MAX_MESSAGE),
        }
    }
}

impl RawStatus {
    /// The status trimmed, with its spec container's image and overrides (`None`: not in the
    /// spec).
    pub(crate) fn trim(self, spec: Option<&RawSpecContainer>) -> ContainerRun {
        ContainerRun {
            name: cut(&self.name, MAX_FIELD),
            image: spec.map(|c| cut(&c.image, MAX_FIELD)).unwrap_or_default(),
            image_id: cut(&self.image_id, MAX_FIELD),
            restart_count: u32::try_from(self.restart_count.max(0)).unwrap_or(u32::MAX),
            program_overridden: spec.is_some_and(RawSpecContainer::overrides_program),
            last: self.last_state.terminated.map(RawTerminated::trim),
            ended: self.state.terminated.map(RawTerminated::trim),
            waiting: self.state.waiting.map(|w| Waiting {
                reason: cut(&w.reason, MAX_FIELD),
                message: cut(&w.message, MAX_MESSAGE),
            }),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}
