//! kubelet credential provider plugins (`ProviderSource` running a fake plugin that counts its
//! runs, `parse_response`, `request_body`) and `CredentialProviderConfig` reading
//! (`parse_provider_config`).

use std::collections::BTreeMap;
use std::path::Path;

use noe_credentials::exec::ExecLimits;
use noe_credentials::provider::{
    parse_provider_config, parse_response, request_body, CacheKeyType, ProviderSource,
};
use noe_credentials::Credential;
use serde_json::{json, Value};

use super::table::{basics, cases, expected_basics, load, same, text, Tally};

const PLUGIN: &str = "conformance-plugin";

pub async fn plugin(dir: &Path) -> Tally {
    let table = load(dir, "kubelet-plugin.json");
    let mut tally = Tally::new("kubelet-plugin");
    for case in cases(&table, "cases") {
        let outcome = run_case(case).await;
        tally.check(
            format!("{}: {}", text(case, "test"), text(case, "name")),
            outcome,
        );
    }
    for case in cases(&table, "decode_cases") {
        tally.check(
            format!("{}: {}", text(case, "test"), text(case, "name")),
            decode(case),
        );
    }
    for case in cases(&table, "encode_cases") {
        let body = request_body(text(case, "api_version"), text(case, "image"));
        let got: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let want: Value = serde_json::from_str(text(case, "expect")).unwrap_or(Value::Null);
        tally.check(
            format!("{}: {}", text(case, "test"), text(case, "name")),
            same("request", got, want),
        );
    }
    for case in cases(&table, "env_cases") {
        let outcome = env_case(case).await;
        tally.check(
            format!("{}: {}", text(case, "test"), text(case, "name")),
            outcome,
        );
    }
    tally
}

/// A provider config for the fake plugin.
fn provider_config(match_images: &Value, env: &[(String, String)]) -> String {
    let env: Vec<Value> = env
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    json!({
        "kind": "CredentialProviderConfig",
        "apiVersion": "kubelet.config.k8s.io/v1",
        "providers": [{
            "name": PLUGIN,
            "matchImages": match_images,
            "defaultCacheDuration": "1m",
            "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
            "env": env,
        }],
    })
    .to_string()
}

/// Writes the plugin: it counts its runs in `runs`, records `record` variables in `seen`, and
/// answers `response`.
fn write_plugin(bin: &Path, response: &Value, record: &[&str]) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let mut response = response.clone();
    response["kind"] = json!("CredentialProviderResponse");
    response["apiVersion"] = json!("credentialprovider.kubelet.k8s.io/v1");
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let runs = bin.join("runs");
    let seen = bin.join("seen");
    let mut script = format!(
        "#!/bin/sh\ncat >/dev/null\necho run >> {}\n: > {}\n",
        quote(&runs.display().to_string()),
        quote(&seen.display().to_string()),
    );
    for name in record {
        script.push_str(&format!(
            "printf '%s=%s\\n' {name} \"${{{name}-}}\" >> {}\n",
            quote(&seen.display().to_string())
        ));
    }
    script.push_str(&format!("printf '%s' {}\n", quote(&response.to_string())));
    let path = bin.join(PLUGIN);
    std::fs::write(&path, script).map_err(|e| e.to_string())?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| e.to_string())
}

fn source(bin: &Path, config: &str) -> Result<ProviderSource, String> {
    let config = parse_provider_config(config).map_err(|e| format!("config refused: {e}"))?;
    Ok(ProviderSource::new(
        bin.to_owned(),
        config,
        ExecLimits::default(),
    ))
}

fn runs(bin: &Path) -> usize {
    std::fs::read_to_string(bin.join("runs"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

async fn run_case(case: &Value) -> Result<(), String> {
    let bin = tempfile::tempdir().map_err(|e| e.to_string())?;
    write_plugin(bin.path(), &case["response"], &[])?;
    let source = source(bin.path(), &provider_config(&case["match_images"], &[]))?;
    let mut last = Vec::new();
    for image in cases(case, "images").iter().filter_map(Value::as_str) {
        last = source.candidates(image).await;
    }
    same(
        "credentials",
        basics(&last),
        expected_basics(&case["expect"]),
    )?;
    same(
        "plugin runs",
        runs(bin.path()),
        usize::try_from(case["expect_execs"].as_u64().unwrap_or(0)).unwrap_or(0),
    )
}

fn decode(case: &Value) -> Result<(), String> {
    let expect = &case["expect"];
    match (
        parse_response(text(case, "data").as_bytes()),
        expect["ok"] == true,
    ) {
        (Ok(response), true) => {
            let key = match response.cache_key_type {
                CacheKeyType::Image => "Image",
                CacheKeyType::Registry => "Registry",
                CacheKeyType::Global => "Global",
            };
            same("cacheKeyType", key, text(expect, "cacheKeyType"))?;
            same(
                "cacheDuration",
                response.cache_duration.map(|d| d.as_secs()),
                expect["cacheDurationSecs"].as_u64(),
            )?;
            let auth: BTreeMap<String, (String, String)> = response
                .auth
                .iter()
                .map(|(pattern, credential)| match credential {
                    Credential::Basic { username, password } => {
                        (pattern.clone(), (username.clone(), password.clone()))
                    }
                    _ => (pattern.clone(), ("<token>".to_owned(), String::new())),
                })
                .collect();
            let want: BTreeMap<String, (String, String)> = expect["auth"]
                .as_object()
                .map(|map| {
                    map.iter()
                        .map(|(k, v)| {
                            (
                                k.clone(),
                                (
                                    text(v, "username").to_owned(),
                                    text(v, "password").to_owned(),
                                ),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            same("auth", auth, want)
        }
        (Err(_), false) => Ok(()),
        (Ok(_), false) => Err("accepted, upstream refuses".to_owned()),
        (Err(error), true) => Err(format!("refused: {error}")),
    }
}

/// The plugin sees the environment of the process running it (the crate has no way to replace
/// it, so upstream's `system` map is this test's own environment) with the provider's `env`
/// added on top.
async fn env_case(case: &Value) -> Result<(), String> {
    let bin = tempfile::tempdir().map_err(|e| e.to_string())?;
    let plugin_env: Vec<(String, String)> = cases(case, "plugin_env")
        .iter()
        .map(|pair| {
            (
                pair[0].as_str().unwrap_or_default().to_owned(),
                pair[1].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let expect_seen = case["expect_seen"].as_object().cloned().unwrap_or_default();
    let names: Vec<&str> = expect_seen.keys().map(String::as_str).collect();
    let response = json!({
        "cacheKeyType": "Image",
        "cacheDuration": "0s",
        "auth": {"env.registry.io": {"username": "u", "password": "p"}},
    });
    write_plugin(bin.path(), &response, &names)?;
    let source = source(
        bin.path(),
        &provider_config(&json!(["env.registry.io"]), &plugin_env),
    )?;
    let candidates = source.candidates("env.registry.io/app").await;
    same("credentials", candidates.len(), 1)?;
    let seen: BTreeMap<String, String> = std::fs::read_to_string(bin.path().join("seen"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let want: BTreeMap<String, String> = expect_seen
        .iter()
        .map(|(name, upstream)| {
            let value = match plugin_env.iter().rev().find(|(k, _)| k == name) {
                Some(_) => upstream.as_str().unwrap_or_default().to_owned(),
                None => std::env::var(name).unwrap_or_default(),
            };
            (name.clone(), value)
        })
        .collect();
    same("environment", seen, want)
}

pub fn config(dir: &Path) -> Tally {
    let table = load(dir, "kubelet-provider-config.json");
    let mut tally = Tally::new("kubelet-provider-config");
    for case in cases(&table, "cases") {
        let parsed = parse_provider_config(text(case, "text"));
        let outcome = if let Some(usable) = case["expect_usable"].as_bool() {
            same(
                "usable",
                parsed.as_ref().is_ok_and(|c| !c.providers.is_empty()),
                usable,
            )
        } else {
            match (&parsed, case["expect"].as_array()) {
                (Ok(config), None) if config.providers.is_empty() => Ok(()),
                (Err(_), None) => Ok(()),
                (Ok(_), None) => Err("accepted, upstream refuses".to_owned()),
                (Err(error), Some(_)) => Err(format!("refused: {error}")),
                (Ok(config), Some(want)) => {
                    let got: Vec<(String, Vec<String>, u64)> = config
                        .providers
                        .iter()
                        .map(|p| {
                            (
                                p.name.clone(),
                                p.match_images.clone(),
                                p.default_cache_duration.as_secs(),
                            )
                        })
                        .collect();
                    let want: Vec<(String, Vec<String>, u64)> = want
                        .iter()
                        .map(|p| {
                            (
                                text(p, "name").to_owned(),
                                cases(p, "matchImages")
                                    .iter()
                                    .filter_map(Value::as_str)
                                    .map(str::to_owned)
                                    .collect(),
                                p["defaultCacheDurationSecs"].as_u64().unwrap_or(0),
                            )
                        })
                        .collect();
                    same("providers", got, want)
                }
            }
        };
        tally.check(
            format!("{}: {}", text(case, "test"), text(case, "name")),
            outcome,
        );
    }
    tally
}
