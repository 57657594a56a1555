//! The kubelet's credential keyring: docker config decoding (`parse_docker_config` and
//! `DockerConfig::auth_candidates`), key matching and ordering, `URLsMatchStr`
//! (`image_matches`) and the default-registry test (`Reference::parse`).

use std::path::Path;

use noe_credentials::docker_config::parse_docker_config;
use noe_credentials::image_matches;
use noe_registry::Reference;
use serde_json::Value;

use super::table::{basics, cases, expected_basics, id, load, same, text, Tally};

pub fn docker_config(dir: &Path) -> Tally {
    let table = load(dir, "kubelet-docker-config.json");
    let mut tally = Tally::new("kubelet-docker-config");
    for case in cases(&table, "cases") {
        let label = case["name"]
            .as_str()
            .or_else(|| case["input"].as_str())
            .unwrap_or_else(|| text(case, "image"));
        let outcome = candidates_for(text(case, "config"), text(case, "image"), &case["expect"]);
        tally.check(
            id(
                text(case, "test"),
                &format!("{label} -> {}", text(case, "image")),
            ),
            outcome,
        );
    }
    tally
}

/// The credentials the config gives `image`, compared with `expect` (a list, or `"error"`).
fn candidates_for(config: &str, image: &str, expect: &Value) -> Result<(), String> {
    let parsed = parse_docker_config(config.as_bytes());
    match (parsed, expect.as_str()) {
        (Err(_), Some("error")) => Ok(()),
        (Ok(_), Some("error")) => Err("accepted, upstream refuses the file".to_owned()),
        (Err(error), _) => Err(format!("refused: {error}")),
        (Ok(config), _) => same(
            "credentials",
            basics(&config.auth_candidates(image, "conformance")),
            expected_basics(expect),
        ),
    }
}

pub fn keyring(dir: &Path) -> Tally {
    let table = load(dir, "kubelet-keyring.json");
    let mut tally = Tally::new("kubelet-keyring");
    for case in cases(&table, "cases") {
        let lookup = text(case, "lookup");
        let image = match text(case, "image_for_ours") {
            "normalize" => Reference::parse(lookup)
                .map(|r| r.to_string())
                .unwrap_or_default(),
            image => image.to_owned(),
        };
        let outcome = parse_docker_config(text(case, "config").as_bytes())
            .map_err(|e| format!("refused: {e}"))
            .and_then(|config| {
                let got = basics(&config.auth_candidates(&image, "conformance"));
                let want = expected_basics(&case["expect"]);
                if text(case, "match") == "first" {
                    same("first credential", got.first(), want.first())
                } else {
                    same("credentials", got, want)
                }
            });
        let config_key = case["config"]
            .as_str()
            .and_then(|c| serde_json::from_str::<Value>(c).ok())
            .and_then(|c| {
                c.as_object()
                    .map(|o| o.keys().cloned().collect::<Vec<_>>().join(","))
            })
            .unwrap_or_default();
        tally.check(
            id(text(case, "test"), &format!("{config_key} <- {lookup}")),
            outcome,
        );
    }
    for case in cases(&table, "default_registry_cases") {
        let image = text(case, "image");
        let on_hub = Reference::parse(image).is_ok_and(|r| r.registry == "docker.io");
        tally.check(
            id(text(case, "test"), image),
            same("docker hub", on_hub, case["expect"] == true),
        );
    }
    tally
}

pub fn urls_match(dir: &Path) -> Tally {
    let table = load(dir, "kubelet-urls-match.json");
    let mut tally = Tally::new("kubelet-urls-match");
    for case in cases(&table, "cases") {
        let (pattern, image) = (text(case, "pattern"), text(case, "image"));
        tally.check(
            id(text(case, "test"), &format!("{pattern} ~ {image}")),
            same(
                "match",
                image_matches(pattern, image),
                case["expect"] == true,
            ),
        );
    }
    tally
}
