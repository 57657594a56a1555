//! The one error type of this crate.
//!
//! It is `Clone` so a cached failure can be handed to every caller waiting on the same lookup.
//! Messages name the reference, the registry and the HTTP status; they never carry a secret.

use std::net::IpAddr;
use std::sync::Arc;

/// Why an image could not be resolved.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The image reference does not follow the distribution reference grammar.
    #[error(
        "invalid image reference {}: {}",
        quoted(reference),
        controls_escaped(reason)
    )]
    InvalidReference { reference: String, reason: String },

    /// The resolver configuration is unusable (bad CA bundle, bad proxy rule, ...).
    #[error("invalid registry configuration: {reason}")]
    Config { reason: String },

    /// The host resolves to an address refused by the address guard ([`crate::ssrf`]).
    #[error("refusing to contact {host} at {address}: loopback, unspecified, link-local, metadata and this pod's own addresses are not registries unless an allowed CIDR covers them")]
    Blocked { host: String, address: IpAddr },

    /// An HTTP(S) proxy is configured for this request and the host does not resolve here, so
    /// its addresses cannot be checked before the proxy connects to them.
    #[error("refusing to send {host} to the HTTP proxy: it does not resolve here, so its addresses cannot be checked (list it in NO_PROXY if it is reached directly)")]
    Unresolvable { host: String },

    /// Every credential (and anonymous access, when allowed) was refused.
    #[error("{reference}: access denied by {registry} (HTTP {status})")]
    Unauthorized {
        reference: String,
        registry: String,
        status: u16,
    },

    /// A registry refused a credential, and again after its source renewed it, or the renewal
    /// failed: `reason` starts with the provider and the step (`ecr: ...`).
    #[error("{reason}")]
    Renewal {
        reference: String,
        registry: String,
        /// `ecr`, `gcp`, `acr`, `credential-provider`.
        provider: &'static str,
        reason: String,
    },

    /// The registry needs credentials and none may be tried (private registry, no candidates).
    #[error("{reference}: no credentials for private registry {registry}")]
    NoCredentials { reference: String, registry: String },

    /// The token endpoint refused or failed.
    #[error("{reference}: token request to {realm} for {registry} failed (HTTP {status})")]
    Token {
        reference: String,
        registry: String,
        realm: String,
        status: u16,
    },

    /// The manifest or blob does not exist.
    #[error("{reference}: not found on {registry}")]
    NotFound { reference: String, registry: String },

    /// An HTTP status we cannot use.
    #[error("{reference}: unexpected HTTP {status} from {registry}")]
    Status {
        reference: String,
        registry: String,
        status: u16,
    },

    /// No answer within `--registry-timeout`.
    #[error("{reference}: {registry} did not answer within {timeout_ms} ms")]
    Timeout {
        reference: String,
        registry: String,
        timeout_ms: u64,
    },

    /// Connection, TLS or protocol failure. The message says what it was in fixed words only
    /// (`: unreachable`, `: TLS: ...`); `cause` is not a `source` (callers' messages never carry
    /// the connection's own words: they would tell a refused port from a filtered one), it goes
    /// to the debug log.
    #[error("{reference}: cannot reach {registry}{detail}")]
    Transport {
        reference: String,
        registry: String,
        /// What the failure was when known (`: unreachable`, `: TLS: ...`), else empty; fixed
        /// phrases only.
        detail: &'static str,
        cause: Arc<dyn std::error::Error + Send + Sync>,
    },

    /// The body is larger than the cap.
    #[error("{reference}: response from {registry} exceeds {limit} bytes")]
    TooLarge {
        reference: String,
        registry: String,
        limit: usize,
    },

    /// The body does not hash to the digest it was fetched by.
    #[error(
        "{reference}: content from {registry} does not match digest {expected} (got {actual})"
    )]
    DigestMismatch {
        reference: String,
        registry: String,
        expected: String,
        actual: String,
    },

    /// The manifest, index or config cannot be understood.
    #[error("{reference}: invalid {what} from {registry}: {}", escaped(reason))]
    InvalidContent {
        reference: String,
        registry: String,
        what: &'static str,
        reason: String,
    },

    /// A media type this resolver does not handle (schema1, artifacts, ...).
    #[error(
        "{reference}: unsupported media type {} from {registry}",
        quoted(media_type)
    )]
    UnsupportedMediaType {
        reference: String,
        registry: String,
        media_type: String,
    },

    /// Index nesting beyond the bound.
    #[error("{reference}: image indexes nested deeper than {limit} levels on {registry}")]
    TooDeep {
        reference: String,
        registry: String,
        limit: usize,
    },

    /// A host the registry redirected to answered 401: the registry's credentials are not
    /// sent there, and its challenge is not taken as the registry's.
    #[error("{reference}: {registry} redirected to {host}, which asks for credentials (HTTP 401); credentials for {registry} are never sent there")]
    RedirectedChallenge {
        reference: String,
        registry: String,
        host: String,
    },

    /// An HTTPS registry redirected to plain HTTP on a host that is not an insecure registry.
    #[error("{reference}: {registry} redirected from HTTPS to plain HTTP at {target}, which is not an insecure registry")]
    InsecureRedirect {
        reference: String,
        registry: String,
        target: String,
    },

    /// The lookup needs more requests than one image may cost (nested or platform-less index
    /// entries, redirects, retries and token requests all count).
    #[error("{reference}: resolving it on {registry} needs more than {limit} requests")]
    RequestBudget {
        reference: String,
        registry: String,
        limit: usize,
    },

    /// The image declares no usable platform.
    #[error("{reference}: no platform found in the manifest from {registry}")]
    NoPlatforms { reference: String, registry: String },

    /// The registry's circuit breaker is open: it answered 429 (or 5xx several times in a row)
    /// and is not asked again until its `Retry-After` has passed.
    #[error("{reference}: not asking {registry} for {retry_in_secs} s more: {}", held_back(*cause))]
    CircuitOpen {
        reference: String,
        registry: String,
        cause: crate::throttle::cause::Cause,
        retry_in_secs: u64,
    },

    /// The client-side rate limit of requests to this registry would delay the request past
    /// its timeout.
    #[error("{reference}: the client-side rate limit of requests to {registry} is reached")]
    RateLimited { reference: String, registry: String },
}

/// Why a registry is held back, for [`Error::CircuitOpen`].
fn held_back(cause: crate::throttle::cause::Cause) -> String {
    match cause {
        crate::throttle::cause::Cause::TooManyRequests => {
            "it answered 429 Too Many Requests (rate limited), honouring its Retry-After".to_owned()
        }
        crate::throttle::cause::Cause::ServerErrors => format!(
            "it answered 5xx {} times in a row",
            crate::throttle::cause::FAILURES_TO_OPEN
        ),
    }
}

/// Longest text from the wire or the user shown in a message.
const SHOWN_MAX: usize = 160;

/// `text` with control characters (and quotes) escaped, cut to 160 characters: what a registry
/// or a pod author wrote never reaches a log line or a terminal raw or unbounded.
fn escaped(text: &str) -> String {
    let mut shown: String = text
        .chars()
        .take(SHOWN_MAX)
        .flat_map(char::escape_debug)
        .collect();
    if text.chars().nth(SHOWN_MAX).is_some() {
        shown.push_str("...");
    }
    shown
}

/// `text` bounded like [`escaped`], only its control characters escaped: for a reason that
/// already quotes the parts of the input it names (escaping those again doubles every `\"`).
fn controls_escaped(text: &str) -> String {
    let mut shown: String = text
        .chars()
        .take(SHOWN_MAX)
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_debug().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect();
    if text.chars().nth(SHOWN_MAX).is_some() {
        shown.push_str("...");
    }
    shown
}

/// [`escaped`], in double quotes.
fn quoted(text: &str) -> String {
    format!("\"{}\"", escaped(text))
}

/// [`Error::Transport`] detail: the connection could not be made (refused, timed out, no route,
/// no such name: which one is for the debug log only).
pub(crate) const UNREACHABLE: &str = ": unreachable";

/// [`Error::Transport`] detail: the registry answered our TLS handshake with something that is
/// not TLS, as plain HTTP (rustls's `InvalidContentType`, the words `noe inspect` and `explain`
/// recognise to name `--insecure-registries`).
pub(crate) const PLAIN_HTTP: &str =
    ": TLS: the registry answered with something that is not TLS (InvalidContentType)";

/// `error` and its sources on one line, for the debug log.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// [`Error::Transport`] detail: the registry asked for a TLS client certificate and had none.
pub(crate) const CLIENT_CERT_REQUIRED: &str =
    ": TLS: the registry requires a client certificate (hosts.toml client, certs.d *.cert/*.key)";
/// [`Error::Transport`] detail: the registry refused the TLS client certificate presented.
pub(crate) const CLIENT_CERT_REFUSED: &str = ": TLS: the registry refused our client certificate";

/// What a transport failure was, when the cause says it plainly (`: TLS: ...`); empty otherwise.
/// Bounded: fixed phrases only, never the peer's text.
pub(crate) fn transport_detail(source: &(dyn std::error::Error + 'static)) -> &'static str {
    use rustls::AlertDescription as Alert;
    let alert_detail = |alert: Alert| match alert {
        Alert::CertificateRequired | Alert::HandshakeFailure => Some(CLIENT_CERT_REQUIRED),
        Alert::BadCertificate
        | Alert::UnknownCA
        | Alert::CertificateUnknown
        | Alert::CertificateExpired
        | Alert::CertificateRevoked
        | Alert::AccessDenied => Some(CLIENT_CERT_REFUSED),
        _ => None,
    };
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(source);
    while let Some(error) = cause {
        let inner = error
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map(|inner| inner as &(dyn std::error::Error + 'static));
        for candidate in [Some(error), inner].into_iter().flatten() {
            match candidate.downcast_ref::<rustls::Error>() {
                Some(rustls::Error::AlertReceived(alert)) => {
                    return alert_detail(*alert).unwrap_or(": TLS handshake failed")
                }
                Some(rustls::Error::InvalidCertificate(_)) => {
                    return ": TLS: the registry's certificate is not trusted (add its CA)"
                }
                Some(_) => return ": TLS handshake failed",
                None => {}
            }
            // An alert after the handshake reaches us as rustls's message in an io::Error.
            let text = candidate.to_string();
            if text.contains("InvalidContentType") {
                return PLAIN_HTTP;
            }
            for alert in [
                Alert::CertificateRequired,
                Alert::HandshakeFailure,
                Alert::BadCertificate,
                Alert::UnknownCA,
                Alert::CertificateUnknown,
                Alert::CertificateExpired,
                Alert::CertificateRevoked,
                Alert::AccessDenied,
            ] {
                if text == rustls::Error::AlertReceived(alert).to_string() {
                    return alert_detail(alert).unwrap_or(": TLS handshake failed");
                }
            }
        }
        cause = error.source();
    }
    ""
}

impl Error {
    /// A bounded label value for `noe_registry_errors_total{errors}`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvalidReference { .. } => "invalid_reference",
            Self::Config { .. } => "config",
            Self::Blocked { .. } => "blocked",
            Self::Unresolvable { .. } => "unresolvable",
            Self::Unauthorized { .. } => "unauthorized",
            Self::Renewal { .. } => "renewal",
            Self::NoCredentials { .. } => "no_credentials",
            Self::Token { .. } => "token",
            Self::NotFound { .. } => "not_found",
            Self::Status { .. } => "http_status",
            Self::Timeout { .. } => "timeout",
            Self::Transport { .. } => "transport",
            Self::TooLarge { .. } => "too_large",
            Self::DigestMismatch { .. } => "digest_mismatch",
            Self::InvalidContent { .. } => "invalid_content",
            Self::UnsupportedMediaType { .. } => "unsupported_media_type",
            Self::TooDeep { .. } => "too_deep",
            Self::NoPlatforms { .. } => "no_platforms",
            Self::RedirectedChallenge { .. } => "redirected_challenge",
            Self::InsecureRedirect { .. } => "insecure_redirect",
            Self::RequestBudget { .. } => "request_budget",
            Self::CircuitOpen { .. } => "circuit_open",
            Self::RateLimited { .. } => "rate_limited",
        }
    }

    /// The registry host the error is about (after proxies, or the mirror that failed); `None`
    /// for an invalid reference or configuration. For a metric label, use
    /// [`crate::Resolver::error_label`], which bounds it.
    pub fn registry(&self) -> Option<&str> {
        match self {
            Self::InvalidReference { .. } | Self::Config { .. } => None,
            Self::Blocked { host, .. } | Self::Unresolvable { host } => Some(host),
            Self::Unauthorized { registry, .. }
            | Self::Renewal { registry, .. }
            | Self::NoCredentials { registry, .. }
            | Self::Token { registry, .. }
            | Self::NotFound { registry, .. }
            | Self::Status { registry, .. }
            | Self::Timeout { registry, .. }
            | Self::Transport { registry, .. }
            | Self::TooLarge { registry, .. }
            | Self::DigestMismatch { registry, .. }
            | Self::InvalidContent { registry, .. }
            | Self::UnsupportedMediaType { registry, .. }
            | Self::TooDeep { registry, .. }
            | Self::NoPlatforms { registry, .. }
            | Self::RedirectedChallenge { registry, .. }
            | Self::InsecureRedirect { registry, .. }
            | Self::RequestBudget { registry, .. }
            | Self::CircuitOpen { registry, .. }
            | Self::RateLimited { registry, .. } => Some(registry),
        }
    }

    /// True when another credential might succeed (401/403 from the registry or its token realm).
    pub fn is_auth(&self) -> bool {
        match self {
            Self::Unauthorized { .. } => true,
            Self::Token { status, .. } => matches!(status, 401 | 403),
            _ => false,
        }
    }

    pub(crate) fn invalid_reference(reference: &str, reason: impl Into<String>) -> Self {
        Self::InvalidReference {
            reference: reference.to_owned(),
            reason: reason.into(),
        }
    }
}

/// Longest host quoted in a message (a DNS name has at most 253 bytes, plus `:port`).
const MAX_HOST_IN_MESSAGE: usize = 260;

/// A host from a URL the registry chose (a redirect target), cut for a message.
pub(crate) fn host_for_message(host: &str) -> String {
    bounded(host, MAX_HOST_IN_MESSAGE).into_owned()
}

/// `text` cut to at most `max` bytes (on a character boundary, `…` appended when cut), for
/// registry-supplied strings quoted in messages: a hostile registry controls their length.
pub fn bounded(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}…", &text[..end]))
}

#[cfg(test)]
mod tests;
