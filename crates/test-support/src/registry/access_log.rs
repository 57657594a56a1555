//! Parsing of the registry's access log (gorilla `CombinedLoggingHandler` lines on stdout).

/// One request the registry answered, as its access log tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryRequest {
    /// `GET`, `HEAD`, `PUT`, ...
    pub method: String,
    /// The path without the query, e.g. `/v2/library/app/manifests/1.0`.
    pub path: String,
    /// The raw query string without `?`, if any.
    pub query: Option<String>,
    /// The HTTP status the registry answered.
    pub status: u16,
}

impl RegistryRequest {
    /// `"GET /v2/app/manifests/1 200"`, handy in assertion messages.
    pub fn summary(&self) -> String {
        format!("{} {} {}", self.method, self.path, self.status)
    }

    /// Whether this is a manifest request (`/v2/<name>/manifests/<reference>`).
    pub fn is_manifest(&self) -> bool {
        self.path.contains("/manifests/")
    }

    /// Whether this is a blob request (`/v2/<name>/blobs/<digest>`, uploads excluded).
    pub fn is_blob(&self) -> bool {
        self.path.contains("/blobs/") && !self.path.contains("/blobs/uploads")
    }
}

/// Parses one combined-log line:
/// `127.0.0.1 - - [22/Nov/2026:01:55:15 +0000] "GET /v2/ HTTP/1.1" 401 87 "" "ua"`.
pub(crate) fn parse_line(line: &str) -> Option<RegistryRequest> {
    let start = line.find("] \"")? + 3;
    let rest = &line[start..];
    let end = rest.find('"')?;
    let mut request_line = rest[..end].split(' ');
    let method = request_line.next()?.to_owned();
    let uri = request_line.next()?;
    request_line.next()?.strip_prefix("HTTP/")?;
    let status = rest[end + 1..].split_whitespace().next()?.parse().ok()?;
    let (path, query) = match uri.split_once('?') {
        Some((path, query)) => (path.to_owned(), Some(query.to_owned())),
        None => (uri.to_owned(), None),
    };
    Some(RegistryRequest {
        method,
        path,
        query,
        status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_combined_log_lines() {
        let cases = [
            (
                r#"127.0.0.1 - - [22/Nov/2026:01:55:15 +0000] "GET /v2/ HTTP/1.1" 401 87 "" "reqwest""#,
                Some(("GET", "/v2/", None, 401)),
            ),
            (
                r#"127.0.0.1 - - [22/Nov/2026:01:55:15 +0000] "PUT /v2/a/b/blobs/uploads/x?_state=y&digest=sha256%3Aab HTTP/1.1" 201 0 "" "ua""#,
                Some((
                    "PUT",
                    "/v2/a/b/blobs/uploads/x",
                    Some("_state=y&digest=sha256%3Aab"),
                    201,
                )),
            ),
            (
                r#"127.0.0.1 - alice [22/Nov/2026:01:55:15 +0000] "HEAD /v2/a/manifests/1 HTTP/2.0" 200 0 "" """#,
                Some(("HEAD", "/v2/a/manifests/1", None, 200)),
            ),
            ("time=\"2026\" level=info msg=\"listening\"", None),
            ("", None),
        ];
        for (line, want) in cases {
            let got = parse_line(line);
            let got = got.as_ref().map(|r| {
                (
                    r.method.as_str(),
                    r.path.as_str(),
                    r.query.as_deref(),
                    r.status,
                )
            });
            assert_eq!(got, want, "{line}");
        }
    }
}
