//! `noe explain -f FILE`: what the webhook would do to a Pod or workload, without a cluster.
//!
//! Every document of the file is explained in order (a `kind: List` counts as its items); one
//! that is not a Pod or a workload with a pod template is reported as skipped, with the reason.
//! Exit code: 0 when every pod would be admitted, 1 when one would be denied, 2 when the file or
//! the flags cannot be used.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use noe_webhook::admission::Admission;
use noe_webhook::decide::{Decision, Verdict};
use noe_webhook::patch::{pod_template_pointer, with_prefix, Op};
use noe_webhook::resolve::one_line;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::app::App;
use crate::config::{self, Output};

#[derive(Clone, Debug, Args)]
pub struct ExplainArgs {
    /// A Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or CronJob (YAML or JSON,
    /// several documents or a `kind: List` allowed; `-` = stdin).
    #[arg(long, short = 'f', env = "NOE_FILE")]
    pub file: PathBuf,

    /// `json` prints one object per document and line:
    /// `{"kind","name","allowed","message","warnings","patch"}` (or `{"kind","name","skipped"}`).
    #[arg(
        long,
        short = 'o',
        env = "NOE_OUTPUT",
        value_enum,
        default_value = "text"
    )]
    pub output: Output,
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
    #[error("{0}")]
    Setup(String),
}

pub async fn run(config: config::Explain) -> ExitCode {
    match explain_file(config).await {
        Ok(denied) if denied => ExitCode::FAILURE,
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("noe: {error}");
            ExitCode::from(2)
        }
    }
}

/// Explains every document; true when a pod would be denied.
async fn explain_file(config: config::Explain) -> Result<bool, Error> {
    let config::Explain {
        file,
        output,
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
    let app = App::build(registry)
        .await
        .map_err(|error| Error::Setup(one_line(&error)))?;
    // The same admission flow as the server, with node-level credentials only (no cluster).
    let admission = app
        .admission(
            policy,
            admission_deadline,
            noe_webhook::metrics::DEFAULT_MAX_NAMESPACES,
            None,
        )
        .map_err(|error| Error::Setup(one_line(&error)))?;
    let mut denied = false;
    let mut stdout = std::io::stdout().lock();
    for object in &objects {
        let explained = explain(&admission, object).await;
        denied |= explained.denied();
        let printed = match output {
            Output::Json => serde_json::to_string(&explained.json())
                .map_err(std::io::Error::other)
                .and_then(|line| writeln!(stdout, "{line}")),
            Output::Text => explained.write_text(&mut stdout),
        };
        printed.map_err(|source| Error::Read {
            file: "stdout".into(),
            source,
        })?;
    }
    Ok(denied)
}

/// Every object of a file: each non-empty YAML (or JSON) document, a `kind: List` replaced by
/// its items.
pub fn documents(text: &str) -> Result<Vec<Value>, serde_yaml::Error> {
    let mut out = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
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

/// What the webhook would do to one object.
#[derive(Debug)]
pub struct Explained {
    pub kind: String,
    /// `namespace/name` (or `generateName`).
    pub name: String,
    pub outcome: Outcome,
}

#[derive(Debug)]
pub enum Outcome {
    /// Not a Pod or a workload with a pod template.
    Skipped(String),
    Decided {
        decision: Decision,
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
pub async fn explain(admission: &Admission, object: &Value) -> Explained {
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let metadata = object.get("metadata");
    let field = |name: &str| {
        metadata
            .and_then(|m| m.get(name))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let namespace = Some(field("namespace"))
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "default".to_owned());
    let name = Some(field("name"))
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| field("generateName"));
    let explained = |outcome| Explained {
        kind: kind.clone(),
        name: format!("{namespace}/{name}"),
        outcome,
    };
    let Some(prefix) = pod_template_pointer(&kind) else {
        return explained(Outcome::Skipped(format!(
            "kind {kind:?} is not a Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, Job, CronJob or PodTemplate"
        )));
    };
    let Some(pod) = object.pointer(prefix).filter(|pod| pod.is_object()) else {
        return explained(Outcome::Skipped(format!(
            "the {kind} has no pod template at {prefix}"
        )));
    };
    let (decision, note) = if kind == "DaemonSet" {
        let pod = daemonset_pod(pod, &name);
        (
            admission.decision(&pod, &namespace).await,
            Some(DAEMONSET_NOTE),
        )
    } else {
        (admission.decision(pod, &namespace).await, None)
    };
    let patch = match &decision.verdict {
        Verdict::Patch { ops, .. } => with_prefix(ops.clone(), prefix),
        _ => Vec::new(),
    };
    explained(Outcome::Decided {
        decision,
        patch,
        note,
    })
}

/// A pod of the DaemonSet `name` as its controller creates it: the template, with every required
/// node selector term (or a new one) matching the field `metadata.name` of one node, and the
/// DaemonSet as controller owner.
fn daemonset_pod(template: &Value, name: &str) -> Value {
    let mut pod = template.clone();
    let pin = json!({"key": "metadata.name", "operator": "In", "values": ["<node>"]});
    if let Some(metadata) = ensure_object(&mut pod, "metadata") {
        metadata.insert(
            "ownerReferences".into(),
            json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name,
                    "uid": "", "controller": true}]),
        );
    }
    let terms = pod
        .pointer_mut("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array_mut);
    match terms {
        Some(terms) if !terms.is_empty() => {
            for term in terms.iter_mut().filter_map(Value::as_object_mut) {
                term.insert("matchFields".into(), json!([pin.clone()]));
            }
        }
        _ => {
            let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchFields": [pin]}]}}});
            if let Some(spec) = ensure_object(&mut pod, "spec") {
                match spec.get_mut("affinity").and_then(Value::as_object_mut) {
                    Some(existing) => {
                        existing.insert("nodeAffinity".into(), affinity["nodeAffinity"].clone());
                    }
                    None => {
                        spec.insert("affinity".into(), affinity);
                    }
                }
            }
        }
    }
    pod
}

fn ensure_object<'v>(
    value: &'v mut Value,
    key: &str,
) -> Option<&'v mut serde_json::Map<String, Value>> {
    let object = value.as_object_mut()?;
    let entry = object
        .entry(key)
        .or_insert_with(|| Value::Object(Default::default()));
    if !entry.is_object() {
        *entry = Value::Object(Default::default());
    }
    entry.as_object_mut()
}

impl Explained {
    pub fn denied(&self) -> bool {
        matches!(
            &self.outcome,
            Outcome::Decided {
                decision: Decision {
                    verdict: Verdict::Deny { .. },
                    ..
                },
                ..
            }
        )
    }

    /// One sentence: the denial, the platforms written, or why nothing changed.
    pub fn message(&self) -> String {
        match &self.outcome {
            Outcome::Skipped(reason) => format!("skipped: {reason}"),
            Outcome::Decided { decision, note, .. } => {
                let message = match &decision.verdict {
                    Verdict::Deny { message, .. } => message.clone(),
                    Verdict::Patch { common, .. } if common.is_empty() => {
                        "no architecture constraint added".to_owned()
                    }
                    Verdict::Patch { common, .. } => {
                        format!("constrained to the architectures {}", common.join(","))
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

    /// `{"kind","name","allowed","message","warnings","patch"}`, or `{"kind","name","skipped"}`.
    pub fn json(&self) -> Value {
        match &self.outcome {
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
        }
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
        for warning in warnings {
            writeln!(out, "  warning: {warning}")?;
        }
        if !patch.is_empty() {
            let pretty = serde_json::to_string_pretty(patch).map_err(std::io::Error::other)?;
            writeln!(out, "patch:\n{pretty}")?;
        }
        Ok(())
    }
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

    #[test]
    fn daemonset_pods_are_pinned_like_the_controller_pins_them() {
        let pin = json!([{"key": "metadata.name", "operator": "In", "values": ["<node>"]}]);
        let bare = daemonset_pod(&json!({"spec": {"containers": []}}), "agent");
        assert_eq!(
            bare.pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchFields"),
            Some(&pin)
        );
        assert_eq!(
            bare.pointer("/metadata/ownerReferences/0/kind"),
            Some(&json!("DaemonSet"))
        );
        let with_terms = daemonset_pod(
            &json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]}}}}}),
            "agent",
        );
        let term = with_terms
            .pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0")
            .unwrap();
        assert_eq!(term["matchFields"], pin);
        assert_eq!(term["matchExpressions"][0]["key"], "pool");
    }
}
