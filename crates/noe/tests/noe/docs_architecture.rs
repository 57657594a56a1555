//! docs/architecture.md's crate table is the workspace as `cargo metadata` reads it: every
//! crate named, its `description` word for word, and the workspace crates it depends on (normal
//! dependencies, not dev or build ones).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// One row of the table, or one package of the workspace.
#[derive(Debug, PartialEq, Eq)]
struct Crate {
    path: String,
    description: String,
    depends_on: BTreeSet<String>,
}

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The workspace's packages by name, from `cargo metadata --no-deps`.
fn workspace() -> BTreeMap<String, Crate> {
    let output = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata's JSON");
    let root = root().canonicalize().expect("the workspace root");
    let packages = metadata["packages"].as_array().expect("packages");
    let names: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    packages
        .iter()
        .map(|package| {
            let name = package["name"].as_str().expect("a package name").to_owned();
            let manifest = std::path::Path::new(package["manifest_path"].as_str().expect("a path"));
            let path = manifest
                .parent()
                .and_then(|dir| dir.strip_prefix(&root).ok())
                .expect("a crate inside the workspace")
                .display()
                .to_string();
            let depends_on = package["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|dependency| dependency["kind"].is_null())
                .filter_map(|dependency| dependency["name"].as_str())
                .filter(|dependency| names.contains(dependency))
                .map(str::to_owned)
                .collect();
            let description = package["description"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let found = Crate {
                path,
                description,
                depends_on,
            };
            (name, found)
        })
        .collect()
}

/// The names between backticks in a cell.
fn quoted(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// The crate table (the first table whose header starts `| crate | description | depends on`),
/// by the package name each row gives as `` `crates/x` (`name`) ``.
fn table(doc: &str) -> BTreeMap<String, Crate> {
    let mut rows = doc
        .lines()
        .skip_while(|line| !line.starts_with("| crate | description | depends on"))
        .skip(2)
        .take_while(|line| line.starts_with('|'));
    let mut table = BTreeMap::new();
    for row in rows.by_ref() {
        let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
        let [name, description, depends_on, ..] = cells[..] else {
            panic!("docs/architecture.md: a crate row needs crate, description, depends on: {row}");
        };
        let [path, package] = quoted(name)[..] else {
            panic!("docs/architecture.md: the crate cell is `crates/x` (`name`): {name}");
        };
        let row = Crate {
            path: path.to_owned(),
            description: description.to_owned(),
            depends_on: quoted(depends_on).into_iter().map(str::to_owned).collect(),
        };
        assert!(
            table.insert(package.to_owned(), row).is_none(),
            "docs/architecture.md names {package} twice"
        );
    }
    table
}

#[test]
fn the_crate_table_is_the_workspace() {
    let doc =
        std::fs::read_to_string(root().join("docs/architecture.md")).expect("docs/architecture.md");
    let documented = table(&doc);
    let workspace = workspace();
    assert!(
        workspace.len() >= 9 && workspace.contains_key("noe-core"),
        "{workspace:?}"
    );
    let mut wrong = Vec::new();
    for (name, package) in &workspace {
        let Some(row) = documented.get(name) else {
            wrong.push(format!(
                "{name}: no row (want `{}` (`{name}`))",
                package.path
            ));
            continue;
        };
        if row.path != package.path {
            wrong.push(format!(
                "{name}: the row says `{}`, the crate is in `{}`",
                row.path, package.path
            ));
        }
        if row.description != package.description {
            wrong.push(format!(
                "{name}: the row's description differs from {}/Cargo.toml's:\n  row:   {}\n  cargo: {}",
                package.path, row.description, package.description
            ));
        }
        if row.depends_on != package.depends_on {
            wrong.push(format!(
                "{name}: the row says it depends on {:?}, {}/Cargo.toml on {:?}",
                row.depends_on, package.path, package.depends_on
            ));
        }
    }
    for name in documented
        .keys()
        .filter(|name| !workspace.contains_key(*name))
    {
        wrong.push(format!("{name}: a row, but no such crate in the workspace"));
    }
    assert!(
        wrong.is_empty(),
        "docs/architecture.md's crate table is not the workspace (cargo metadata):\n{}",
        wrong.join("\n")
    );
}
