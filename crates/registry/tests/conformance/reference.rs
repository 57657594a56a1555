//! distribution/reference: `Reference::parse` and its normalization.

use std::path::Path;

use noe_registry::Reference;
use serde_json::Value;

use super::table::{cases, id, load, same, text, Tally};

pub fn distribution(dir: &Path) -> Tally {
    let table = load(dir, "distribution-reference.json");
    let mut tally = Tally::new("distribution-reference");
    for case in cases(&table, "cases") {
        let input = text(case, "input");
        let outcome = check(text(case, "check"), input, &case["expect"]);
        tally.check(id(text(case, "test"), input), outcome);
    }
    tally
}

fn check(kind: &str, input: &str, expect: &Value) -> Result<(), String> {
    let parsed = Reference::parse(input);
    let want_ok = expect["ok"].as_bool();
    match kind {
        "parse" => match (&parsed, want_ok) {
            (Ok(reference), Some(true)) => {
                same("name", reference.name().as_str(), text(expect, "name"))?;
                same("tag", reference.tag.as_deref(), expect["tag"].as_str())?;
                same(
                    "digest",
                    reference.digest.as_deref(),
                    expect["digest"].as_str(),
                )
            }
            (Err(_), Some(false)) => Ok(()),
            (Ok(reference), _) => Err(format!("accepted as {reference}, upstream refuses")),
            (Err(error), _) => Err(format!("refused ({error}), upstream accepts")),
        },
        "valid" => same("valid", parsed.is_ok(), want_ok == Some(true)),
        "canonical" => {
            let canonical = parsed.as_ref().is_ok_and(|r| r.name() == input);
            same(
                "canonical",
                canonical,
                expect["canonical"].as_bool() == Some(true),
            )?;
            if let (Ok(reference), Some(registry)) = (&parsed, expect["registry"].as_str()) {
                same("registry", reference.registry.as_str(), registry)?;
                same(
                    "repository",
                    reference.repository.as_str(),
                    text(expect, "repository"),
                )?;
            }
            Ok(())
        }
        "split" => match (&parsed, want_ok) {
            (Ok(reference), Some(true)) => {
                same(
                    "registry",
                    reference.registry.as_str(),
                    text(expect, "registry"),
                )?;
                same(
                    "repository",
                    reference.repository.as_str(),
                    text(expect, "repository"),
                )?;
                match expect["name"].as_str() {
                    Some(name) => same("name", reference.name().as_str(), name),
                    None => Ok(()),
                }
            }
            (Err(_), Some(false)) => Ok(()),
            (Ok(reference), _) => Err(format!("accepted as {reference}, upstream refuses")),
            (Err(error), _) => Err(format!("refused ({error}), upstream accepts")),
        },
        "string" => match (&parsed, want_ok) {
            (Ok(reference), Some(true)) => same(
                "string",
                reference.to_string().as_str(),
                text(expect, "string"),
            ),
            (Err(_), Some(false)) => Ok(()),
            (Ok(reference), _) => Err(format!("accepted as {reference}, upstream refuses")),
            (Err(error), _) => Err(format!("refused ({error}), upstream accepts")),
        },
        "digest_only" => match &parsed {
            Ok(reference) => same(
                "digest",
                reference.digest.as_deref(),
                expect["digest"].as_str(),
            ),
            Err(error) => Err(format!("refused ({error}), upstream reads a bare digest")),
        },
        other => Err(format!("unknown check {other:?}")),
    }
}
