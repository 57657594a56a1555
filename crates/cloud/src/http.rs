//! The edge: one request with a timeout and a byte bound on its answer, token files read with a
//! bound, and bounded, printable excerpts of error bodies.

use std::path::Path;
use std::time::{Duration, SystemTime};

use tokio::io::AsyncReadExt as _;

use crate::{Error, Provider, Step};

/// The largest answer read from any identity service (their answers are a few KiB).
pub(crate) const MAX_BODY: usize = 64 * 1024;

/// The largest projected token file read (a JWT of a few KiB).
const MAX_TOKEN_FILE: u64 = 64 * 1024;

/// How long reading a token file may take (a hung mount must not hang a refresh).
const TOKEN_FILE_TIMEOUT: Duration = Duration::from_secs(5);

/// How much of an error body an error message carries.
const EXCERPT_CHARS: usize = 200;

/// The longest lifetime believed from an access token's `expires_in` (the providers' tokens
/// last an hour).
pub(crate) const MAX_EXPIRES_IN: u64 = 24 * 3600;

/// An OAuth2 access-token answer (Entra's, the GCP metadata server's).
#[derive(serde::Deserialize)]
struct AccessTokenAnswer {
    access_token: String,
    expires_in: Option<u64>,
}

/// The token of an OAuth2 access-token answer and when it expires (`expires_in`, 300 s when
/// absent, at most [`MAX_EXPIRES_IN`]); refused when it is empty or longer than `max_bytes`.
pub(crate) fn access_token(
    body: &[u8],
    now: SystemTime,
    max_bytes: usize,
) -> Result<(String, SystemTime), String> {
    let answer: AccessTokenAnswer =
        serde_json::from_slice(body).map_err(|e| format!("not the token JSON: {e}"))?;
    if answer.access_token.is_empty() || answer.access_token.len() > max_bytes {
        return Err("access_token empty or too long".into());
    }
    let lifetime = answer.expires_in.unwrap_or(300).min(MAX_EXPIRES_IN);
    Ok((answer.access_token, now + Duration::from_secs(lifetime)))
}

/// An answer: status and body (bounded).
pub(crate) struct Answer {
    pub status: reqwest::StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

/// Send `request` under `timeout` (connection to last body byte) and read at most
/// [`MAX_BODY`] bytes of its answer.
pub(crate) async fn send(
    provider: Provider,
    step: Step,
    request: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<Answer, Error> {
    let transport = |reason: String| Error::Transport {
        provider,
        step,
        reason,
    };
    let exchange = async {
        let mut response = request.send().await.map_err(|e| transport(describe(&e)))?;
        let status = response.status();
        let headers = std::mem::take(response.headers_mut());
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| transport(describe(&e)))?
        {
            if body.len().saturating_add(chunk.len()) > MAX_BODY {
                return Err(transport(format!(
                    "answer larger than {} KiB",
                    MAX_BODY / 1024
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Answer {
            status,
            headers,
            body,
        })
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| transport(format!("no answer within {timeout:?}")))?
}

/// The error for a non-success answer, with a bounded excerpt of `summary` (a service-specific
/// summary of the body) or of the body, in which each secret of `sent` (what the request carried:
/// a service may echo it back) is `<redacted>`.
/// What `answer` holds, read by `parse` when its status is a success; otherwise a status error
/// with the provider's summary of its body (`summary`, when the body has a known shape). The
/// secrets the request carried (`sent`) reach neither error.
pub(crate) fn read<T>(
    (provider, step): (Provider, Step),
    answer: &Answer,
    sent: &[&str],
    summary: fn(&[u8]) -> Option<String>,
    parse: impl FnOnce(&[u8]) -> Result<T, String>,
) -> Result<T, Error> {
    if !answer.status.is_success() {
        return Err(status_error(
            provider,
            step,
            answer,
            summary(&answer.body),
            sent,
        ));
    }
    parse(&answer.body).map_err(|reason| malformed(provider, step, &reason, sent))
}

/// For [`read`]: an error body of no known shape, quoted as it is.
pub(crate) fn unknown_shape(_: &[u8]) -> Option<String> {
    None
}

pub(crate) fn status_error(
    provider: Provider,
    step: Step,
    answer: &Answer,
    summary: Option<String>,
    sent: &[&str],
) -> Error {
    let text = summary.unwrap_or_else(|| String::from_utf8_lossy(&answer.body).into_owned());
    Error::Status {
        provider,
        step,
        status: answer.status.as_u16(),
        excerpt: excerpt(redact(&text, sent).as_bytes()),
    }
}

/// `text` with every secret of `sent` replaced by `<redacted>` (secrets shorter than 8 bytes are
/// not looked for: they would match ordinary words).
pub(crate) fn redact(text: &str, sent: &[&str]) -> String {
    let mut text = text.to_owned();
    for secret in sent.iter().filter(|s| s.len() >= 8) {
        if text.contains(secret) {
            text = text.replace(secret, "<redacted>");
        }
    }
    text
}

/// The error for an answer that is not what the service sends: `reason`, with each secret of
/// `sent` `<redacted>` (a parser may quote the value it choked on) and bounded.
pub(crate) fn malformed(provider: Provider, step: Step, reason: &str, sent: &[&str]) -> Error {
    Error::malformed(provider, step, excerpt(redact(reason, sent).as_bytes()))
}

/// A printable, bounded excerpt of a body: control characters become spaces, whitespace runs
/// collapse, at most [`EXCERPT_CHARS`] characters.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(4 * EXCERPT_CHARS)]);
    let mut out = String::new();
    let mut count = 0usize;
    for word in text.split(|c: char| c.is_whitespace() || c.is_control()) {
        if word.is_empty() {
            continue;
        }
        if count > 0 {
            out.push(' ');
        }
        for c in word.chars() {
            if count >= EXCERPT_CHARS {
                out.push_str("...");
                return out;
            }
            out.push(c);
            count += 1;
        }
        count += 1;
    }
    if out.is_empty() {
        out.push_str("(empty body)");
    }
    out
}

/// A reqwest error without its URL, with its sources (the connection error says why).
fn describe(error: &reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "cannot connect"
    } else if error.is_body() || error.is_decode() {
        "cannot read the answer"
    } else {
        "request failed"
    };
    let mut reason = kind.to_owned();
    let mut source = std::error::Error::source(error);
    let mut depth = 0;
    while let Some(s) = source {
        if depth >= 4 {
            break;
        }
        reason.push_str(": ");
        reason.push_str(
            &s.to_string()
                .chars()
                .take(EXCERPT_CHARS)
                .collect::<String>(),
        );
        source = s.source();
        depth += 1;
    }
    reason
}

/// A projected token file's content, trimmed; bounded in size and time.
pub(crate) async fn read_token_file(provider: Provider, path: &Path) -> Result<String, Error> {
    let fail = |reason: String| Error::Transport {
        provider,
        step: Step::TokenFile,
        reason: format!("{}: {reason}", path.display()),
    };
    let read = async {
        let file = tokio::fs::File::open(path)
            .await
            .map_err(|e| fail(e.to_string()))?;
        let mut bytes = Vec::new();
        file.take(MAX_TOKEN_FILE + 1)
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| fail(e.to_string()))?;
        if bytes.len() as u64 > MAX_TOKEN_FILE {
            return Err(fail(format!("larger than {} KiB", MAX_TOKEN_FILE / 1024)));
        }
        let text = String::from_utf8(bytes).map_err(|_| fail("not UTF-8".into()))?;
        let token = text.trim();
        if token.is_empty() {
            return Err(fail("empty".into()));
        }
        Ok(token.to_owned())
    };
    tokio::time::timeout(TOKEN_FILE_TIMEOUT, read)
        .await
        .map_err(|_| fail(format!("not read within {TOKEN_FILE_TIMEOUT:?}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_bounded_and_printable() {
        assert_eq!(excerpt(b""), "(empty body)");
        assert_eq!(excerpt(b"  a\r\n\x1b[31mb\t "), "a [31mb");
        let long = excerpt(&vec![b'x'; 100_000]);
        assert!(long.chars().count() <= EXCERPT_CHARS + 3, "{}", long.len());
        assert!(long.ends_with("..."));
        assert_eq!(excerpt(&[0xff, b'o', b'k']), "\u{fffd}ok");
    }

    #[tokio::test]
    async fn token_files_are_bounded() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let good = dir.path().join("token");
        std::fs::write(&good, "  eyJ.token \n")?;
        assert_eq!(read_token_file(Provider::Acr, &good).await?, "eyJ.token");
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'a'; 70_000])?;
        let error = read_token_file(Provider::Acr, &big).await.err();
        assert!(
            matches!(&error, Some(Error::Transport { step: Step::TokenFile, reason, .. }) if reason.contains("larger")),
            "{error:?}"
        );
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n")?;
        assert!(read_token_file(Provider::Ecr, &empty).await.is_err());
        let missing = read_token_file(Provider::Ecr, &dir.path().join("nope"))
            .await
            .err();
        assert_eq!(missing.and_then(|e| e.provider()), Some(Provider::Ecr));
        Ok(())
    }
}
