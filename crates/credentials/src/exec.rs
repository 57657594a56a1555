//! Running credential helpers and kubelet credential provider plugins: a timeout, a cap on what we
//! read, no shell, and nothing of their output in our errors.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// Bounds on one execution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecLimits {
    /// The whole run: spawn, stdin, stdout, exit.
    pub timeout: Duration,
    /// Most bytes read from stdout; more is an error.
    pub max_output: usize,
}

impl Default for ExecLimits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            max_output: 1 << 20,
        }
    }
}

/// Why an execution gave no usable output. Never carries the program's output.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    #[error("could not start {program}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{program} did not finish within {timeout:?}")]
    Timeout { program: String, timeout: Duration },
    #[error("{program} wrote more than {max_output} bytes")]
    OutputTooLarge { program: String, max_output: usize },
    #[error("{program} exited with {status}")]
    Failed {
        program: String,
        status: std::process::ExitStatus,
        /// stdout, for protocols that report "not found" there (docker credential helpers).
        /// Neither in the message nor in `Debug`.
        stdout: Output,
    },
    #[error("i/o error talking to {program}")]
    Io {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

/// A program's output, which may hold secrets: `Debug` prints only its length.
#[derive(Clone, PartialEq, Eq)]
pub struct Output(pub Vec<u8>);

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{} bytes redacted>", self.0.len())
    }
}

/// Run `program args...` with `env` added to our environment, `stdin` written to its standard
/// input, and return its standard output. The child is killed when the timeout expires.
pub async fn run(
    program: &Path,
    args: &[String],
    env: &[(String, String)],
    stdin: &[u8],
    limits: ExecLimits,
) -> Result<Vec<u8>, ExecError> {
    let name = program.display().to_string();
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let mut child = command.spawn().map_err(|source| ExecError::Spawn {
        program: name.clone(),
        source,
    })?;
    let io_error = |source| ExecError::Io {
        program: name.clone(),
        source,
    };
    let work = async {
        let mut child_stdin = child.stdin.take();
        let mut child_stdout = child.stdout.take();
        let write = async {
            if let Some(mut pipe) = child_stdin.take() {
                // A program that does not read its input closes the pipe: not our problem.
                match pipe.write_all(stdin).await {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                    Err(e) => return Err(e),
                }
                drop(pipe);
            }
            Ok(())
        };
        let read = async {
            let mut out = Vec::new();
            if let Some(pipe) = child_stdout.take() {
                pipe.take(limits.max_output as u64 + 1)
                    .read_to_end(&mut out)
                    .await?;
            }
            Ok::<_, std::io::Error>(out)
        };
        let (written, out) = tokio::join!(write, read);
        written.map_err(io_error)?;
        let out = out.map_err(io_error)?;
        if out.len() > limits.max_output {
            return Err(ExecError::OutputTooLarge {
                program: name.clone(),
                max_output: limits.max_output,
            });
        }
        let status = child.wait().await.map_err(io_error)?;
        if !status.success() {
            return Err(ExecError::Failed {
                program: name.clone(),
                status,
                stdout: Output(out),
            });
        }
        Ok(out)
    };
    match tokio::time::timeout(limits.timeout, work).await {
        Ok(result) => result,
        Err(_) => Err(ExecError::Timeout {
            program: name.clone(),
            timeout: limits.timeout,
        }),
    }
    // `child` is dropped here: killed if still running.
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[tokio::test]
    async fn echoes_stdin_with_args_and_env() {
        let dir = tempfile::tempdir().unwrap();
        let prog = script(dir.path(), "p", r#"printf '%s %s ' "$1" "$FOO"; cat"#);
        let out = run(
            &prog,
            &["arg".into()],
            &[("FOO".into(), "bar".into())],
            b"input",
            ExecLimits::default(),
        )
        .await
        .unwrap();
        assert_eq!(out, b"arg bar input");
    }

    #[tokio::test]
    async fn times_out_and_kills() {
        let dir = tempfile::tempdir().unwrap();
        let prog = script(dir.path(), "hang", "exec sleep 30");
        let started = std::time::Instant::now();
        let limits = ExecLimits {
            timeout: Duration::from_millis(300),
            max_output: 1024,
        };
        let err = run(&prog, &[], &[], b"", limits).await.unwrap_err();
        assert!(matches!(err, ExecError::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn caps_output() {
        let dir = tempfile::tempdir().unwrap();
        let prog = script(dir.path(), "big", "head -c 5000 /dev/zero");
        let limits = ExecLimits {
            timeout: Duration::from_secs(5),
            max_output: 1000,
        };
        let err = run(&prog, &[], &[], b"", limits).await.unwrap_err();
        assert!(matches!(err, ExecError::OutputTooLarge { .. }), "{err}");
    }

    #[tokio::test]
    async fn reports_failure_without_output_in_message() {
        let dir = tempfile::tempdir().unwrap();
        let prog = script(dir.path(), "fail", "echo s3cret; exit 3");
        let err = run(&prog, &[], &[], b"", ExecLimits::default())
            .await
            .unwrap_err();
        assert!(!err.to_string().contains("s3cret"));
        assert!(!format!("{err:?}").contains("s3cret"));
        match err {
            ExecError::Failed { stdout, .. } => assert_eq!(stdout.0, b"s3cret\n"),
            other => panic!("{other}"),
        }
        let missing = run(
            &dir.path().join("absent"),
            &[],
            &[],
            b"",
            ExecLimits::default(),
        )
        .await
        .unwrap_err();
        assert!(matches!(missing, ExecError::Spawn { .. }));
    }
}
