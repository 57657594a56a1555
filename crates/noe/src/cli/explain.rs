//! `noe explain -f FILE`: what the webhook would do to a Pod or workload, without a cluster.
//!
//! Every document of the file is explained in order (a `kind: List` counts as its items); one
//! that is not a Pod or a workload with a pod template is reported as skipped, with the reason.
//! Namespaces and Nodes of the file are the facts a cluster would give ([`facts`]): the
//! namespace's preferred arch, and the node of a bound pod whose debug (ephemeral) containers
//! are then checked. An image a `--platform-overrides` entry answered for is named in a note.
//! A document the API server would refuse (a field of the wrong type, an unknown field) is not
//! explained: the file is refused, naming the field ([`validate`]).
//! Exit code ([`Exit`]): 0 when every pod would be admitted, 1 when one would be denied, 2 when
//! the file or the flags cannot be used, 3 when an image lookup failed (unless
//! `--allow-lookup-errors`): a CI gate must not pass because a registry was unreachable.

mod facts;
pub mod validate;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use futures::StreamExt;
use noe_core::decide::{Decision, Signal, Verdict, AUDIT_ANNOTATION, PREFERRED_LABEL};
use noe_core::patch::{with_prefix, Op};
use noe_core::workload;
use noe_webhook::admission::Admission;
use noe_webhook::resolve::one_line;
use serde::Deserialize;
use serde_json::{json, Value};

use super::inspect::progress::Progress;
use crate::app::App;
use crate::config::{self, Output};
use facts::FileFacts;

/// Documents decided at the same time.
const CONCURRENCY: usize = 8;

#[derive(Clone, Debug, Args)]
pub struct ExplainArgs {
    /// A Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or CronJob (YAML or JSON,
    /// several documents or a `kind: List` allowed; `-` = stdin). Namespaces and Nodes in the
    /// file stand for the cluster's: a namespace's `arch.noe.adevinta.com/preferred` label, and
    /// the node a pod with debug containers is bound to.
    #[arg(long, short = 'f', env = "NOE_FILE")]
    pub file: PathBuf,

    /// `json` prints one object per document and line:
    /// `{"kind","name","allowed","message","warnings","patch"}` (`"notes"` too when a platform
    /// override answered), or `{"kind","name","skipped"}`.
    #[arg(
        long,
        short = 'o',
        env = "NOE_OUTPUT",
        value_enum,
        default_value = "text"
    )]
    pub output: Output,

    /// Exit 0 even when an image lookup failed (by default `explain` then exits 3, so a CI gate
    /// does not pass because a registry was unreachable).
    #[arg(long, env = "NOE_ALLOW_LOOKUP_ERRORS", action = clap::ArgAction::Set, num_args = 0..=1,
          require_equals = true, default_value = "false", default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub allow_lookup_errors: bool,
}

/// `noe explain`'s exit codes, one per cause; the first that applies wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Every pod would be admitted, every lookup answered.
    Admitted = 0,
    /// A pod would be denied.
    Denied = 1,
    /// The file or the flags cannot be used (including a document the API server would refuse).
    Unusable = 2,
    /// An image's platforms could not be found (and `--allow-lookup-errors` was not given).
    LookupFailed = 3,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit as u8)
    }
}

/// Why a file cannot be explained at all.
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("cannot read {file}: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file} is not YAML or JSON: {reason}")]
    Parse { file: String, reason: String },
    #[error("{0} holds no object")]
    Empty(String),
    #[error("{file}: {object} would be refused by the API server: {reason}")]
    Invalid {
        file: String,
        object: String,
        reason: String,
    },
    #[error("{0}")]
    Setup(String),
}

pub async fn run(config: config::Explain) -> ExitCode {
    match explain_file(config).await {
        Ok(exit) => exit.into(),
        Err(error) => {
            eprintln!("noe: {error}");
            Exit::Unusable.into()
        }
    }
}

/// What the explained documents add up to.
#[derive(Debug, Default)]
struct Tally {
    denied: bool,
    lookup_failed: bool,
}

impl Tally {
    fn exit(&self, allow_lookup_errors: bool) -> Exit {
        if self.denied {
            Exit::Denied
        } else if self.lookup_failed && !allow_lookup_errors {
            Exit::LookupFailed
        } else {
            Exit::Admitted
        }
    }
}

/// Explains every document.
async fn explain_file(config: config::Explain) -> Result<Exit, Error> {
    let config::Explain {
        file,
        output,
        allow_lookup_errors,
        decision: config::Decision {
            policy,
            admission_deadline,
        },
        registry,
    } = config;
    let name = file.display().to_string();
    let text = if file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|source| Error::Read {
                file: "stdin".into(),
                source,
            })?;
        text
    } else {
        std::fs::read_to_string(&file).map_err(|source| Error::Read {
            file: name.clone(),
            source,
        })?
    };
    let objects = documents(&text).map_err(|error| Error::Parse {
        file: name.clone(),
        reason: error.to_string(),
    })?;
    if objects.is_empty() {
        return Err(Error::Empty(name));
    }
    for object in &objects {
        if let Some(reason) = validate::refusal(object) {
            return Err(Error::Invalid {
                file: name,
                object: object_name(object),
                reason,
            });
        }
    }
    let app = App::build(registry)
        .await
        .map_err(|error| Error::Setup(one_line(&error)))?;
    let facts = FileFacts::of(&objects);
    // The same admission flow as the server, with node-level credentials only (no cluster),
    // and the file's Namespaces and Nodes as the cluster's facts.
    let admission = app
        .admission(
            policy,
            admission_deadline,
            noe_webhook::metrics::DEFAULT_MAX_NAMESPACES,
            None,
        )
        .map_err(|error| Error::Setup(one_line(&error)))?
        .with_facts(std::sync::Arc::new(facts.clone()));
    let context = Context {
        admission: &admission,
        app: &app,
        facts: &facts,
    };
    let mut tally = Tally::default();
    let progress = Progress::new(objects.len(), "documents");
    // Documents are decided concurrently (their lookups overlap; the resolver coalesces the
    // same image) and printed in the file's order.
    let mut explained = futures::stream::iter(&objects)
        .map(|object| explain(&context, object))
        .buffered(CONCURRENCY);
    let mut stdout = std::io::stdout().lock();
    while let Some(explained) = explained.next().await {
        tally.denied |= explained.denied();
        tally.lookup_failed |= explained.lookup_failed();
        let printed = progress.done(|| match output {
            Output::Json => serde_json::to_string(&explained.json())
                .map_err(std::io::Error::other)
                .and_then(|line| writeln!(stdout, "{line}")),
            Output::Text => explained.write_text(&mut stdout),
        });
        printed.map_err(|source| Error::Read {
            file: "stdout".into(),
            source,
        })?;
    }
    Ok(tally.exit(allow_lookup_errors))
}

/// `Kind namespace/name` of a file's object, for messages.
fn object_name(object: &Value) -> String {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let kind = text("/kind").unwrap_or("object");
    let name = text("/metadata/name")
        .or_else(|| text("/metadata/generateName"))
        .unwrap_or("(unnamed)");
    match text("/metadata/namespace") {
        Some(namespace) => format!("{kind} {namespace}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// Every object of a file: each non-empty YAML (or JSON) document, a `kind: List` replaced by
/// its items.
pub fn documents(text: &str) -> Result<Vec<Value>, yaml_serde::Error> {
    let mut out = Vec::new();
    for document in yaml_serde::Deserializer::from_str(text) {
        let value = Value::deserialize(document)?;
        if value.is_null() {
            continue;
        }
        let is_list = value.get("kind").and_then(Value::as_str) == Some("List");
        match value.get("items").and_then(Value::as_array) {
            Some(items) if is_list => out.extend(items.iter().filter(|i| !i.is_null()).cloned()),
            _ => out.push(value),
        }
    }
    Ok(out)
}

/// What explaining needs: the admission, the shared parts (platform overrides), the file's facts.
pub struct Context<'a> {
    pub admission: &'a Admission,
    pub app: &'a App,
    pub facts: &'a FileFacts,
}

/// What the webhook would do to one object.
#[derive(Debug)]
pub struct Explained {
    pub kind: String,
    /// `namespace/name` (or `generateName`).
    pub name: String,
    pub outcome: Outcome,
    /// What else explains the outcome: images a platform override answered for, debug
    /// containers that could not be checked.
    pub notes: Vec<String>,
}

#[derive(Debug)]
pub enum Outcome {
    /// Not a Pod or a workload with a pod template.
    Skipped(String),
    Decided {
        decision: Box<Decision>,
        /// The patch against the file's object (pod template paths prefixed for workloads).
        patch: Vec<Op>,
        /// A note on how the object's pods differ from the template (DaemonSet).
        note: Option<&'static str>,
    },
}

/// The DaemonSet controller pins each of its pods to one node: a required node selector term
/// with a `metadata.name` field and the DaemonSet as controller owner. The webhook sees those
/// pods, not the template, so `explain` decides for such a pod.
const DAEMONSET_NOTE: &str =
    "DaemonSet pods are pinned to their node by the DaemonSet controller: no architecture constraint is added";

/// Decides for a Pod or the pod template of a workload, as the webhook would for its pods.
pub async fn explain(context: &Context<'_>, object: &Value) -> Explained {
    let admission = context.admission;
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let cluster_scoped = matches!(kind.as_str(), "Namespace" | "Node");
    let shown_name = |namespace: &str, name: &str| {
        if cluster_scoped {
            name.to_owned()
        } else {
            format!("{namespace}/{name}")
        }
    };
    let fact = match kind.as_str() {
        "Namespace" => Some(format!(
            "a Namespace: its {PREFERRED_LABEL} label applies to this file's pods in it"
        )),
        "Node" => Some(
            "a Node: the debug containers of this file's pods bound to it are checked against it"
                .to_owned(),
        ),
        _ => None,
    };
    let pod_of = match (fact, workload::pod_of(object)) {
        (Some(reason), _) => Err(reason),
        (None, pod_of) => pod_of.map_err(|no_pod| no_pod.to_string()),
    };
    let pod_of = match pod_of {
        Ok(pod_of) => pod_of,
        Err(reason) => {
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let namespace = object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .filter(|ns| !ns.is_empty())
                .unwrap_or("default");
            return Explained {
                kind,
                name: shown_name(namespace, name),
                outcome: Outcome::Skipped(reason),
                notes: Vec::new(),
            };
        }
    };
    let namespace = pod_of.namespace;
    let pod = pod_of.pod.as_ref();
    let explained = |outcome, notes| Explained {
        kind: kind.clone(),
        name: shown_name(namespace, pod_of.name),
        outcome,
        notes,
    };
    let mut notes = override_notes(context.app, pod).await;
    let node = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    let debug = pod
        .pointer("/spec/ephemeralContainers")
        .and_then(Value::as_array)
        .is_some_and(|c| !c.is_empty());
    if let (Some(node), true) = (node, debug) {
        // A bound pod with debug containers: they are checked as if just added.
        if !context.facts.has_node(node) {
            notes.push(format!(
                "debug containers not checked: node {node} is not in the file (add the Node to check them)"
            ));
        }
        let decision = admission.debug_decision(pod, None, namespace).await;
        return explained(
            Outcome::Decided {
                decision: Box::new(decision),
                patch: Vec::new(),
                note: Some(DEBUG_NOTE),
            },
            notes,
        );
    }
    let decision = admission.decision(pod, namespace).await;
    let note = (kind == "DaemonSet").then_some(DAEMONSET_NOTE);
    let patch = match &decision.verdict {
        Verdict::Patch { ops, .. } => with_prefix(ops.clone(), pod_of.template),
        _ => Vec::new(),
    };
    explained(
        Outcome::Decided {
            decision: Box::new(decision),
            patch,
            note,
        },
        notes,
    )
}

/// The pod's debug containers were checked against its node (`pods/ephemeralcontainers`).
const DEBUG_NOTE: &str = "debug containers checked against the pod's node";

/// A note per image of `pod` a `--platform-overrides` entry answers for.
async fn override_notes(app: &App, pod: &Value) -> Vec<String> {
    let mut notes = Vec::new();
    for image in noe_core::images::named(pod) {
        if let Ok(Some(found)) = app.platform_override(image).await {
            let platforms: Vec<String> = found
                .matched
                .platforms
                .iter()
                .map(ToString::to_string)
                .collect();
            notes.push(format!(
                "platforms of {image} from --platform-overrides {} entry {} (pattern {}): {}",
                found.file.display(),
                found.matched.entry,
                found.matched.pattern,
                platforms.join(" ")
            ));
        }
    }
    notes
}

impl Explained {
    /// An image's platforms could not be found.
    pub fn lookup_failed(&self) -> bool {
        match &self.outcome {
            Outcome::Decided { decision, .. } => decision
                .signals
                .iter()
                .any(|signal| matches!(signal, Signal::LookupFailed { .. })),
            Outcome::Skipped(_) => false,
        }
    }

    /// Each image whose platforms could not be found, with the whole error (the admission
    /// warnings cut it to the API server's limit) and what to do about a plain-HTTP registry.
    pub fn lookup_errors(&self) -> Vec<(String, String)> {
        let Outcome::Decided { decision, .. } = &self.outcome else {
            return Vec::new();
        };
        decision
            .signals
            .iter()
            .filter_map(|signal| match signal {
                Signal::LookupFailed { image, error } => {
                    Some((image.clone(), with_plain_http_hint(image, error)))
                }
                _ => None,
            })
            .collect()
    }

    pub fn denied(&self) -> bool {
        matches!(
            &self.outcome,
            Outcome::Decided { decision, .. } if matches!(decision.verdict, Verdict::Deny { .. })
        )
    }

    /// One sentence: the denial, the platforms written, or why nothing changed.
    pub fn message(&self) -> String {
        match &self.outcome {
            Outcome::Skipped(reason) => format!("skipped: {reason}"),
            Outcome::Decided { decision, note, .. } => {
                let message = match &decision.verdict {
                    Verdict::Deny { message, .. } => message.clone(),
                    Verdict::Patch { common, ops } => patch_summary(common, ops, decision),
                    Verdict::Unchanged { .. } if *note == Some(DEBUG_NOTE) => {
                        return "debug containers allowed (checked against the pod's node)"
                            .to_owned()
                    }
                    Verdict::Unchanged { reason } => format!("unchanged: {}", reason.as_str()),
                };
                match note {
                    Some(note) => format!("{message} ({note})"),
                    None => message,
                }
            }
        }
    }

    /// `{"kind","name","allowed","message","warnings","patch"}` (and `"notes"` when there are
    /// any), or `{"kind","name","skipped"}`.
    pub fn json(&self) -> Value {
        let mut json = match &self.outcome {
            Outcome::Skipped(reason) => {
                json!({"kind": self.kind, "name": self.name, "skipped": reason})
            }
            Outcome::Decided {
                decision, patch, ..
            } => json!({
                "kind": self.kind,
                "name": self.name,
                "allowed": !self.denied(),
                "message": self.message(),
                "warnings": decision.warnings,
                "patch": patch,
            }),
        };
        if !self.notes.is_empty() {
            json["notes"] = json!(self.notes);
        }
        let failures = self.lookup_errors();
        if !failures.is_empty() {
            json["lookupErrors"] = failures
                .iter()
                .map(|(image, error)| json!({"image": image, "error": error}))
                .collect();
        }
        json
    }

    pub fn write_text(&self, out: &mut impl Write) -> std::io::Result<()> {
        let (verdict, warnings, patch): (String, &[String], &[Op]) = match &self.outcome {
            Outcome::Skipped(_) => ("skipped".to_owned(), &[], &[]),
            Outcome::Decided {
                decision, patch, ..
            } => {
                let verdict = match &decision.verdict {
                    Verdict::Deny { code, .. } => format!("denied ({code})"),
                    Verdict::Patch { .. } => "allowed, patched".to_owned(),
                    Verdict::Unchanged { .. } => "allowed unchanged".to_owned(),
                };
                (verdict, &decision.warnings, patch)
            }
        };
        writeln!(out, "{} {}: {verdict}", self.kind, self.name)?;
        writeln!(out, "  {}", self.message())?;
        let failures = self.lookup_errors();
        for warning in warnings {
            // A warning cut to the API server's limit is a lookup's: its whole text follows.
            let cut = warning.ends_with("...")
                && warning.chars().count() >= noe_core::decide::MAX_WARNING_CHARS;
            if !cut || failures.is_empty() {
                writeln!(out, "  warning: {warning}")?;
            }
        }
        for (image, error) in &failures {
            writeln!(out, "  lookup failed: {image}: {error}")?;
        }
        for note in &self.notes {
            writeln!(out, "  note: {note}")?;
        }
        if !patch.is_empty() {
            let pretty = serde_json::to_string_pretty(patch).map_err(std::io::Error::other)?;
            writeln!(out, "patch:\n{pretty}")?;
        }
        Ok(())
    }
}

/// `error` with what to do when the registry answered plain HTTP to our TLS handshake (rustls
/// names the record it could not read).
fn with_plain_http_hint(image: &str, error: &str) -> String {
    if !super::inspect::is_plain_http_text(error) {
        return error.to_owned();
    }
    let host = noe_registry::Reference::parse(image)
        .map(|reference| reference.registry)
        .unwrap_or_else(|_| "the registry".to_owned());
    format!("{error} ({})", super::inspect::plain_http_hint(&host))
}

/// What a patch does, in words: the architectures it constrains the pod to, the audit
/// annotation (audit mode: nothing else is written), tolerations added, node labels copied.
fn patch_summary(common: &[String], ops: &[Op], decision: &Decision) -> String {
    let ops: Vec<Value> = ops
        .iter()
        .filter_map(|op| serde_json::to_value(op).ok())
        .collect();
    let path = |op: &Value| {
        op.get("path")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut parts = Vec::new();
    if !common.is_empty() {
        parts.push(format!(
            "constrained to the architectures {}",
            common.join(",")
        ));
    }
    let audit = ops.iter().find_map(|op| {
        let value = op.get("value")?;
        match path(op).as_str() {
            "/metadata/annotations/arch.noe.adevinta.com~1audit" => value.as_str(),
            "/metadata/annotations" => value.get(AUDIT_ANNOTATION).and_then(Value::as_str),
            _ => None,
        }
    });
    if let Some(value) = audit {
        parts.push(format!(
            "audit mode: nothing enforced, annotated {AUDIT_ANNOTATION}={value}"
        ));
    }
    if ops
        .iter()
        .any(|op| path(op).starts_with("/spec/tolerations"))
    {
        parts.push("tolerations added".to_owned());
    }
    let copied: Vec<&str> = decision
        .signals
        .iter()
        .filter_map(|signal| match signal {
            Signal::NodeMatchInjection { label } => Some(label.as_str()),
            _ => None,
        })
        .collect();
    if !copied.is_empty() && audit.is_none() {
        parts.push(format!(
            "pod labels copied into nodeSelector: {}",
            copied.join(", ")
        ));
    }
    if parts.is_empty() {
        parts.push("patched without an architecture constraint".to_owned());
    }
    parts.join("; ")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn documents_table() {
        let cases: &[(&str, usize)] = &[
            ("", 0),
            ("---\n", 0),
            ("kind: Pod\n", 1),
            ("{\"kind\": \"Pod\"}", 1),
            ("kind: Pod\n---\nkind: Deployment\n", 2),
            ("---\nkind: Pod\n---\n---\nkind: Job\n", 2),
            ("kind: List\nitems: [{kind: Pod}, {kind: Job}]\n", 2),
            ("kind: List\nitems: []\n---\nkind: Pod\n", 1),
        ];
        for (text, want) in cases {
            assert_eq!(documents(text).unwrap().len(), *want, "{text:?}");
        }
        assert!(documents("kind: [").is_err());
    }
}
