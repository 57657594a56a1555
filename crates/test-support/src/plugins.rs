//! Kubelet credential provider plugins as real executables: shell scripts in a temporary `bin`
//! directory speaking the exec protocol, each logging its runs beside it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A temporary directory of plugins; removed on drop.
#[derive(Debug)]
pub struct ProviderPlugins {
    dir: tempfile::TempDir,
}

impl ProviderPlugins {
    pub fn new() -> anyhow::Result<Self> {
        Ok(Self {
            dir: tempfile::tempdir()?,
        })
    }

    /// The temporary directory (configuration files may go there too).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The directory the plugins are in (`--image-credential-provider-bin-dir`).
    pub fn bin(&self) -> PathBuf {
        self.dir.path().join("bin")
    }

    /// The log a plugin (or anything else) named `name` writes.
    pub fn log(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.log"))
    }

    /// A plugin that logs its request (one line per run) and prints `response`, where `$API` is
    /// replaced by the request's apiVersion and `$USER` by its first argument (single quotes
    /// stand for double quotes).
    pub fn plugin(&self, name: &str, response: &str) -> anyhow::Result<()> {
        let body = format!(
            r#"req=$(cat)
printf '%s\n' "$req" >> "{log}"
API=$(printf '%s' "$req" | sed -n 's/.*"apiVersion":"\([^"]*\)".*/\1/p')
USER="$1"
cat <<RESPONSE
{response}
RESPONSE"#,
            log = self.log(name).display(),
            response = response.replace('\'', "\""),
        );
        self.raw_plugin(name, &body)
    }

    /// A plugin running `body` with `/bin/sh`.
    pub fn raw_plugin(&self, name: &str, body: &str) -> anyhow::Result<()> {
        let bin = self.bin();
        std::fs::create_dir_all(&bin)?;
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n"))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        Ok(())
    }

    /// The requests a [`ProviderPlugins::plugin`] named `name` logged, one per run.
    pub fn runs(&self, name: &str) -> Vec<serde_json::Value> {
        read_lines(&self.log(name))
            .iter()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// How many lines the log `name` holds.
    pub fn lines(&self, name: &str) -> usize {
        read_lines(&self.log(name)).len()
    }
}

fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A `CredentialProviderConfig` (kubelet.config.k8s.io/v1) with one provider per
/// `(name, matchImage, defaultCacheDuration, exec apiVersion suffix)`, each run with the
/// argument `user-<name>` and the environment `PLUGIN_MODE=test`.
pub fn provider_config(providers: &[(&str, &str, &str, &str)]) -> String {
    let mut yaml = String::from(
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n",
    );
    for (name, pattern, duration, version) in providers {
        yaml.push_str(&format!(
            "  - name: {name}\n    matchImages: [\"{pattern}\"]\n    defaultCacheDuration: \"{duration}\"\n    apiVersion: credentialprovider.kubelet.k8s.io/{version}\n    args: [user-{name}]\n    env: [{{name: PLUGIN_MODE, value: test}}]\n"
        ));
    }
    yaml
}

/// A `CredentialProviderResponse` for [`ProviderPlugins::plugin`]: `$USER` with the password
/// `pw-<key>` for each of `auth_keys`.
pub fn provider_response(key_type: &str, duration: Option<&str>, auth_keys: &[&str]) -> String {
    let auth: Vec<String> = auth_keys
        .iter()
        .map(|k| format!("'{k}':{{'username':'$USER','password':'pw-{k}'}}"))
        .collect();
    let duration = duration
        .map(|d| format!(",'cacheDuration':'{d}'"))
        .unwrap_or_default();
    format!(
        "{{'apiVersion':'$API','kind':'CredentialProviderResponse','cacheKeyType':'{key_type}'{duration},'auth':{{{}}}}}",
        auth.join(",")
    )
}
