//! containerd `hosts.toml`: `HostsConfig::parse`, `HostsConfig::default_for` and `load_hosts`
//! (docker-style `certs.d` directories).

use std::collections::BTreeMap;
use std::path::Path;

use noe_registry::hosts::{load_hosts, Endpoint, HostsConfig};
use serde_json::Value;

use super::table::{cases, load, same, text, Tally};

pub async fn hosts(dir: &Path) -> Tally {
    let table = load(dir, "containerd-hosts.json");
    let mut tally = Tally::new("containerd-hosts");
    parse_host_file(&table["parse_host_file"], &mut tally);
    for case in cases(&table, "default_hosts") {
        let host = text(case, "host");
        let outcome = HostsConfig::default_for(host)
            .map_err(|e| format!("refused: {e}"))
            .and_then(|hosts| {
                let want = cases(case, "expect");
                same("endpoints", hosts.endpoints().len(), want.len())?;
                hosts
                    .endpoints()
                    .iter()
                    .zip(want)
                    .try_for_each(|(endpoint, want)| endpoint_matches(endpoint, want))
            });
        tally.check(format!("TestDefaultHosts: {host}"), outcome);
    }
    for case in cases(&table, "cert_dirs") {
        let outcome = cert_dir(case).await;
        tally.check(
            format!("TestLoadCertFiles: {}", text(case, "name")),
            outcome,
        );
    }
    for case in cases(&table, "http_fallback") {
        let host = text(case, "host");
        let outcome = HostsConfig::default_for(host)
            .map_err(|e| format!("refused: {e}"))
            .and_then(|hosts| {
                let server = hosts.server().ok_or("no server")?;
                same("scheme", server.url.scheme(), text(case, "scheme"))?;
                // Plain HTTP is never tried after HTTPS fails: there is no fallback.
                same("uses_fallback", false, case["uses_fallback"] == true)
            });
        tally.check(format!("TestHTTPFallback: {host}"), outcome);
    }
    tally
}

fn parse_host_file(case: &Value, tally: &mut Tally) {
    let parsed = HostsConfig::parse("test-default.registry", text(case, "toml"), Path::new("/"));
    for (index, want) in cases(case, "expect").iter().enumerate() {
        let outcome = match &parsed {
            Ok(hosts) => match hosts.endpoints().get(index) {
                Some(endpoint) => endpoint_matches(endpoint, want),
                None => Err(format!("only {} endpoints", hosts.endpoints().len())),
            },
            Err(error) => Err(format!("refused: {error}")),
        };
        tally.check(
            format!("TestParseHostFile: host {index} {}", text(want, "url")),
            outcome,
        );
    }
}

/// Compares what the crate models: URL (API base), capabilities (not `referrers`), `ca`,
/// `client`, `skip_verify`, `header`, `dial_timeout`.
fn endpoint_matches(endpoint: &Endpoint, want: &Value) -> Result<(), String> {
    same("url", endpoint.api_base().as_str(), text(want, "url"))?;
    let caps = endpoint.capabilities;
    let want_caps: Vec<&str> = cases(want, "caps")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    same("pull", caps.pull, want_caps.contains(&"pull"))?;
    same("resolve", caps.resolve, want_caps.contains(&"resolve"))?;
    same("push", caps.push, want_caps.contains(&"push"))?;
    let ca: Vec<String> = endpoint
        .ca
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let want_ca: Vec<String> = strings(&want["ca"]);
    same("ca", ca, want_ca)?;
    same("client", client_pairs(endpoint), pairs(&want["client"]))?;
    same(
        "skip_verify",
        endpoint.skip_verify,
        want["skip_verify"] == true,
    )?;
    let headers: BTreeMap<String, Vec<String>> = endpoint.headers.iter().cloned().collect();
    let want_headers: BTreeMap<String, Vec<String>> = want["header"]
        .as_object()
        .map(|map| map.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
        .unwrap_or_default();
    same("header", headers, want_headers)?;
    let want_dial = match want["dial_timeout"].as_str() {
        Some(text) => Some(noe_credentials::duration::parse(text).map_err(|e| e.to_string())?),
        None => None,
    };
    same("dial_timeout", endpoint.dial_timeout, want_dial)
}

/// `client` as `(certificate, key or "")` paths.
fn client_pairs(endpoint: &Endpoint) -> Vec<(String, String)> {
    endpoint
        .client
        .iter()
        .map(|pair| {
            (
                pair.cert.display().to_string(),
                pair.key
                    .as_ref()
                    .map(|key| key.display().to_string())
                    .unwrap_or_default(),
            )
        })
        .collect()
}

/// `[[cert, key], ...]` as written (`""` for no key).
fn pairs(value: &Value) -> Vec<(String, String)> {
    value
        .as_array()
        .map(|list| {
            list.iter()
                .map(|pair| (text_at(pair, 0), text_at(pair, 1)))
                .collect()
        })
        .unwrap_or_default()
}

fn text_at(value: &Value, index: usize) -> String {
    value[index].as_str().unwrap_or_default().to_owned()
}

fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(list) => list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// A docker-style `certs.d/HOST` directory holding `files` (empty): which become CAs and
/// client pairs of the server.
async fn cert_dir(case: &Value) -> Result<(), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let host_dir = root.path().join("registry.example");
    std::fs::create_dir(&host_dir).map_err(|e| e.to_string())?;
    for file in cases(case, "files").iter().filter_map(Value::as_str) {
        std::fs::write(host_dir.join(file), "").map_err(|e| e.to_string())?;
    }
    let hosts = load_hosts(&[root.path().to_owned()], "registry.example")
        .map_err(|e| format!("refused: {e}"))?
        .ok_or("no host configuration")?;
    let server = hosts.server().ok_or("no server")?;
    let name = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let ca: Vec<String> = server.ca.iter().map(|p| name(p)).collect();
    same("ca", ca, strings(&case["ca"]))?;
    let client: Vec<(String, String)> = client_pairs(server)
        .into_iter()
        .map(|(cert, key)| (name(Path::new(&cert)), name(Path::new(&key))))
        .collect();
    same("client", client, pairs(&case["client"]))
}
