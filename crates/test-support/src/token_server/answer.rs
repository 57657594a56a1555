//! The realm's request handling: credentials, grants, answers.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hyper::body::Incoming;

use super::{Access, TokenFields, TokenRequest, TokenServerBuilder, TokenSigner, REALM_PATH};
use crate::serve::{read_body, response, ResBody};

/// Shared by the accept loop and the [`super::TokenServer`] handle.
#[derive(Debug)]
pub(super) struct State {
    pub(super) config: TokenServerBuilder,
    pub(super) signer: TokenSigner,
    pub(super) requests: Mutex<Vec<TokenRequest>>,
    pub(super) hang: AtomicBool,
}

/// Parses `application/x-www-form-urlencoded` pairs.
fn pairs(input: &[u8]) -> Vec<(String, String)> {
    url::form_urlencoded::parse(input)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn first<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// `repository:NAME:a,b` → (NAME, [a, b]); other resource types are ignored.
fn parse_scope(scope: &str) -> Option<(String, Vec<String>)> {
    let rest = scope.strip_prefix("repository:")?;
    let (name, actions) = rest.rsplit_once(':')?;
    Some((
        name.to_owned(),
        actions.split(',').map(str::to_owned).collect(),
    ))
}

fn pattern_matches(pattern: &str, repository: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => repository.starts_with(prefix),
        None => pattern == repository,
    }
}

/// Outcome of checking the presented credentials.
enum Identity {
    Anonymous,
    User(String),
    Denied,
}

impl State {
    fn check_password(&self, user: &str, password: &str) -> Identity {
        match self.config.users.get(user) {
            Some(expected) if expected == password => Identity::User(user.to_owned()),
            _ => Identity::Denied,
        }
    }

    fn basic_identity(&self, header: Option<&http::HeaderValue>) -> Identity {
        let Some(value) = header.and_then(|h| h.to_str().ok()) else {
            return Identity::Anonymous;
        };
        let Some(encoded) = value
            .strip_prefix("Basic ")
            .or_else(|| value.strip_prefix("basic "))
        else {
            return Identity::Denied;
        };
        let decoded = STANDARD
            .decode(encoded.trim())
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok());
        match decoded.as_deref().and_then(|d| d.split_once(':')) {
            Some((user, password)) => self.check_password(user, password),
            None => Identity::Denied,
        }
    }

    fn grant(&self, identity: &Identity, scopes: &[String]) -> Vec<Access> {
        scopes
            .iter()
            .filter_map(|scope| parse_scope(scope))
            .map(|(repository, actions)| {
                let granted: Vec<String> = match identity {
                    Identity::User(user) => match self.config.user_access.get(user) {
                        Some(patterns)
                            if !patterns.iter().any(|p| pattern_matches(p, &repository)) =>
                        {
                            Vec::new()
                        }
                        _ => actions,
                    },
                    _ if self
                        .config
                        .anonymous
                        .iter()
                        .any(|p| pattern_matches(p, &repository)) =>
                    {
                        actions.into_iter().filter(|a| a == "pull").collect()
                    }
                    _ => Vec::new(),
                };
                Access {
                    repository,
                    actions: granted,
                }
            })
            .collect()
    }

    pub(super) async fn handle(
        &self,
        request: http::Request<Incoming>,
        _local: SocketAddr,
    ) -> http::Response<ResBody> {
        let (parts, body) = request.into_parts();
        let query = pairs(parts.uri.query().unwrap_or_default().as_bytes());
        let mut record = TokenRequest {
            method: parts.method.to_string(),
            path: parts.uri.path().to_owned(),
            query: query.clone(),
            form: Vec::new(),
            authorization: parts.headers.contains_key(http::header::AUTHORIZATION),
            user: None,
            scopes: Vec::new(),
            status: 0,
        };
        let form = if parts.method == http::Method::POST {
            pairs(&read_body(body, 64 * 1024).await)
        } else {
            Vec::new()
        };
        record.form = form
            .iter()
            .map(|(k, v)| {
                let secret = matches!(k.as_str(), "password" | "refresh_token");
                let shown = if secret { "<redacted>" } else { v.as_str() };
                (k.clone(), shown.to_owned())
            })
            .collect();

        if self.hang.load(Ordering::SeqCst) {
            self.record(record);
            tokio::time::sleep(Duration::from_secs(600)).await;
            return response(504, &[], "hung");
        }

        let params = if parts.method == http::Method::POST {
            &form
        } else {
            &query
        };
        record.scopes = params
            .iter()
            .filter(|(k, _)| k == "scope")
            .flat_map(|(_, v)| v.split(' ').map(str::to_owned))
            .filter(|s| !s.is_empty())
            .collect();

        let (status, body) = self.answer(&parts, params, &mut record);
        record.status = status;
        self.record(record);
        response(status, &[("content-type", "application/json")], body)
    }

    fn answer(
        &self,
        parts: &http::request::Parts,
        params: &[(String, String)],
        record: &mut TokenRequest,
    ) -> (u16, String) {
        let error = |status: u16, message: &str| {
            (
                status,
                serde_json::json!({"details": message, "errors": [{"code": "UNAUTHORIZED", "message": message}]})
                    .to_string(),
            )
        };
        if parts.uri.path() != REALM_PATH {
            return error(404, "not found");
        }
        let identity = match parts.method {
            http::Method::GET => {
                self.basic_identity(parts.headers.get(http::header::AUTHORIZATION))
            }
            http::Method::POST => match first(params, "grant_type") {
                Some("refresh_token") => match first(params, "refresh_token")
                    .and_then(|t| self.config.refresh_tokens.get(t))
                {
                    Some(user) => Identity::User(user.clone()),
                    None => Identity::Denied,
                },
                Some("password") => match (first(params, "username"), first(params, "password")) {
                    (Some(user), Some(password)) => self.check_password(user, password),
                    _ => Identity::Denied,
                },
                _ => return error(400, "unsupported grant_type"),
            },
            _ => return error(405, "method not allowed"),
        };
        if first(params, "service") != Some(self.config.service.as_str()) {
            return error(400, "missing or unknown service");
        }
        if parts.method == http::Method::POST && first(params, "client_id").is_none() {
            return error(400, "missing client_id");
        }
        let subject = match &identity {
            Identity::Denied => return error(401, "incorrect username or password"),
            Identity::User(user) => {
                record.user = Some(user.clone());
                user.clone()
            }
            Identity::Anonymous => String::new(),
        };
        let access = self.grant(&identity, &record.scopes);
        let lifetime = self.config.expires_in.unwrap_or(60);
        let token = match self.signer.sign(&subject, &access, lifetime) {
            Ok(token) => token,
            Err(_) => return error(500, "signing failed"),
        };
        let mut answer = serde_json::Map::new();
        if self.config.fields != TokenFields::AccessTokenOnly {
            answer.insert("token".to_owned(), token.clone().into());
        }
        if self.config.fields != TokenFields::TokenOnly {
            answer.insert("access_token".to_owned(), token.into());
        }
        if let Some(seconds) = self.config.expires_in {
            answer.insert("expires_in".to_owned(), seconds.into());
        }
        (200, serde_json::Value::Object(answer).to_string())
    }

    fn record(&self, record: TokenRequest) {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_scopes() {
        let cases = [
            (
                "repository:library/app:pull",
                Some(("library/app", vec!["pull"])),
            ),
            (
                "repository:a/b/c:pull,push",
                Some(("a/b/c", vec!["pull", "push"])),
            ),
            ("registry:catalog:*", None),
            ("repository:noactions", None),
        ];
        for (scope, want) in cases {
            let got = parse_scope(scope);
            let want = want.map(|(n, a)| {
                (
                    n.to_owned(),
                    a.into_iter().map(str::to_owned).collect::<Vec<_>>(),
                )
            });
            assert_eq!(got, want, "{scope}");
        }
    }

    #[test]
    fn matches_anonymous_patterns() {
        let cases = [
            ("*", "anything/at/all", true),
            ("public/*", "public/app", true),
            ("public/*", "private/app", false),
            ("app", "app", true),
            ("app", "app2", false),
        ];
        for (pattern, repository, want) in cases {
            assert_eq!(
                pattern_matches(pattern, repository),
                want,
                "{pattern} {repository}"
            );
        }
    }
}
