//! Every long flag `noe --help` (and its subcommands' help) shows is documented in
//! docs/configuration.md.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

fn help_flags(args: &[&str]) -> BTreeSet<String> {
    let output = Command::new(env!("CARGO_BIN_EXE_noe"))
        .args(args)
        .arg("--help")
        .output()
        .expect("run noe --help");
    assert!(output.status.success(), "noe {args:?} --help failed");
    let text = String::from_utf8(output.stdout).unwrap();
    text.split(|c: char| c.is_whitespace() || c == ',' || c == '=' || c == '[' || c == '<')
        .filter_map(|word| word.strip_prefix("--"))
        .map(|name| name.trim_end_matches(|c: char| !c.is_ascii_alphanumeric()))
        .filter(|name| !name.is_empty() && !["help", "version"].contains(name))
        .map(|name| format!("--{name}"))
        .collect()
}

#[test]
fn every_long_flag_is_documented() {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
    let flags: BTreeSet<String> = [&[][..], &["inspect"], &["explain"], &["report"]]
        .iter()
        .flat_map(|sub| help_flags(sub))
        .collect();
    assert!(
        flags.contains("--preferred-arch") && flags.contains("--output"),
        "{flags:?}"
    );
    let text = std::fs::read_to_string(&doc)
        .unwrap_or_else(|error| panic!("{} must document every flag: {error}", doc.display()));
    let missing: Vec<&String> = flags
        .iter()
        .filter(|flag| {
            !text.match_indices(flag.as_str()).any(|(at, _)| {
                !text[at + flag.len()..]
                    .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-')
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "flags missing from docs/configuration.md: {missing:?}"
    );
}

/// The image sets the allocator environment the benchmarks measure, and the docs list it.
#[test]
fn the_image_and_the_docs_carry_the_allocator_settings() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let dockerfile = std::fs::read_to_string(format!("{root}/Dockerfile")).unwrap();
    let docs = std::fs::read_to_string(format!("{root}/docs/configuration.md")).unwrap();
    for (name, value) in noe_webhook::ALLOCATOR_ENV {
        assert!(
            dockerfile.contains(&format!("{name}={value}")),
            "Dockerfile lacks {name}={value}"
        );
        assert!(docs.contains(name), "docs/configuration.md lacks {name}");
    }
}
