//! `noe learned list|forget`: what the learned store holds (docs/configuration.md, "noe
//! learned"), and removing corrections from it so the next admissions trust the image's claim
//! again. kubectl's conventions: `--kubeconfig`, then `$KUBECONFIG`, then `~/.kube/config`, then
//! the in-cluster configuration; `-n` names noe's namespace (default: the context's).

use std::io::Write as _;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use noe_controller::learned::{self, Entry, LearnedConfig, Snapshot};
use noe_controller::LearnedView;
use noe_webhook::resolve::one_line;
use serde_json::json;

use crate::config::{self, LearnedCommand};

#[derive(Clone, Debug, Args)]
pub struct LearnedArgs {
    #[command(subcommand)]
    pub action: LearnedAction,

    /// noe's namespace, where the learned store is; default: the kubeconfig context's namespace
    /// (in a pod: its own).
    #[arg(long, short = 'n', global = true)]
    pub namespace: Option<String>,
}

/// Where `noe explain` and `noe report` read the learned store.
#[derive(Clone, Debug, Default, Args)]
pub struct LearnedSourceArgs {
    /// noe's namespace, where its learned store (`--learned-store`) is: the platforms it learned
    /// are left out as the server leaves them out, and listed as "learned". `noe report` from a
    /// cluster reads it without this flag, from the kubeconfig context's namespace.
    #[arg(long, env = "NOE_LEARNED_NAMESPACE", value_name = "NAMESPACE")]
    pub learned_namespace: Option<String>,
}

impl LearnedSourceArgs {
    /// Where to read the store: `None` unless `--learned-namespace` is given or `by_default`.
    pub fn source(&self, store: &str, by_default: bool) -> Option<config::LearnedSource> {
        let namespace = self
            .learned_namespace
            .as_deref()
            .map(str::trim)
            .filter(|ns| !ns.is_empty())
            .map(str::to_owned);
        (namespace.is_some() || by_default).then(|| config::LearnedSource {
            store: store.trim().to_owned(),
            namespace,
        })
    }
}

/// The learned store read once for a run of `noe explain` or `noe report`. Named by
/// `--learned-namespace`, a store that cannot be read fails the run (`Err`, one line); read by
/// default (the context's namespace), a missing one means nothing learned and any other failure
/// is logged and the run goes on without it.
pub async fn read_for_run(
    client: kube::Client,
    source: &config::LearnedSource,
) -> Result<Option<LearnedView>, String> {
    let store = store(&client, source.namespace.as_deref(), &source.store);
    let named = source.namespace.is_some();
    match learned::read_view(client, &store).await {
        Ok(Some(view)) => Ok(Some(view)),
        Ok(None) if named => Err(format!(
            "the learned store {}/{} does not exist (is --detect-exec-format-errors on? --learned-namespace names noe's namespace)",
            store.namespace, store.name
        )),
        Ok(None) => {
            tracing::debug!(store = %format!("{}/{}", store.namespace, store.name), "No learned store: nothing learned is used");
            Ok(None)
        }
        Err(error) if named => Err(one_line(&error)),
        Err(error) => {
            tracing::warn!(error = %one_line(&error), "The learned store was not read: learned corrections are not used (--learned-namespace names noe's namespace)");
            Ok(None)
        }
    }
}

#[derive(Clone, Debug, Subcommand)]
pub enum LearnedAction {
    /// Print the learned corrections: image, digest, platform, source and evidence.
    List {
        /// `table` (for people) or `json`.
        #[arg(long, short = 'o', value_enum, default_value = "table")]
        output: ListFormat,
    },
    /// Remove the corrections of these images (as the pods wrote them), digests
    /// (`sha256:...`) or data keys; the next admissions trust the images' claims again.
    Forget {
        /// Images, digests or data keys.
        #[arg(value_name = "IMAGE|DIGEST", required_unless_present = "all")]
        targets: Vec<String>,
        /// Every entry, garbage included.
        #[arg(long, conflicts_with = "targets")]
        all: bool,
    },
}

/// `noe learned list -o`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    #[default]
    Table,
    Json,
}

impl LearnedArgs {
    /// The typed command.
    pub fn command(&self) -> LearnedCommand {
        match &self.action {
            LearnedAction::List { output } => LearnedCommand::List {
                json: *output == ListFormat::Json,
            },
            LearnedAction::Forget { targets, all } => LearnedCommand::Forget {
                targets: targets.iter().map(|t| t.trim().to_owned()).collect(),
                all: *all,
            },
        }
    }
}

/// The learned store `name` in `namespace` (else the client's default namespace).
fn store(client: &kube::Client, namespace: Option<&str>, name: &str) -> LearnedConfig {
    LearnedConfig {
        namespace: namespace.map_or_else(|| client.default_namespace().to_owned(), str::to_owned),
        name: name.to_owned(),
        max_entries: learned::MAX_ENTRIES,
    }
}

/// Exit codes: 0 done, 1 the API could not be reached, the store does not exist, or a target
/// matched no entry (the others are removed), 2 no API access could be configured.
pub async fn run(config: config::Learned) -> ExitCode {
    let client = match super::kube_client(&config.kube).await {
        Ok(client) => client,
        Err(code) => return code,
    };
    let store = store(&client, config.namespace.as_deref(), &config.store);
    let missing = || {
        eprintln!(
            "noe: the learned store {}/{} does not exist (is --detect-exec-format-errors on? -n names noe's namespace)",
            store.namespace, store.name
        );
        ExitCode::FAILURE
    };
    match config.command {
        LearnedCommand::List { json } => match learned::read(client, &store).await {
            Ok(Some(snapshot)) => print_list(&store, &snapshot, json),
            Ok(None) => missing(),
            Err(error) => {
                eprintln!("noe: {}", one_line(&error));
                ExitCode::FAILURE
            }
        },
        LearnedCommand::Forget { targets, all } => {
            let chosen = |key: &str, entry: Option<&Entry>| {
                all || targets.iter().any(|target| matches(target, key, entry))
            };
            match learned::forget(client, &store, chosen).await {
                Ok(Some(removed)) => report_forgotten(&removed, &targets, all),
                Ok(None) => missing(),
                Err(error) => {
                    eprintln!("noe: {}", one_line(&error));
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// Whether `target` names the entry under `key`: its data key, its digest or its image.
fn matches(target: &str, key: &str, entry: Option<&Entry>) -> bool {
    target == key
        || entry.is_some_and(|entry| {
            (!entry.image.is_empty() && entry.image == target) || entry.digest == target
        })
}

fn report_forgotten(
    removed: &[(String, Option<Entry>)],
    targets: &[String],
    all: bool,
) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    for (key, entry) in removed {
        let what = match entry {
            Some(entry) => format!(
                "{} {} {}",
                display(&entry.image),
                entry.digest,
                entry.platform
            ),
            None => "(not an entry)".to_owned(),
        };
        if writeln!(stdout, "learned/{key}: forgotten {what}").is_err() {
            return ExitCode::FAILURE;
        }
    }
    let unmatched: Vec<&String> = targets
        .iter()
        .filter(|target| {
            !removed
                .iter()
                .any(|(key, entry)| matches(target, key, entry.as_ref()))
        })
        .collect();
    for target in &unmatched {
        eprintln!("noe: {target}: no learned correction");
    }
    eprintln!("noe: {} correction(s) forgotten", removed.len());
    if unmatched.is_empty() || all {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// An image for people (a verification's correction names none).
fn display(image: &str) -> &str {
    if image.is_empty() {
        "-"
    } else {
        image
    }
}

fn print_list(store: &LearnedConfig, snapshot: &Snapshot, json: bool) -> ExitCode {
    let mut entries: Vec<(String, Entry)> = snapshot.entries();
    // Newest evidence first.
    entries.sort_by_key(|(_, entry)| std::cmp::Reverse(entry.time()));
    let text = if json {
        let learned: Vec<serde_json::Value> = entries
            .iter()
            .map(|(key, entry)| {
                let mut value = serde_json::to_value(entry).unwrap_or_default();
                value["key"] = json!(key);
                value
            })
            .collect();
        let invalid: Vec<serde_json::Value> = snapshot
            .garbage
            .iter()
            .map(|(key, why)| json!({"key": key, "reason": why.to_string()}))
            .collect();
        let document = json!({
            "store": format!("{}/{}", store.namespace, store.name),
            "learned": learned,
            "invalid": invalid,
            "invalidCount": snapshot.garbage_count,
        });
        format!(
            "{}\n",
            serde_json::to_string_pretty(&document).unwrap_or_default()
        )
    } else {
        let mut rows = vec![[
            "IMAGE".to_owned(),
            "DIGEST".to_owned(),
            "PLATFORM".to_owned(),
            "SOURCE".to_owned(),
            "EVIDENCE".to_owned(),
        ]];
        rows.extend(entries.iter().map(|(_, entry)| {
            [
                display(&entry.image).to_owned(),
                entry.digest.clone(),
                entry.platform.clone(),
                entry.source.to_string(),
                entry.evidence_words(),
            ]
        }));
        table(&rows)
    };
    let mut stdout = std::io::stdout().lock();
    if stdout.write_all(text.as_bytes()).is_err() {
        return ExitCode::FAILURE;
    }
    if !json {
        for (key, why) in &snapshot.garbage {
            eprintln!("noe: learned/{key} ignored: {why}");
        }
        eprintln!(
            "noe: {} correction(s) in {}/{}{}",
            entries.len(),
            store.namespace,
            store.name,
            match snapshot.garbage_count {
                0 => String::new(),
                n => format!(", {n} invalid entries ignored"),
            }
        );
    }
    ExitCode::SUCCESS
}

/// Columns aligned with two spaces, the last one unpadded.
fn table(rows: &[[String; 5]]) -> String {
    let mut widths = [0usize; 5];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
