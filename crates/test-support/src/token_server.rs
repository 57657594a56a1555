//! An in-process Docker token server (the `realm` of a Bearer challenge).

mod signer;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hyper::body::Incoming;

pub use signer::{decode_claims, Access, TokenSigner};

use crate::serve::{read_body, response, ResBody, Server};
use crate::ServerCert;

/// The path the realm is served on.
const REALM_PATH: &str = "/token";

/// Which fields carry the token in answers (clients must accept either).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TokenFields {
    /// Both `token` and `access_token` (Docker Hub).
    #[default]
    Both,
    /// Only `token`.
    TokenOnly,
    /// Only `access_token` (OAuth2 style).
    AccessTokenOnly,
}

/// One request the token server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRequest {
    /// `GET` or `POST`.
    pub method: String,
    /// The request path (the realm is `/token`).
    pub path: String,
    /// Query parameters in order.
    pub query: Vec<(String, String)>,
    /// Form fields of a POST in order; `password` and `refresh_token` values read `<redacted>`.
    pub form: Vec<(String, String)>,
    /// Whether an `Authorization` header arrived.
    pub authorization: bool,
    /// The authenticated user (Basic, password grant or refresh token); None when anonymous or
    /// rejected.
    pub user: Option<String>,
    /// Every requested scope (`repository:NAME:pull`), from query or form.
    pub scopes: Vec<String>,
    /// The status answered.
    pub status: u16,
}

impl TokenRequest {
    /// The first value of query parameter or form field `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .chain(self.form.iter())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Configures a [`TokenServer`].
#[derive(Clone)]
pub struct TokenServerBuilder {
    users: HashMap<String, String>,
    user_access: HashMap<String, Vec<String>>,
    refresh_tokens: HashMap<String, String>,
    anonymous: Vec<String>,
    expires_in: Option<u64>,
    fields: TokenFields,
    tls: Option<ServerCert>,
    service: String,
    issuer: String,
}

impl std::fmt::Debug for TokenServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut users: Vec<&String> = self.users.keys().collect();
        users.sort();
        f.debug_struct("TokenServerBuilder")
            .field("users", &users)
            .field("user_access", &self.user_access)
            .field("refresh_tokens", &"<redacted>")
            .field("anonymous", &self.anonymous)
            .field("expires_in", &self.expires_in)
            .field("fields", &self.fields)
            .field("tls", &self.tls.is_some())
            .field("service", &self.service)
            .field("issuer", &self.issuer)
            .finish()
    }
}

impl Default for TokenServerBuilder {
    fn default() -> Self {
        Self {
            users: HashMap::new(),
            user_access: HashMap::new(),
            refresh_tokens: HashMap::new(),
            anonymous: Vec::new(),
            expires_in: Some(300),
            fields: TokenFields::Both,
            tls: None,
            service: "noe-test-registry".to_owned(),
            issuer: "noe-test-token-server".to_owned(),
        }
    }
}

impl TokenServerBuilder {
    /// A user (Basic auth on GET, `grant_type=password` on POST) who may pull and push anything.
    pub fn user(mut self, name: &str, password: &str) -> Self {
        self.users.insert(name.to_owned(), password.to_owned());
        self.user_access.remove(name);
        self
    }

    /// A user who may only access repositories matching `patterns` (`*`, `prefix/*`, exact);
    /// other repositories get a token without access, as Docker Hub does.
    pub fn user_with_access(mut self, name: &str, password: &str, patterns: &[&str]) -> Self {
        self.users.insert(name.to_owned(), password.to_owned());
        self.user_access.insert(
            name.to_owned(),
            patterns.iter().map(|p| (*p).to_owned()).collect(),
        );
        self
    }

    /// A refresh token (a docker `identitytoken`) accepted for `user` by the
    /// `grant_type=refresh_token` POST.
    pub fn refresh_token(mut self, token: &str, user: &str) -> Self {
        self.refresh_tokens
            .insert(token.to_owned(), user.to_owned());
        self
    }

    /// Repositories anonymous requests may pull: `*`, `prefix/*` or an exact name. Anonymous
    /// requests for other repositories get a token with no access (as Docker Hub does).
    pub fn anonymous_pull(mut self, pattern: &str) -> Self {
        self.anonymous.push(pattern.to_owned());
        self
    }

    /// The `expires_in` answered (default 300 s).
    pub fn expires_in(mut self, seconds: u64) -> Self {
        self.expires_in = Some(seconds);
        self
    }

    /// Answer without `expires_in` (clients must then assume 60 s); tokens live 60 s.
    pub fn omit_expires_in(mut self) -> Self {
        self.expires_in = None;
        self
    }

    /// Which fields carry the token.
    pub fn fields(mut self, fields: TokenFields) -> Self {
        self.fields = fields;
        self
    }

    /// Serve HTTPS with this certificate (e.g. from [`crate::TestCa::loopback_cert`]).
    pub fn tls(mut self, cert: ServerCert) -> Self {
        self.tls = Some(cert);
        self
    }

    /// The `service` (JWT audience) the registry is configured with.
    pub fn service(mut self, service: &str) -> Self {
        self.service = service.to_owned();
        self
    }

    /// Starts the server on `127.0.0.1:0`.
    pub async fn start(self) -> anyhow::Result<TokenServer> {
        let signer = TokenSigner::new(&self.issuer, &self.service)?;
        let tls = match &self.tls {
            Some(cert) => Some(cert.server_config()?),
            None => None,
        };
        let state = Arc::new(State {
            config: self,
            signer: signer.clone(),
            requests: Mutex::new(Vec::new()),
            hang: AtomicBool::new(false),
        });
        let handler_state = state.clone();
        let server = Server::start(
            tls,
            Arc::new(move |request, local| {
                let state = handler_state.clone();
                Box::pin(async move { state.handle(request, local).await })
            }),
        )
        .await?;
        Ok(TokenServer { server, state })
    }
}

/// A Docker token server on `127.0.0.1`: `GET /token?service=..&scope=..` (anonymous or Basic)
/// and `POST /token` (`grant_type=refresh_token` or `password`), answering
/// `{"token","access_token","expires_in"}` with ES256 JWTs the registry trusts. Denied
/// credentials get 401. Every request is recorded. Stops on drop.
///
/// ```no_run
/// # async fn demo() -> anyhow::Result<()> {
/// use noe_test_support::{Registry, TokenServer};
/// let tokens = TokenServer::builder()
///     .user("alice", "s3cret")
///     .refresh_token("identity-token", "alice")
///     .anonymous_pull("public/*")
///     .start()
///     .await?;
/// let registry = Registry::builder().token_auth(&tokens).start().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct TokenServer {
    server: Server,
    state: Arc<State>,
}

#[derive(Debug)]
struct State {
    config: TokenServerBuilder,
    signer: TokenSigner,
    requests: Mutex<Vec<TokenRequest>>,
    hang: AtomicBool,
}

impl TokenServer {
    /// A builder (no users, no anonymous access, HTTP).
    pub fn builder() -> TokenServerBuilder {
        TokenServerBuilder::default()
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// `http(s)://127.0.0.1:PORT/token`.
    pub fn realm(&self) -> String {
        let scheme = if self.state.config.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}{REALM_PATH}", self.addr())
    }

    /// The `service` parameter expected (and the JWT audience).
    pub fn service(&self) -> &str {
        &self.state.config.service
    }

    /// The signer (its certificate is the registry's `rootcertbundle`).
    pub fn signer(&self) -> &TokenSigner {
        &self.state.signer
    }

    /// Mints a token directly, without an HTTP request (not recorded).
    pub fn issue_token(&self, subject: &str, access: &[Access]) -> anyhow::Result<String> {
        self.state
            .signer
            .sign(subject, access, self.state.config.expires_in.unwrap_or(60))
    }

    /// When `true`, requests are read and never answered (for fault tests); each such request
    /// is still recorded, with status 0.
    pub fn set_hang(&self, hang: bool) {
        self.state.hang.store(hang, Ordering::SeqCst);
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<TokenRequest> {
        self.state
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// `requests().len()`.
    pub fn request_count(&self) -> usize {
        self.state
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Forgets the recorded requests.
    pub fn reset_requests(&self) {
        self.state
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
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

    async fn handle(
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
