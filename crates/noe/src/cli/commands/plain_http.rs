//! A registry that answers plain HTTP to our TLS handshake: how its error is recognised, and
//! what to tell the user (`noe inspect`, `noe explain`, `noe report`).

/// What to do when `host` answered plain HTTP to our TLS handshake.
pub fn plain_http_hint(host: &str) -> String {
    format!(
        "{host} answered plain HTTP, not HTTPS: list it in --insecure-registries to reach it over HTTP"
    )
}

/// The TLS handshake got a plain-HTTP answer: rustls could not read the record's content
/// type. The rustls error reaches us inside boxed connector errors that `downcast_ref` cannot
/// see through, so its message (rustls's `InvalidMessage::InvalidContentType`) is what is
/// recognised, in the error or any of its causes.
pub fn plain_http(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if is_plain_http_text(&error.to_string()) {
            return true;
        }
        cause = error.source();
    }
    false
}

/// An error text saying the TLS peer answered with something that is not TLS (plain HTTP).
pub fn is_plain_http_text(text: &str) -> bool {
    text.contains("InvalidContentType")
}
