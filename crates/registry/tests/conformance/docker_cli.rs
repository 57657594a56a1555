//! docker/cli: `config.json` credential selection (`auths`, `credsStore`, `credHelpers`, with
//! the mocked native stores replayed as `docker-credential-NAME` scripts) and
//! `ConvertToHostname` (mapped to `matching::normalize_config_key`).

use std::path::Path;

use noe_credentials::docker_config::{parse_docker_config, CredentialHelpers, DockerConfigSource};
use noe_credentials::exec::ExecLimits;
use noe_credentials::matching::normalize_config_key;
use serde_json::Value;

use super::table::{basics, cases, expected_basics, id, load, same, text, Tally};

pub async fn config(dir: &Path) -> Tally {
    let table = load(dir, "docker-cli-config.json");
    let mut tally = Tally::new("docker-cli-config");
    for case in cases(&table, "cases") {
        let name = case["name"].as_str().unwrap_or_else(|| text(case, "image"));
        let outcome = config_case(case).await;
        tally.check(id(text(case, "test"), name), outcome);
    }
    tally
}

async fn config_case(case: &Value) -> Result<(), String> {
    let helpers = tempfile::tempdir().map_err(|e| e.to_string())?;
    if let Some(stores) = case["helpers"].as_object() {
        for (name, store) in stores {
            write_helper(helpers.path(), name, store)?;
        }
    }
    let source = DockerConfigSource::new(
        Vec::new(),
        CredentialHelpers::new(vec![helpers.path().to_owned()], ExecLimits::default()),
    );
    let config = parse_docker_config(text(case, "config").as_bytes())
        .map_err(|e| format!("refused: {e}"))?;
    let candidates = source
        .config_candidates(&config, text(case, "image"), "conformance")
        .await;
    same(
        "credentials",
        basics(&candidates),
        expected_basics(&case["expect"]),
    )
}

/// `docker-credential-NAME`: answers `get` from `store` (`{server: {username, password}}`), or
/// fails when `store` is `"error"`.
fn write_helper(dir: &Path, name: &str, store: &Value) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let mut script = String::from("#!/bin/sh\nread -r server\n");
    match store.as_object() {
        Some(entries) => {
            script.push_str("case \"$server\" in\n");
            for (server, entry) in entries {
                let reply = serde_json::json!({
                    "ServerURL": server,
                    "Username": entry["username"],
                    "Secret": entry["password"],
                });
                script.push_str(&format!(
                    "  {}) printf '%s' {} ;;\n",
                    shell_quote(server),
                    shell_quote(&reply.to_string())
                ));
            }
            script.push_str(
                "  *) echo 'credentials not found in native keychain'; exit 1 ;;\nesac\n",
            );
        }
        None => script.push_str("echo 'helper broken' >&2\nexit 2\n"),
    }
    let path = dir.join(format!("docker-credential-{name}"));
    std::fs::write(&path, script).map_err(|e| e.to_string())?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| e.to_string())
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

pub fn convert_to_hostname(dir: &Path) -> Tally {
    let table = load(dir, "docker-cli-convert-to-hostname.json");
    let mut tally = Tally::new("docker-cli-convert-to-hostname");
    for case in cases(&table, "cases") {
        let input = text(case, "input");
        let outcome = same(
            "host",
            normalize_config_key(input).as_str(),
            text(case, "expect"),
        );
        tally.check(id(text(case, "test"), input), outcome);
    }
    tally
}
