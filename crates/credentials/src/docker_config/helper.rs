//! Docker credential helpers (`docker-credential-NAME get`), found in an injectable search path,
//! run with a timeout and an output cap, their answers cached briefly.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::basic;
use crate::exec::{self, ExecError, ExecLimits};
use crate::Credential;

/// How long a helper's answer (or lack of one) is reused.
const CACHE_TTL: Duration = Duration::from_secs(30);

/// Why a helper gave no credential. Never carries its output.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HelperError {
    #[error("invalid credential helper name {name:?}")]
    InvalidName { name: String },
    #[error("docker-credential-{name} not found in the helper search path")]
    NotFound { name: String },
    #[error("docker-credential-{name} failed")]
    Exec {
        name: String,
        #[source]
        source: ExecError,
    },
    #[error("docker-credential-{name} answered something that is not its JSON reply")]
    BadOutput { name: String },
}

#[derive(Deserialize)]
struct HelperReply {
    #[serde(rename = "Username", default)]
    username: String,
    #[serde(rename = "Secret", default)]
    secret: String,
}

/// Runs docker credential helpers found in a list of directories.
#[derive(Clone, derive_more::Debug)]
#[debug("CredentialHelpers {{ dirs: {dirs:?}, limits: {limits:?}, .. }}")]
pub struct CredentialHelpers {
    dirs: Arc<Vec<PathBuf>>,
    limits: ExecLimits,
    cache: moka::future::Cache<(String, String), Option<Credential>>,
}

impl CredentialHelpers {
    /// Helpers are looked up in `dirs`, in order (tests pass a temp dir instead of mutating `PATH`).
    pub fn new(dirs: Vec<PathBuf>, limits: ExecLimits) -> Self {
        Self {
            dirs: Arc::new(dirs),
            limits,
            cache: moka::future::Cache::builder()
                .max_capacity(1024)
                .time_to_live(CACHE_TTL)
                .build(),
        }
    }

    /// The directories of `$PATH`.
    pub fn dirs_from_env() -> Vec<PathBuf> {
        std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).collect())
            .unwrap_or_default()
    }

    fn find(&self, name: &str) -> Result<PathBuf, HelperError> {
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && !name.starts_with('.');
        if !valid {
            return Err(HelperError::InvalidName {
                name: name.to_owned(),
            });
        }
        let file = format!("docker-credential-{name}");
        self.dirs
            .iter()
            .map(|dir| dir.join(&file))
            .find(|path| path.is_file())
            .ok_or_else(|| HelperError::NotFound {
                name: name.to_owned(),
            })
    }

    /// Ask helper `name` for the credential of `server` (a registry host, or
    /// `https://index.docker.io/v1/`). `Ok(None)`: the helper has none.
    pub async fn get(&self, name: &str, server: &str) -> Result<Option<Credential>, HelperError> {
        let key = (name.to_owned(), server.to_owned());
        if let Some(hit) = self.cache.get(&key).await {
            return Ok(hit);
        }
        let result = self.run(name, server).await;
        // Cache answers and failures alike: a broken helper must not be run per admission.
        let cached = result.as_ref().ok().cloned().flatten();
        self.cache.insert(key, cached).await;
        result
    }

    async fn run(&self, name: &str, server: &str) -> Result<Option<Credential>, HelperError> {
        let program = self.find(name)?;
        let output = match exec::run(
            &program,
            &["get".to_owned()],
            &[],
            server.as_bytes(),
            self.limits,
        )
        .await
        {
            Ok(output) => output,
            // The protocol: "credentials not found in native keychain" on stdout, exit 1.
            Err(ExecError::Failed { stdout, .. })
                if String::from_utf8_lossy(&stdout.0).contains("credentials not found") =>
            {
                return Ok(None)
            }
            Err(source) => {
                return Err(HelperError::Exec {
                    name: name.to_owned(),
                    source,
                })
            }
        };
        let reply: HelperReply =
            serde_json::from_slice(&output).map_err(|_| HelperError::BadOutput {
                name: name.to_owned(),
            })?;
        if reply.secret.is_empty() {
            return Ok(None);
        }
        Ok(Some(basic(&reply.username, &reply.secret)))
    }
}
