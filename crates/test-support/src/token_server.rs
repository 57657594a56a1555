//! An in-process Docker token server (the `realm` of a Bearer challenge).

mod answer;
mod signer;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub use signer::{decode_claims, Access, TokenSigner};

use answer::State;

use crate::serve::Server;
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
