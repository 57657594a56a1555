//! The real CNCF distribution registry (`docker-registry serve`), started per test.

mod access_log;
mod config;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

pub use access_log::RegistryRequest;
use config::{AuthConfig, Tls, TokenConfig};

use crate::push::{PushAuth, Pusher};
use crate::{TestCa, TokenServer, TokenSigner};

/// The registry binary; override with `NOE_TEST_REGISTRY_BIN`.
const DEFAULT_BINARY: &str = "docker-registry";

/// Runs the registry in the background and kills it as soon as our end of stdin closes: on
/// drop, and also when the test process dies without unwinding (a timeout's SIGKILL). Explicit
/// `<&3` because an asynchronous list's stdin is otherwise /dev/null.
const WRAPPER: &str = r#"exec 3<&0
"$0" serve "$1" </dev/null &
pid=$!
echo "$pid" > "$2"
( read -r _ignored <&3; kill -9 "$pid" 2>/dev/null ) &
watcher=$!
wait "$pid"
status=$?
kill "$watcher" 2>/dev/null
wait "$watcher"
exit "$status"
"#;

/// How long the registry may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A running `docker-registry` on `127.0.0.1:PORT`, killed and cleaned up on drop.
///
/// ```no_run
/// # async fn demo() -> anyhow::Result<()> {
/// use noe_test_support::{Registry, TestCa};
/// let plain = Registry::start().await?;
/// let ca = TestCa::new()?;
/// let private = Registry::builder().htpasswd("alice", "s3cret").tls(&ca).start().await?;
/// let fixtures = noe_test_support::push_standard_fixtures(&private).await?;
/// private.reset_requests();
/// // ... run the code under test against fixtures.oci_index.reference() ...
/// assert_eq!(private.requests().len(), 1);
/// # Ok(()) }
/// ```
pub struct Registry {
    /// `sh` running the registry and a watchdog that kills it when this pipe closes.
    child: Child,
    watchdog: Option<ChildStdin>,
    pid: u32,
    port: u16,
    tls: Option<TestCa>,
    /// With a client-certificate requirement: the admin's certificate and key (PEM).
    client_identity: Option<String>,
    admin: PushAuth,
    cursor: Mutex<usize>,
    // Dropped after the child is killed (field order), removing storage and logs.
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("host", &self.host())
            .field("tls", &self.tls.is_some())
            .field("mtls", &self.client_identity.is_some())
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

/// Chooses how a [`Registry`] is started; modes combine (token auth + TLS, htpasswd + TLS,
/// TLS + client certificates).
#[derive(Default)]
pub struct RegistryBuilder {
    tls: Option<TestCa>,
    /// Names the TLS certificate covers besides the loopback ones.
    tls_names: Vec<String>,
    client_ca: Option<TestCa>,
    users: Vec<(String, String)>,
    token: Option<TokenServerAuth>,
}

impl std::fmt::Debug for RegistryBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let users: Vec<&str> = self.users.iter().map(|(u, _)| u.as_str()).collect();
        f.debug_struct("RegistryBuilder")
            .field("tls", &self.tls.is_some())
            .field("client_ca", &self.client_ca.is_some())
            .field("users", &users)
            .field("token", &self.token)
            .finish()
    }
}

#[derive(Debug, Clone)]
struct TokenServerAuth {
    config: TokenConfig,
    signer: TokenSigner,
}

impl RegistryBuilder {
    /// Serve HTTPS with a certificate for `127.0.0.1`/`localhost` issued by `ca`.
    pub fn tls(mut self, ca: &TestCa) -> Self {
        self.tls = Some(ca.clone());
        self
    }

    /// Also cover `name` in the TLS certificate, so a client that pins `name` to the registry's
    /// loopback address (reqwest's `resolve`) reaches it under a real registry's host name.
    pub fn tls_name(mut self, name: &str) -> Self {
        self.tls_names.push(name.to_owned());
        self
    }

    /// Require a TLS client certificate issued by `client_ca` (`http.tls.clientcas`: the
    /// registry refuses the handshake without one). Needs [`RegistryBuilder::tls`]. The harness's
    /// own probe and [`Registry::pusher`] present [`Registry::client_identity_pem`].
    pub fn require_client_cert(mut self, client_ca: &TestCa) -> Self {
        self.client_ca = Some(client_ca.clone());
        self
    }

    /// Require HTTP Basic auth (`auth.htpasswd`); may be called several times for more users.
    /// The first user is the one [`Registry::pusher`] uses.
    pub fn htpasswd(mut self, user: &str, password: &str) -> Self {
        self.users.push((user.to_owned(), password.to_owned()));
        self
    }

    /// Require Bearer tokens from `server` (`auth.token`: its realm, service, issuer, and its
    /// signing certificate as `rootcertbundle`).
    pub fn token_auth(mut self, server: &TokenServer) -> Self {
        self.token = Some(TokenServerAuth {
            config: TokenConfig {
                realm: server.realm(),
                service: server.service().to_owned(),
                issuer: server.signer().issuer().to_owned(),
            },
            signer: server.signer().clone(),
        });
        self
    }

    /// Starts the registry and waits until `/v2/` answers.
    pub async fn start(self) -> anyhow::Result<Registry> {
        if self.token.is_some() && !self.users.is_empty() {
            bail!("a registry takes either htpasswd or token auth, not both");
        }
        let dir = registry_dir()?;
        let auth = if let Some(token) = &self.token {
            std::fs::write(dir.path().join("token-root.pem"), token.signer.cert_pem())?;
            AuthConfig::Token(token.config.clone())
        } else if !self.users.is_empty() {
            let users: Vec<(&str, &str)> = self
                .users
                .iter()
                .map(|(u, p)| (u.as_str(), p.as_str()))
                .collect();
            std::fs::write(dir.path().join("htpasswd"), crate::htpasswd(&users)?)?;
            AuthConfig::Htpasswd
        } else {
            AuthConfig::None
        };
        if let Some(ca) = &self.tls {
            std::fs::write(dir.path().join("ca.crt"), ca.cert_pem())?;
            let mut names = vec!["127.0.0.1", "localhost", "::1"];
            names.extend(self.tls_names.iter().map(String::as_str));
            let cert = ca.server_cert(&names)?;
            std::fs::write(dir.path().join("tls.crt"), &cert.cert_pem)?;
            std::fs::write(dir.path().join("tls.key"), &cert.key_pem)?;
        }
        let tls = match (&self.tls, &self.client_ca) {
            (None, Some(_)) => bail!("require_client_cert needs tls"),
            (None, None) => Tls::Off,
            (Some(_), None) => Tls::On,
            (Some(_), Some(_)) => Tls::RequireClientCert,
        };
        let client_identity = match &self.client_ca {
            Some(client_ca) => {
                std::fs::write(dir.path().join("client-ca.crt"), client_ca.cert_pem())?;
                let admin = client_ca.client_cert("noe-test-admin")?;
                Some(format!("{}{}", admin.cert_pem, admin.key_pem))
            }
            None => None,
        };
        let admin = if let Some(token) = &self.token {
            PushAuth::Signer(token.signer.clone())
        } else if let Some((user, password)) = self.users.first() {
            PushAuth::basic(user, password)
        } else {
            PushAuth::Anonymous
        };

        let mut last_error = None;
        for _attempt in 0..5 {
            let port = free_port()?;
            let yaml = config::render(dir.path(), port, &auth, tls);
            match spawn(dir.path(), port, &yaml) {
                Ok((mut child, pid)) => {
                    let registry = Registry {
                        watchdog: child.stdin.take(),
                        child,
                        pid,
                        port,
                        tls: self.tls.clone(),
                        client_identity: client_identity.clone(),
                        admin: admin.clone(),
                        cursor: Mutex::new(0),
                        dir,
                    };
                    registry.probe().await?;
                    registry.reset_requests();
                    return Ok(registry);
                }
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("registry did not start")))
    }
}

/// The registry's temp dir: on tmpfs (`/dev/shm`) when there is one, because the filesystem
/// driver fsyncs every blob and that triples the time to push fixtures on a VM disk.
fn registry_dir() -> anyhow::Result<tempfile::TempDir> {
    let mut builder = tempfile::Builder::new();
    builder.prefix("noe-registry-");
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = builder.tempdir_in(shm) {
            return Ok(dir);
        }
    }
    Ok(builder.tempdir()?)
}

/// A port that was free a moment ago (the registry binds it itself).
fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn binary() -> String {
    std::env::var("NOE_TEST_REGISTRY_BIN").unwrap_or_else(|_| DEFAULT_BINARY.to_owned())
}

/// Starts the process and waits until its port accepts connections; returns the wrapper and the
/// registry's pid.
fn spawn(dir: &Path, port: u16, yaml: &str) -> anyhow::Result<(Child, u32)> {
    let config_path = dir.join("config.yml");
    std::fs::write(&config_path, yaml)?;
    let pid_path = dir.join("registry.pid");
    let _ = std::fs::remove_file(&pid_path);
    let stdout = std::fs::File::create(dir.join("access.log"))?;
    let stderr = std::fs::File::create(dir.join("registry.log"))?;
    let mut command = Command::new("sh");
    // The registry reads REGISTRY_* overrides from the environment: keep only our config.
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("REGISTRY_") {
            command.env_remove(name);
        }
    }
    let mut child = command
        .arg("-c")
        .arg(WRAPPER)
        .arg(binary())
        .arg(&config_path)
        .arg(&pid_path)
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .with_context(|| {
            format!(
                "starting `sh -c '{} serve ..'` (install the Debian package docker-registry)",
                binary()
            )
        })?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    // Our own process must say it listens: a successful connect alone could reach another
    // test's registry that won a race for the same port.
    let listening = format!("listening on {addr}");
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait()? {
            let log = std::fs::read_to_string(dir.join("registry.log")).unwrap_or_default();
            bail!(
                "`{} serve` exited with {status} on port {port} (is the Debian package \
                 docker-registry installed?): {log}",
                binary()
            );
        }
        let log = std::fs::read_to_string(dir.join("registry.log")).unwrap_or_default();
        if log.contains(&listening)
            && TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        {
            let pid = std::fs::read_to_string(&pid_path)?.trim().parse()?;
            return Ok((child, pid));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("docker-registry did not listen on {addr} within {START_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Registry {
    /// A plain-HTTP registry without auth.
    pub async fn start() -> anyhow::Result<Self> {
        Self::builder().start().await
    }

    /// A builder for the other modes.
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder::default()
    }

    /// `127.0.0.1:PORT`, the registry part of image references.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `127.0.0.1:PORT` as an address (for a proxy in front of it).
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The registry process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT` or `https://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.host())
    }

    /// Whether the registry serves HTTPS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The PEM of the CA that signed the registry's certificate (None for plain HTTP).
    pub fn ca_pem(&self) -> Option<String> {
        self.tls.as_ref().map(TestCa::cert_pem)
    }

    /// A file holding [`Registry::ca_pem`] (for `--registry-ca-file`); None for plain HTTP.
    pub fn ca_file(&self) -> Option<PathBuf> {
        self.tls.as_ref().map(|_| self.dir.path().join("ca.crt"))
    }

    /// The CA, when serving TLS.
    pub fn ca(&self) -> Option<&TestCa> {
        self.tls.as_ref()
    }

    /// The directory holding the config, storage and logs (removed on drop).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The admin's client certificate chain and key (PEM, one file) when the registry requires
    /// client certificates.
    pub fn client_identity_pem(&self) -> Option<&str> {
        self.client_identity.as_deref()
    }

    /// A reqwest client that trusts this registry's CA (no proxy, 30 s timeout) and presents
    /// [`Registry::client_identity_pem`] when there is one.
    pub fn http_client(&self) -> anyhow::Result<reqwest::Client> {
        crate::push::http_client(self.ca_pem().as_deref(), self.client_identity_pem())
    }

    /// A pusher authenticated as the registry's admin: the first htpasswd user, or a token
    /// minted with the token server's key granting pull and push.
    pub fn pusher(&self) -> anyhow::Result<Pusher> {
        Pusher::with_identity(
            &self.base_url(),
            self.ca_pem().as_deref(),
            self.client_identity_pem(),
            self.admin.clone(),
        )
    }

    /// `host()/repository:tag`.
    pub fn reference(&self, repository: &str, tag: &str) -> String {
        format!("{}/{repository}:{tag}", self.host())
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("access.log")
    }

    /// The registry's own (stderr) log, for failure messages.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// Every request logged so far, including those before the last reset.
    pub fn all_requests(&self) -> Vec<RegistryRequest> {
        // The access log line is written just after the response; let it settle.
        let path = self.log_path();
        let mut last_len = None;
        for _ in 0..40 {
            let len = std::fs::metadata(&path).map(|m| m.len()).ok();
            if len.is_some() && len == last_len {
                break;
            }
            last_len = len;
            std::thread::sleep(Duration::from_millis(25));
        }
        std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .filter_map(access_log::parse_line)
            .collect()
    }

    /// The requests the registry answered since start (after its readiness probe) or since the
    /// last [`Registry::reset_requests`].
    pub fn requests(&self) -> Vec<RegistryRequest> {
        let all = self.all_requests();
        let cursor = *self.cursor.lock().unwrap_or_else(|e| e.into_inner());
        all.into_iter().skip(cursor).collect()
    }

    /// Of [`Registry::requests`], those about `repository`: its tag list pages and its
    /// manifest requests (GET and HEAD).
    pub fn repository_requests(&self, repository: &str) -> (usize, usize) {
        let tags = format!("/v2/{repository}/tags/list");
        let manifests = format!("/v2/{repository}/manifests/");
        self.requests().iter().fold((0, 0), |(t, m), r| {
            (
                t + usize::from(r.path == tags),
                m + usize::from(r.path.starts_with(&manifests)),
            )
        })
    }

    /// `requests().len()`.
    pub fn request_count(&self) -> usize {
        self.requests().len()
    }

    /// Forgets the requests seen so far: later [`Registry::requests`] calls only show new ones.
    pub fn reset_requests(&self) {
        let count = self.all_requests().len();
        *self.cursor.lock().unwrap_or_else(|e| e.into_inner()) = count;
    }

    /// Freezes the registry (SIGSTOP): connections are still accepted by the kernel but nothing
    /// is answered, like a blackholed host. [`Registry::resume`] undoes it; drop works either way.
    pub fn pause(&self) -> anyhow::Result<()> {
        signal(self.pid, "STOP")?;
        // `kill` returns once the signal is sent; a thread of the registry may still run (and
        // answer) until every thread has stopped. Wait for that, so a paused registry answers
        // nothing from the moment this returns.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !all_threads_stopped(self.pid) {
            if std::time::Instant::now() > deadline {
                bail!("registry {} did not stop within 10 s of SIGSTOP", self.pid);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(())
    }

    /// Resumes a paused registry (SIGCONT).
    pub fn resume(&self) -> anyhow::Result<()> {
        signal(self.pid, "CONT")
    }

    /// GET `/v2/` until it answers 200 or 401.
    async fn probe(&self) -> anyhow::Result<()> {
        let client = self.http_client()?;
        let url = format!("{}/v2/", self.base_url());
        let mut last = String::new();
        for _ in 0..50 {
            match client.get(&url).send().await {
                Ok(response) if matches!(response.status().as_u16(), 200 | 401) => return Ok(()),
                Ok(response) => last = format!("status {}", response.status()),
                Err(error) => last = format!("{error:#}"),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("registry at {url} not ready: {last}; log: {}", self.logs())
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        // Closing the pipe makes the watchdog SIGKILL the registry; the wrapper then exits.
        drop(self.watchdog.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = signal(self.pid, "KILL");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends `kill -SIGNAL pid`.
/// Whether every thread of `pid` is stopped (state `T` or `t` in `/proc/PID/task/*/stat`).
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
            // The state follows the command name, which is in parentheses.
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next())
                .is_some_and(|state| state == 'T' || state == 't')
        })
    })
}

fn signal(pid: u32, signal: &str) -> anyhow::Result<()> {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    if !status.success() {
        bail!("kill -{signal} {pid} failed: {status}");
    }
    Ok(())
}
