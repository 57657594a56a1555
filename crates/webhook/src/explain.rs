//! `noe explain -f FILE`: what the webhook would do to a Pod or workload, without a cluster.

use std::path::PathBuf;
use std::process::ExitCode;

use std::io::{Read, Write};
use std::sync::Arc;

use clap::Args;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::admission::Admission;
use crate::decide::{Decision, Verdict};
use crate::lookup::Credentials;
use crate::metrics::Metrics;
use crate::patch::{pod_template_pointer, with_prefix};

use crate::args::{PolicyArgs, RegistryArgs};
use crate::inspect::Output;

#[derive(Clone, Debug, Args)]
pub struct ExplainArgs {
    /// A Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or CronJob (YAML or JSON; `-` = stdin).
    #[arg(long, short = 'f', env = "NOE_FILE")]
    pub file: PathBuf,

    /// `json` prints `{"allowed","message","warnings","patch"}`.
    #[arg(
        long,
        short = 'o',
        env = "NOE_OUTPUT",
        value_enum,
        default_value = "text"
    )]
    pub output: Output,

    #[command(flatten)]
    pub policy: PolicyArgs,

    #[command(flatten)]
    pub registry: RegistryArgs,
}

impl ExplainArgs {
    pub async fn run(self) -> ExitCode {
        match self.explain().await {
            Ok(()) => ExitCode::SUCCESS,
            Err(reason) => {
                eprintln!("noe: {reason}");
                ExitCode::FAILURE
            }
        }
    }

    async fn explain(&self) -> Result<(), String> {
        let text = if self.file.as_os_str() == "-" {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|error| format!("cannot read stdin: {error}"))?;
            text
        } else {
            std::fs::read_to_string(&self.file)
                .map_err(|error| format!("cannot read {}: {error}", self.file.display()))?
        };
        let documents = documents(&text)
            .map_err(|error| format!("{} is not YAML or JSON: {error}", self.file.display()))?;
        if documents.is_empty() {
            return Err(format!("{} holds no object", self.file.display()));
        }
        let admission = self.admission().await?;
        let mut stdout = std::io::stdout().lock();
        for document in &documents {
            let explained = explain(&admission, document).await?;
            let printed = match self.output {
                Output::Json => serde_json::to_string(&explained.json())
                    .map_err(|error| error.to_string())
                    .and_then(|line| writeln!(stdout, "{line}").map_err(|e| e.to_string())),
                Output::Text => explained
                    .write_text(&mut stdout)
                    .map_err(|error| error.to_string()),
            };
            printed?;
        }
        Ok(())
    }

    /// The same admission flow as the server, with node-level credentials only (no cluster).
    async fn admission(&self) -> Result<Admission, String> {
        let metrics = prometheus::Registry::new();
        let policy = self.policy.to_policy()?;
        let (resolver, sources) = self.registry.build(&metrics).await?;
        let credentials = Credentials {
            resolver: resolver.clone(),
            sources: Arc::new(sources),
            pull_secrets: None,
        };
        let webhook_metrics = Metrics::register(&metrics).map_err(|error| error.to_string())?;
        Ok(Admission::new(
            Arc::new(resolver),
            Arc::new(credentials),
            policy,
            self.policy.admission_deadline,
            webhook_metrics,
            self.registry.configured_hosts(),
        ))
    }
}

/// Every non-empty YAML (or JSON) document of a file.
pub fn documents(text: &str) -> Result<Vec<Value>, serde_yaml::Error> {
    let mut out = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value = Value::deserialize(document)?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

/// What the webhook would do to one object.
#[derive(Debug)]
pub struct Explained {
    pub kind: String,
    pub name: String,
    pub decision: Decision,
    /// The patch against the file's object (pod template paths prefixed for workloads).
    pub patch: Vec<crate::patch::Op>,
}

/// Decides for a Pod or the pod template of a workload.
pub async fn explain(admission: &Admission, object: &Value) -> Result<Explained, String> {
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let prefix = pod_template_pointer(&kind).ok_or_else(|| {
        format!(
            "cannot explain kind {kind:?}: expected Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or CronJob"
        )
    })?;
    let pod = object
        .pointer(prefix)
        .filter(|pod| pod.is_object())
        .ok_or_else(|| format!("the {kind} has no pod template at {prefix}"))?;
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
    let decision = admission.decision(pod, &namespace).await;
    let patch = match &decision.verdict {
        Verdict::Patch { ops, .. } => with_prefix(ops.clone(), prefix),
        _ => Vec::new(),
    };
    Ok(Explained {
        kind,
        name: format!("{namespace}/{name}"),
        decision,
        patch,
    })
}

impl Explained {
    pub fn allowed(&self) -> bool {
        !matches!(self.decision.verdict, Verdict::Deny { .. })
    }

    /// One sentence: the denial, the platforms written, or why nothing changed.
    pub fn message(&self) -> String {
        match &self.decision.verdict {
            Verdict::Deny { message, .. } => message.clone(),
            Verdict::Patch { common, .. } if common.is_empty() => {
                "no architecture constraint added; node labels copied".to_owned()
            }
            Verdict::Patch { common, .. } => {
                format!("constrained to the architectures {}", common.join(","))
            }
            Verdict::Unchanged { reason } => format!("unchanged: {}", reason.as_str()),
        }
    }

    /// `{"allowed","message","warnings","patch"}`.
    pub fn json(&self) -> Value {
        json!({
            "allowed": self.allowed(),
            "message": self.message(),
            "warnings": self.decision.warnings,
            "patch": self.patch,
        })
    }

    pub fn write_text(&self, out: &mut impl Write) -> std::io::Result<()> {
        let verdict = match &self.decision.verdict {
            Verdict::Deny { code, .. } => format!("denied ({code})"),
            Verdict::Patch { .. } => "allowed, patched".to_owned(),
            Verdict::Unchanged { .. } => "allowed unchanged".to_owned(),
        };
        writeln!(out, "{} {}: {verdict}", self.kind, self.name)?;
        writeln!(out, "  {}", self.message())?;
        for warning in &self.decision.warnings {
            writeln!(out, "  warning: {warning}")?;
        }
        if !self.patch.is_empty() {
            let pretty = serde_json::to_string_pretty(&self.patch).unwrap_or_default();
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
        ];
        for (text, want) in cases {
            assert_eq!(documents(text).unwrap().len(), *want, "{text:?}");
        }
        assert!(documents("kind: [").is_err());
    }
}
