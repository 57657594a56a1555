//! Why a host's requests are held back: the vocabulary the breaker and its error share (a leaf,
//! so that [`crate::error`] names it without importing the throttle).

/// Consecutive 5xx answers that open a host's breaker.
pub const FAILURES_TO_OPEN: u32 = 5;

/// Why requests to a host are held back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// It answered 429 Too Many Requests.
    TooManyRequests,
    /// It answered 5xx [`FAILURES_TO_OPEN`] times in a row.
    ServerErrors,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TooManyRequests => "too_many_requests",
            Self::ServerErrors => "server_errors",
        }
    }
}
