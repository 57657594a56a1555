//! Debian's `chromium`, headless, driven over the DevTools protocol on a pipe
//! (`--remote-debugging-pipe`: JSON messages ended by a NUL byte on file descriptors 3 and 4,
//! here two FIFOs the shell that starts it opens), so no port is opened and nothing but the
//! browser is needed: no node, no WebDriver. For pages people look at (`noe report -o html`):
//! open a file, evaluate script in it, press keys, take a screenshot.
//!
//! Started with a fresh profile, no sandbox (a container has no user namespaces for it), no GPU,
//! no background networking, no component updates, no sync, no first-run; inside `unshare -rn`
//! (a network namespace without a route out) when the machine allows it. Killed on drop.
//!
//! The binary: `NOE_TEST_CHROMIUM`, else `chromium` on `PATH` ([`Browser::find`]).

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use base64::Engine as _;
use serde_json::{json, Value};

/// How long one DevTools command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest message read from the browser (a full-page screenshot of a big page is large).
const MAX_MESSAGE: usize = 256 * 1024 * 1024;

/// A headless Chromium with one page.
pub struct Browser {
    child: Child,
    to_browser: std::fs::File,
    from_browser: mpsc::Receiver<Value>,
    next_id: u64,
    session: String,
    dialogs: usize,
    script_disabled: bool,
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Browser")
            .field("pid", &self.child.id())
            .finish_non_exhaustive()
    }
}

impl Browser {
    /// The browser binary: `NOE_TEST_CHROMIUM`, else `chromium` on `PATH`; `None` when there is
    /// none.
    pub fn find() -> Option<PathBuf> {
        if let Some(path) = std::env::var_os("NOE_TEST_CHROMIUM") {
            return Some(PathBuf::from(path));
        }
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .map(|dir| dir.join("chromium"))
            .find(|candidate| candidate.is_file())
    }

    /// Starts the browser (`binary`) with an empty page, `width` × `height` pixels.
    pub fn start(binary: &Path, width: u32, height: u32) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let to_path = dir.path().join("to-browser");
        let from_path = dir.path().join("from-browser");
        for fifo in [&to_path, &from_path] {
            let made = Command::new("mkfifo").arg(fifo).status()?;
            if !made.success() {
                bail!("mkfifo {} failed", fifo.display());
            }
        }
        let profile = dir.path().join("profile");
        let args: Vec<String> = vec![
            "--headless".into(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-extensions".into(),
            "--disable-default-apps".into(),
            "--no-first-run".into(),
            "--no-default-browser-check".into(),
            "--hide-scrollbars".into(),
            "--mute-audio".into(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", profile.display()),
            "--remote-debugging-pipe".into(),
            "about:blank".into(),
        ];
        // The shell opens the FIFOs as fds 3 and 4, then becomes the browser.
        let script = r#"exec "$0" "$@" 3<"$NOE_FIFO_IN" 4>"$NOE_FIFO_OUT""#;
        let isolated = unshare_works();
        let mut command = if isolated {
            let mut c = Command::new("unshare");
            c.args(["-rn", "sh", "-c", script]);
            c
        } else {
            let mut c = Command::new("sh");
            c.args(["-c", script]);
            c
        };
        let mut child = command
            .arg(binary)
            .args(&args)
            .env("NOE_FIFO_IN", &to_path)
            .env("NOE_FIFO_OUT", &from_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        // Opened for reading and writing, a FIFO does not wait for its other end (Linux): a
        // browser that never starts makes the first command time out, not this open hang.
        let open = |path: &Path| {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)
        };
        let (to_browser, from_browser) = match (open(&to_path), open(&from_path)) {
            (Ok(to), Ok(from)) => (to, from),
            (Err(error), _) | (_, Err(error)) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(error.into());
            }
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(from_browser);
            loop {
                let mut message = Vec::new();
                match reader
                    .by_ref()
                    .take(u64::try_from(MAX_MESSAGE).unwrap_or(u64::MAX))
                    .read_until(0, &mut message)
                {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                if message.last() == Some(&0) {
                    message.pop();
                }
                let Ok(value) = serde_json::from_slice::<Value>(&message) else {
                    continue;
                };
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        let mut browser = Self {
            child,
            to_browser,
            from_browser: rx,
            next_id: 0,
            session: String::new(),
            dialogs: 0,
            script_disabled: false,
            _dir: dir,
        };
        let target = browser.command("Target.createTarget", json!({"url": "about:blank"}))?;
        let target_id = target["targetId"]
            .as_str()
            .ok_or_else(|| anyhow!("no targetId: {target}"))?
            .to_owned();
        let attached = browser.command(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
        )?;
        browser.session = attached["sessionId"]
            .as_str()
            .ok_or_else(|| anyhow!("no sessionId: {attached}"))?
            .to_owned();
        browser.command("Page.enable", json!({}))?;
        browser.command("Runtime.enable", json!({}))?;
        browser.command(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        )?;
        Ok(browser)
    }

    /// Whether the browser runs in a network namespace of its own.
    pub fn isolated() -> bool {
        unshare_works()
    }

    /// Sends a command (to the page once attached) and waits for its answer; events met on
    /// the way are handled (a JavaScript dialog is counted and dismissed).
    fn command(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.next_id = self.next_id.saturating_add(1);
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            message["sessionId"] = Value::String(self.session.clone());
        }
        let mut bytes = serde_json::to_vec(&message)?;
        bytes.push(0);
        self.to_browser.write_all(&bytes)?;
        self.to_browser.flush()?;
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        loop {
            let message = self.next_message(deadline, method)?;
            if message["id"].as_u64() == Some(id) {
                if let Some(error) = message.get("error") {
                    bail!("{method}: {error}");
                }
                return Ok(message["result"].clone());
            }
        }
    }

    /// The next message, an event handled on the way.
    fn next_message(&mut self, deadline: Instant, waiting: &str) -> anyhow::Result<Value> {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = self
            .from_browser
            .recv_timeout(left)
            .map_err(|_| anyhow!("no answer to {waiting} within {COMMAND_TIMEOUT:?}"))?;
        if message["method"] == "Page.javascriptDialogOpening" {
            self.dialogs = self.dialogs.saturating_add(1);
            let mut answer = json!({"id": 0, "method": "Page.handleJavaScriptDialog",
                "params": {"accept": false}});
            answer["sessionId"] = Value::String(self.session.clone());
            let mut bytes = serde_json::to_vec(&answer)?;
            bytes.push(0);
            self.to_browser.write_all(&bytes)?;
        }
        Ok(message)
    }

    /// Opens `url` and waits for its `load` event and two frames after it; returns how long
    /// that took.
    pub fn open(&mut self, url: &str) -> anyhow::Result<Duration> {
        let started = Instant::now();
        self.command("Page.navigate", json!({"url": url}))?;
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        loop {
            let message = self.next_message(deadline, "Page.loadEventFired")?;
            if message["method"] == "Page.loadEventFired" {
                break;
            }
        }
        if !self.script_disabled {
            self.eval(
                "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))",
            )?;
        }
        Ok(started.elapsed())
    }

    /// The document as the browser holds it now, serialized (works without script too).
    pub fn html(&mut self) -> anyhow::Result<String> {
        let document = self.command("DOM.getDocument", json!({"depth": 0}))?;
        let node = document["root"]["nodeId"].clone();
        let outer = self.command("DOM.getOuterHTML", json!({"nodeId": node}))?;
        outer["outerHTML"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("no outerHTML"))
    }

    /// The value of `expression` evaluated in the page (a promise awaited), as JSON.
    pub fn eval(&mut self, expression: &str) -> anyhow::Result<Value> {
        let result = self.command(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        )?;
        if let Some(exception) = result.get("exceptionDetails") {
            bail!("{expression}: {exception}");
        }
        Ok(result["result"]["value"].clone())
    }

    /// Presses `key` (`Enter`, `Tab`, ...) in the focused element, as a keyboard would.
    pub fn press(&mut self, key: &str) -> anyhow::Result<()> {
        let (code, text) = match key {
            "Enter" => (13, "\r"),
            "Tab" => (9, ""),
            " " => (32, " "),
            _ => (0, ""),
        };
        for kind in ["keyDown", "keyUp"] {
            let mut params = json!({"type": kind, "key": key, "windowsVirtualKeyCode": code});
            if kind == "keyDown" && !text.is_empty() {
                params["text"] = Value::String(text.to_owned());
            }
            self.command("Input.dispatchKeyEvent", params)?;
        }
        Ok(())
    }

    /// Types `text` into the focused element, character by character.
    pub fn type_text(&mut self, text: &str) -> anyhow::Result<()> {
        self.command("Input.insertText", json!({"text": text}))?;
        Ok(())
    }

    /// A PNG of the whole page (beyond the viewport), written to `path`.
    pub fn screenshot(&mut self, path: &Path) -> anyhow::Result<()> {
        let shot = self.command(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true}),
        )?;
        let data = shot["data"]
            .as_str()
            .ok_or_else(|| anyhow!("no screenshot data"))?;
        let png = base64::engine::general_purpose::STANDARD.decode(data)?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, png)?;
        Ok(())
    }

    /// Pages opened from now on run no script (what a reader who turned it off sees); only
    /// [`Browser::html`] reads them then ([`Browser::eval`] needs script).
    pub fn disable_script(&mut self) -> anyhow::Result<()> {
        self.command(
            "Emulation.setScriptExecutionDisabled",
            json!({"value": true}),
        )?;
        self.script_disabled = true;
        Ok(())
    }

    /// The page is laid out for print (`@media print`).
    pub fn print_media(&mut self) -> anyhow::Result<()> {
        self.command("Emulation.setEmulatedMedia", json!({"media": "print"}))?;
        Ok(())
    }

    /// JavaScript dialogs (`alert`, `confirm`, `prompt`) the page opened so far.
    pub fn dialogs(&self) -> usize {
        self.dialogs
    }
}

impl Drop for Browser {
    /// Asks the browser to close (its helper processes go with it), then kills it if it has
    /// not within a few seconds.
    fn drop(&mut self) {
        let close = b"{\"id\":999999,\"method\":\"Browser.close\",\"params\":{}}\0";
        let _ = self.to_browser.write_all(close);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `unshare -rn` may be used here (a user and network namespace).
fn unshare_works() -> bool {
    Command::new("unshare")
        .args(["-rn", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
