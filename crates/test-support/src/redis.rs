//! A real `redis-server` (Debian package `redis-server`, Redis 7; Valkey speaks the same
//! protocol) on a free `127.0.0.1` port, started per test with a generated config, killed on
//! drop or on [`RedisServer::kill`] (the "shared cache went down" case). Plain or TLS (a
//! [`TestCa`] certificate), with or without a password. Nothing is persisted.
//!
//! [`RedisServer::command`] sends one command over a minimal RESP connection, so tests can look
//! at what was stored without another client library.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::TestCa;

/// The server binary; override with `NOE_TEST_REDIS_BIN` (e.g. `valkey-server`).
const DEFAULT_BINARY: &str = "redis-server";
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Largest reply [`RedisServer::command`] reads.
const MAX_REPLY: usize = 4 * 1024 * 1024;

/// Runs the server in the background and kills it as soon as our end of stdin closes (on drop,
/// and when the test process dies without unwinding), like the registry's wrapper.
const WRAPPER: &str = r#"exec 3<&0
"$0" "$1" </dev/null &
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

/// A running `redis-server` on `127.0.0.1:PORT`.
///
/// ```no_run
/// # fn demo() -> anyhow::Result<()> {
/// use noe_test_support::RedisServer;
/// let mut redis = RedisServer::builder().password("s3cret").start()?;
/// assert_eq!(redis.command(&["PING"])?, "PONG");
/// let url = redis.url(); // redis://127.0.0.1:PORT/0 (the password is given separately)
/// redis.kill(); // the shared cache goes down mid-test
/// # Ok(()) }
/// ```
pub struct RedisServer {
    child: Option<Child>,
    watchdog: Option<ChildStdin>,
    port: u16,
    password: Option<String>,
    tls: Option<TestCa>,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for RedisServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisServer")
            .field("port", &self.port)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

/// How a [`RedisServer`] is started.
#[derive(Default)]
pub struct RedisBuilder {
    password: Option<String>,
    tls: Option<TestCa>,
}

impl RedisBuilder {
    /// Require `AUTH password` (`requirepass`).
    pub fn password(mut self, password: &str) -> Self {
        self.password = Some(password.to_owned());
        self
    }

    /// Serve TLS only, with a loopback certificate from `ca` (no client certificate asked).
    pub fn tls(mut self, ca: &TestCa) -> Self {
        self.tls = Some(ca.clone());
        self
    }

    /// Starts the server and waits until it accepts connections.
    pub fn start(self) -> anyhow::Result<RedisServer> {
        let dir = tempfile::Builder::new().prefix("noe-redis-").tempdir()?;
        if let Some(ca) = &self.tls {
            let cert = ca.loopback_cert()?;
            std::fs::write(dir.path().join("tls.crt"), &cert.cert_pem)?;
            std::fs::write(dir.path().join("tls.key"), &cert.key_pem)?;
            std::fs::write(dir.path().join("ca.crt"), ca.cert_pem())?;
        }
        let mut last_error = None;
        for _attempt in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            match spawn(dir.path(), port, &self) {
                Ok((child, watchdog)) => {
                    return Ok(RedisServer {
                        child: Some(child),
                        watchdog: Some(watchdog),
                        port,
                        password: self.password,
                        tls: self.tls,
                        dir,
                    })
                }
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("redis-server did not start")))
    }
}

fn config(dir: &Path, port: u16, builder: &RedisBuilder) -> String {
    let mut config = format!(
        "bind 127.0.0.1\nprotected-mode no\ndir {}\nsave \"\"\nappendonly no\nlogfile {}\n",
        dir.display(),
        dir.join("redis.log").display()
    );
    if builder.tls.is_some() {
        config.push_str(&format!(
            "port 0\ntls-port {port}\ntls-cert-file {0}/tls.crt\ntls-key-file {0}/tls.key\ntls-ca-cert-file {0}/ca.crt\ntls-auth-clients no\n",
            dir.display()
        ));
    } else {
        config.push_str(&format!("port {port}\n"));
    }
    if let Some(password) = &builder.password {
        config.push_str(&format!("requirepass \"{password}\"\n"));
    }
    config
}

fn binary() -> String {
    std::env::var("NOE_TEST_REDIS_BIN").unwrap_or_else(|_| DEFAULT_BINARY.to_owned())
}

fn spawn(dir: &Path, port: u16, builder: &RedisBuilder) -> anyhow::Result<(Child, ChildStdin)> {
    let config_path = dir.join("redis.conf");
    std::fs::write(&config_path, config(dir, port, builder))?;
    let log_path = dir.join("redis.log");
    let _ = std::fs::remove_file(&log_path);
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(WRAPPER)
        .arg(binary())
        .arg(&config_path)
        .arg(dir.join("redis.pid"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| {
            format!(
                "starting {} (install the Debian package redis-server)",
                binary()
            )
        })?;
    let watchdog = child.stdin.take().context("no stdin pipe")?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait()? {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            bail!(
                "{} exited with {status} on port {port} (is the Debian package redis-server installed?): {log}",
                binary()
            );
        }
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        // Our own process must say it is ready: a connect alone could reach another test's.
        if log.contains("Ready to accept connections")
            && TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        {
            return Ok((child, watchdog));
        }
        if Instant::now() > deadline {
            drop(watchdog);
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "{} did not listen on {addr} within {START_TIMEOUT:?}",
                binary()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl RedisServer {
    /// A plain server without a password.
    pub fn start() -> anyhow::Result<Self> {
        Self::builder().start()
    }

    /// A builder for a password or TLS.
    pub fn builder() -> RedisBuilder {
        RedisBuilder::default()
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// `redis://127.0.0.1:PORT/0`, or `rediss://` with TLS. The password is not in it.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}/0", self.port)
    }

    /// The CA that signed a TLS server's certificate, as PEM.
    pub fn ca_pem(&self) -> Option<String> {
        self.tls.as_ref().map(TestCa::cert_pem)
    }

    /// The server's temp dir (config and log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Stops the server at once (SIGKILL): clients see refused connections from now on.
    pub fn kill(&mut self) {
        self.watchdog.take();
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }

    /// Whether the server is still running.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Sends one command on a new plain connection (after `AUTH` when the server has a
    /// password) and returns its reply as text: a simple string, a bulk string (`(nil)` when
    /// absent), an integer, or the elements of an array joined by newlines. Not for TLS servers.
    pub fn command(&self, args: &[&str]) -> anyhow::Result<String> {
        if self.tls.is_some() {
            bail!("RedisServer::command speaks plain RESP only");
        }
        let stream = TcpStream::connect_timeout(&self.addr(), Duration::from_secs(2))?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut writer = stream.try_clone()?;
        let mut reader = BufReader::new(stream);
        if let Some(password) = &self.password {
            writer.write_all(&encode(&["AUTH", password]))?;
            read_reply(&mut reader)?;
        }
        writer.write_all(&encode(args))?;
        read_reply(&mut reader)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn read_reply(reader: &mut BufReader<TcpStream>) -> anyhow::Result<String> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let line = line.trim_end_matches(['\r', '\n']);
    let (kind, rest) = line.split_at(line.len().min(1));
    match kind {
        "+" | ":" => Ok(rest.to_owned()),
        "-" => bail!("redis error: {rest}"),
        "$" => {
            let len: i64 = rest.parse()?;
            let Ok(len) = usize::try_from(len) else {
                return Ok("(nil)".to_owned());
            };
            if len > MAX_REPLY {
                bail!("reply of {len} bytes");
            }
            let mut body = vec![0u8; len + 2];
            reader.read_exact(&mut body)?;
            body.truncate(len);
            Ok(String::from_utf8_lossy(&body).into_owned())
        }
        "*" => {
            let count: i64 = rest.parse()?;
            let count = usize::try_from(count).unwrap_or(0).min(100_000);
            let items = (0..count)
                .map(|_| read_reply(reader))
                .collect::<anyhow::Result<Vec<_>>>()?;
            Ok(items.join("\n"))
        }
        _ => bail!("unexpected reply {line:?}"),
    }
}
