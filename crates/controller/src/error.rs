//! The crate's typed error.

/// What went wrong in a controller, an election or `untaint`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration cannot work (checked by [`crate::Config::validate`]).
    #[error("invalid controller configuration: {0}")]
    Config(String),
    /// A Kubernetes API call failed.
    #[error("{action} failed")]
    Kube {
        /// What was attempted, e.g. `patching node n1`.
        action: String,
        /// The client's error (boxed: it is large).
        #[source]
        source: Box<kube::Error>,
    },
    /// A write kept conflicting with other writers.
    #[error("{action}: still conflicting after {attempts} fresh reads")]
    Conflict {
        /// What was attempted.
        action: String,
        /// How many read-modify-write rounds were tried.
        attempts: u32,
    },
    /// This replica no longer leads: the write was not made.
    #[error("not the leader: {action} skipped")]
    NotLeader {
        /// The write that was skipped.
        action: String,
    },
    /// An object from the API lacks a field the controller needs.
    #[error("{0} lacks a field the controller needs")]
    Incomplete(String),
    /// The learned store could not be written (the whole chain of causes, on one line).
    #[error("learned store: {0}")]
    Learned(String),
}

impl Error {
    /// A bounded label for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Config(_) => "config",
            Self::Kube { .. } => "kube",
            Self::Conflict { .. } => "conflict",
            Self::NotLeader { .. } => "not_leader",
            Self::Incomplete(_) => "incomplete",
            Self::Learned(_) => "learned_store",
        }
    }

    /// The error and its sources on one line.
    pub(crate) fn chain(error: &dyn std::error::Error) -> String {
        let mut text = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        text
    }

    pub(crate) fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube {
            action: action.into(),
            source: Box::new(source),
        }
    }

    /// The HTTP status of an API error answer, if that is what it was.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Kube { source, .. } => match &**source {
                kube::Error::Api(status) => Some(status.code),
                _ => None,
            },
            _ => None,
        }
    }
}
