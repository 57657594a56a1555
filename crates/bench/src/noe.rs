//! Starting the `noe` binary (and the floor) as child processes on loopback, with a test CA.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use noe_test_support::TestCa;
use tokio::process::{Child, Command};

/// A certificate directory (`tls.crt`, `tls.key`) for loopback and a client trusting it.
pub struct Tls {
    pub dir: tempfile::TempDir,
    pub ca: TestCa,
}

impl Tls {
    pub fn new() -> anyhow::Result<Self> {
        let ca = TestCa::new()?;
        let cert = ca.loopback_cert()?;
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("tls.crt"), &cert.cert_pem)?;
        std::fs::write(dir.path().join("tls.key"), &cert.key_pem)?;
        Ok(Self { dir, ca })
    }

    /// An HTTPS client trusting the CA.
    pub fn client(&self) -> anyhow::Result<reqwest::Client> {
        Ok(reqwest::Client::builder()
            .use_preconfigured_tls(self.ca.client_config()?)
            .timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(256)
            .build()?)
    }
}

/// A free loopback address (bound then released).
pub fn free_addr() -> anyhow::Result<SocketAddr> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

/// A running child process, killed on drop.
pub struct Process {
    pub child: Child,
    pub addr: SocketAddr,
    pub metrics: Option<SocketAddr>,
    /// From spawn to ready.
    pub ready_after: Duration,
    pub log: PathBuf,
}

impl Process {
    pub fn pid(&self) -> anyhow::Result<u32> {
        self.child.id().context("the process has exited")
    }

    /// User plus system CPU time of the whole process so far (`/proc/PID/stat`, in USER_HZ
    /// ticks of 10 ms).
    pub fn cpu_seconds(&self) -> anyhow::Result<f64> {
        cpu_seconds(self.pid()?)
    }

    /// `VmRSS` and `VmHWM` in KiB.
    pub fn rss_kib(&self) -> anyhow::Result<(u64, u64)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?))?;
        let field = |name: &str| -> anyhow::Result<u64> {
            let line = status
                .lines()
                .find(|l| l.starts_with(name))
                .with_context(|| format!("{name} missing"))?;
            let kib = line
                .split_whitespace()
                .nth(1)
                .with_context(|| format!("bad {name} line"))?;
            Ok(kib.parse()?)
        };
        Ok((field("VmRSS:")?, field("VmHWM:")?))
    }

    /// A metric value from noe's `/metrics` (first sample whose line starts with `prefix`).
    pub async fn metric(&self, prefix: &str) -> anyhow::Result<f64> {
        let addr = self.metrics.context("no metrics address")?;
        let text = reqwest::get(format!("http://{addr}/metrics"))
            .await?
            .text()
            .await?;
        let line = text
            .lines()
            .find(|l| l.starts_with(prefix))
            .with_context(|| format!("metric {prefix} not found"))?;
        let value = line.rsplit(' ').next().unwrap_or_default();
        Ok(value.parse()?)
    }
}

/// User plus system CPU time of process `pid` so far (`/proc/PID/stat`, in USER_HZ ticks of
/// 10 ms).
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;

    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> anyhow::Result<f64> {
        Ok(fields
            .get(i)
            .with_context(|| format!("short /proc stat: {stat}"))?
            .parse::<f64>()?)
    };
    // utime and stime are fields 14 and 15 of stat(5), 12 and 13 after the name.
    Ok((ticks(11)? + ticks(12)?) / 100.0)
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

fn log_file(dir: &Path, name: &str) -> anyhow::Result<(PathBuf, std::fs::File)> {
    let path = dir.join(format!("{name}.log"));
    let file = std::fs::File::create(&path)?;
    Ok((path, file))
}

/// Starts `noe` serving on loopback with `tls`, waits for `/readyz` to answer 200.
pub async fn start_noe(bin: &Path, tls: &Tls, extra: &[String]) -> anyhow::Result<Process> {
    start_noe_env(bin, tls, extra, &[]).await
}

/// [`start_noe`] with these environment variables too (`POD_NAMESPACE`, as the chart sets).
pub async fn start_noe_env(
    bin: &Path,
    tls: &Tls,
    extra: &[String],
    env: &[(&str, &str)],
) -> anyhow::Result<Process> {
    let webhook = free_addr()?;
    let metrics = free_addr()?;
    let health = free_addr()?;
    let (log, file) = log_file(tls.dir.path(), &format!("noe-{}", webhook.port()))?;
    let probe = reqwest::Client::builder()
        .timeout(Duration::from_millis(200))
        .build()?;
    let readyz = format!("http://{health}/readyz");
    let started = Instant::now();
    let mut command = Command::new(bin);
    // The container image's allocator settings, unless the caller's environment sets its own.
    for (name, value) in noe_webhook::ALLOCATOR_ENV {
        if std::env::var_os(name).is_none() {
            command.env(name, value);
        }
    }
    let child = command
        .arg(format!("--cert-dir={}", tls.dir.path().display()))
        .arg(format!("--webhook-addr={webhook}"))
        .arg(format!("--metrics-addr={metrics}"))
        .arg(format!("--health-probe-addr={health}"))
        // Every registry of the benchmarks runs on loopback, which noe refuses unless told.
        .arg(format!(
            "--allow-registry-cidrs={}",
            noe_test_support::LOOPBACK_CIDRS
        ))
        .args(extra)
        .envs(env.iter().copied())
        .env("KUBECONFIG", "/nonexistent")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let mut process = Process {
        child,
        addr: webhook,
        metrics: Some(metrics),
        ready_after: Duration::ZERO,
        log,
    };
    let deadline = started + Duration::from_secs(10);
    loop {
        if let Ok(response) = probe.get(&readyz).send().await {
            if response.status().is_success() {
                process.ready_after = started.elapsed();
                return Ok(process);
            }
        }
        if let Ok(Some(status)) = process.child.try_wait() {
            bail!(
                "noe exited with {status}: {}",
                std::fs::read_to_string(&process.log).unwrap_or_default()
            );
        }
        if Instant::now() > deadline {
            bail!("noe not ready after 10 s");
        }
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
}

/// Starts the floor server (this binary's `floor` command) and waits until it accepts.
pub async fn start_floor(tls: &Tls) -> anyhow::Result<Process> {
    start_floor_answering(tls, None).await
}

/// Starts the floor answering the bytes of `response` (default: its constant AdmissionReview).
pub async fn start_floor_answering(
    tls: &Tls,
    response: Option<&std::path::Path>,
) -> anyhow::Result<Process> {
    start_floor_working(tls, response, crate::floor::Work::Parse).await
}

/// [`start_floor_answering`], the floor doing `work` with each body.
pub async fn start_floor_working(
    tls: &Tls,
    response: Option<&std::path::Path>,
    work: crate::floor::Work,
) -> anyhow::Result<Process> {
    let addr = free_addr()?;
    let (log, file) = log_file(tls.dir.path(), &format!("floor-{}", addr.port()))?;
    let started = Instant::now();
    let mut command = Command::new(std::env::current_exe()?);
    command
        .arg("floor")
        .arg(format!("--addr={addr}"))
        .arg(format!("--cert-dir={}", tls.dir.path().display()))
        .arg(format!("--work={}", work.name()));
    if let Some(response) = response {
        command.arg(format!("--response={}", response.display()));
    }
    let child = command
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .kill_on_drop(true)
        .spawn()?;
    let deadline = started + Duration::from_secs(10);
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        if Instant::now() > deadline {
            bail!("floor not listening after 10 s");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(Process {
        child,
        addr,
        metrics: None,
        ready_after: started.elapsed(),
        log,
    })
}

/// POSTs `review` to `/mutate`; noe's answer, parsed.
pub async fn admit(
    client: &reqwest::Client,
    addr: SocketAddr,
    review: &serde_json::Value,
) -> anyhow::Result<serde_json::Value> {
    let answer = admit_bytes(client, addr, &serde_json::to_string(review)?).await?;
    Ok(serde_json::from_slice(&answer)?)
}

/// POSTs the review `body` to `/mutate`; noe's answer as sent.
pub async fn admit_bytes(
    client: &reqwest::Client,
    addr: SocketAddr,
    body: &str,
) -> anyhow::Result<bytes::Bytes> {
    let response = client
        .post(format!("https://{addr}/mutate"))
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await?;
    if !response.status().is_success() {
        bail!("/mutate answered {}", response.status());
    }
    Ok(response.bytes().await?)
}
