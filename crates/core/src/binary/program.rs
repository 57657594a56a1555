//! The program a container runs, from the image config (`Entrypoint` + `Cmd`, the first word;
//! relative to `WorkingDir`; a bare name through the config's `PATH`, Docker's default when it
//! has none), and the interpreter a `#!` script names.

use serde::Deserialize;

use super::path::{self, MAX_PATH_LEN};

/// The `PATH` Docker and containerd give a container whose image sets none.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// `PATH` directories tried; further ones are ignored.
pub const MAX_PATH_DIRS: usize = 64;

/// Bytes of a `#!` line read, as the kernel reads them (`BINPRM_BUF_SIZE`).
pub const SHEBANG_LEN: usize = 256;

/// What an image config says a container runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Run {
    /// The first word of `Entrypoint`, else of `Cmd`.
    pub first_word: Option<String>,
    /// `WorkingDir`, absolute (`/` when unset).
    pub working_dir: String,
    /// The last `PATH=` of `Env`, if any.
    pub path: Option<String>,
}

#[derive(Deserialize)]
struct ConfigFile {
    #[serde(default)]
    config: Option<RunFields>,
}

#[derive(Default, Deserialize)]
struct RunFields {
    #[serde(default, rename = "Entrypoint")]
    entrypoint: Option<Vec<String>>,
    #[serde(default, rename = "Cmd")]
    cmd: Option<Vec<String>>,
    #[serde(default, rename = "WorkingDir")]
    working_dir: Option<String>,
    #[serde(default, rename = "Env")]
    env: Option<Vec<String>>,
}

impl Run {
    /// Reads an image config's `config` object. Errors say what is not JSON of that shape.
    pub fn from_config(body: &[u8]) -> Result<Self, String> {
        let file: ConfigFile =
            serde_json::from_slice(body).map_err(|e| format!("not a JSON image config ({e})"))?;
        let fields = file.config.unwrap_or_default();
        let first = |words: &Option<Vec<String>>| {
            words
                .as_ref()
                .and_then(|w| w.first())
                .filter(|w| !w.is_empty())
                .cloned()
        };
        let first_word = first(&fields.entrypoint).or_else(|| {
            // An image's Cmd runs only when it has no Entrypoint (else it is its arguments).
            if fields.entrypoint.as_ref().is_some_and(|e| !e.is_empty()) {
                None
            } else {
                first(&fields.cmd)
            }
        });
        let working_dir = fields.working_dir.unwrap_or_default();
        let working_dir = path::normalize("/", &working_dir).unwrap_or_else(|_| "/".to_owned());
        let path = fields
            .env
            .unwrap_or_default()
            .into_iter()
            .rev()
            .find_map(|e| {
                e.strip_prefix("PATH=")
                    .map(|p| p.chars().take(MAX_PATH_LEN * 8).collect())
            });
        Ok(Self {
            first_word,
            working_dir,
            path,
        })
    }

    /// Where the program `word` is looked for: one path when it holds a `/`, else each
    /// directory of `PATH` in order.
    pub fn candidates(&self, word: &str) -> Result<Vec<String>, path::TooLong> {
        if word.contains('/') {
            return Ok(vec![path::normalize(&self.working_dir, word)?]);
        }
        let search = self.path.as_deref().unwrap_or(DEFAULT_PATH);
        let mut found: Vec<String> = Vec::new();
        for dir in search.split(':').take(MAX_PATH_DIRS) {
            // An empty entry is the working directory, as a shell reads it.
            let dir = path::normalize(&self.working_dir, dir)?;
            let candidate = path::join(&dir, word)?;
            if !found.contains(&candidate) {
                found.push(candidate);
            }
        }
        Ok(found)
    }
}

/// A `#!` line: the interpreter and its one optional argument (the kernel passes the rest of
/// the line as a single argument).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shebang {
    pub interpreter: String,
    pub argument: Option<String>,
}

impl Shebang {
    /// The `#!` line of a file's first bytes, `None` when it has none or names no interpreter.
    pub fn parse(head: &[u8]) -> Option<Self> {
        let rest = head.strip_prefix(b"#!")?;
        let line = rest
            .iter()
            .position(|&b| b == b'\n')
            .map_or(rest, |end| &rest[..end]);
        let line = String::from_utf8_lossy(&line[..line.len().min(SHEBANG_LEN)]);
        let line = line.trim_matches(|c: char| c == ' ' || c == '\t' || c == '\r');
        let (interpreter, argument) = match line.find([' ', '\t']) {
            Some(at) => (&line[..at], line[at..].trim_matches([' ', '\t', '\r'])),
            None => (line, ""),
        };
        if interpreter.is_empty() {
            return None;
        }
        Some(Self {
            interpreter: interpreter.to_owned(),
            argument: (!argument.is_empty()).then(|| argument.to_owned()),
        })
    }

    /// The program that runs the script: the interpreter, or with `/usr/bin/env NAME` the
    /// NAME `env` looks up (options and `VAR=value` words skipped). `None` when `env` is given
    /// no name.
    pub fn program(&self) -> Option<&str> {
        let is_env = self.interpreter.rsplit('/').next() == Some("env");
        if !is_env {
            return Some(&self.interpreter);
        }
        self.argument
            .as_deref()?
            .split_whitespace()
            .find(|word| !word.starts_with('-') && !word.contains('='))
    }

    /// The line as compact text for the index (`interpreter argument`).
    pub(crate) fn to_line(&self) -> String {
        match &self.argument {
            Some(argument) => format!("{} {argument}", self.interpreter),
            None => self.interpreter.clone(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
