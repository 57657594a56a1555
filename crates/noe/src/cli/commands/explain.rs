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

mod file_facts;
pub mod validate;

use std::io::{Read, Write};
use std::path::PathBuf;

use clap::Args;
use futures::StreamExt;
use noe_core::decide::{Lookups, PREFERRED_LABEL};
use noe_core::explain::Explanation;
use noe_core::workload;
use noe_webhook::decider::Decider;
use noe_webhook::resolve::one_line;
use noe_webhook::resolve::pull_secrets::PullSecrets;
use serde::Deserialize;
use serde_json::Value;

use super::hosts::Hosts;
use super::progress::Progress;
use super::Exit;
use crate::app::App;
use crate::config::{self, Output};
use file_facts::FileFacts;

/// Documents decided at the same time.
const CONCURRENCY: usize = 8;

#[derive(Clone, Debug, Args)]
pub struct ExplainArgs {
    /// A Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or CronJob (YAML or JSON,
    /// several documents or a `kind: List` allowed; `-` = stdin). Namespaces and Nodes in the
    /// file stand for the cluster's: a namespace's `arch.noe.adevinta.com/preferred` label, and
    /// the node a pod with debug containers is bound to.
    #[arg(long, short = 'f')]
    pub file: PathBuf,

    /// `json` prints one object per document and line:
    /// `{"kind","name","allowed","message","warnings","patch"}` (`"notes"` too when a platform
    /// override answered), or `{"kind","name","skipped"}`.
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    pub output: Output,

    /// Exit 0 even when an image lookup failed (by default `explain` then exits 3, so a CI gate
    /// does not pass because a registry was unreachable).
    #[arg(long)]
    pub allow_lookup_errors: bool,

    /// The cluster's nodes (`kubectl get nodes -o yaml`): image selection by compatibility
    /// artifacts runs as `--image-selection` would, against them (explicit selection for pods
    /// labelled `oci.image.compatibilities.selection/enabled: "true"`, NFD artifacts for every
    /// pod).
    #[arg(long)]
    pub nodes: Option<PathBuf>,

    #[command(flatten)]
    pub learned: super::learned::LearnedSourceArgs,
}

/// Why a file cannot be explained at all.
#[derive(Debug, thiserror::Error)]
enum ExplainError {
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

/// What the explained documents add up to.
#[derive(Debug, Default)]
struct Tally {
    denied: bool,
    lookup_failed: bool,
}

impl Tally {
    fn exit(&self, allow_lookup_errors: bool) -> Exit {
        if self.denied {
            Exit::Failed
        } else if self.lookup_failed && !allow_lookup_errors {
            Exit::Incomplete
        } else {
            Exit::Passed
        }
    }
}

/// Explains every document (`Err`: the file cannot be explained at all).
pub(crate) async fn run(config: config::Explain) -> Result<Exit, impl std::fmt::Display> {
    let config::Explain {
        file,
        output,
        allow_lookup_errors,
        nodes,
        decision: config::Decision {
            policy,
            admission_deadline,
        },
        registry,
        kube,
        learned,
    } = config;
    let nodes = nodes.map(|path| read_nodes(&path)).transpose()?;
    let name = file.display().to_string();
    let text = if file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|source| ExplainError::Read {
                file: "stdin".into(),
                source,
            })?;
        text
    } else {
        std::fs::read_to_string(&file).map_err(|source| ExplainError::Read {
            file: name.clone(),
            source,
        })?
    };
    let objects = documents(&text).map_err(|error| ExplainError::Parse {
        file: name.clone(),
        reason: error.to_string(),
    })?;
    if objects.is_empty() {
        return Err(ExplainError::Empty(name));
    }
    for object in &objects {
        if let Some(reason) = validate::refusal(object) {
            return Err(ExplainError::Invalid {
                file: name,
                object: object_name(object),
                reason,
            });
        }
    }
    // With `--credential-provider-sa-tokens`, the cluster is asked for each pod's
    // ServiceAccount (and its pull secrets), as the server does; otherwise nothing of it.
    let pod_identity = registry.sources.service_account_tokens;
    let pull_secrets = if pod_identity {
        let client = crate::app::kube_client(&kube).await.map_err(|error| {
            ExplainError::Setup(format!(
                "--credential-provider-sa-tokens needs the Kubernetes API: {}",
                one_line(&error)
            ))
        })?;
        Some(PullSecrets::new(client).with_service_account_tokens())
    } else {
        None
    };
    let mut app = App::build(registry)
        .await
        .map_err(|error| ExplainError::Setup(one_line(&error)))?;
    // With `--learned-namespace`, what the cluster's nodes taught counts as in the server.
    let learned = match learned {
        Some(source) => {
            let client = crate::app::kube_client(&kube).await.map_err(|error| {
                ExplainError::Setup(format!(
                    "--learned-namespace needs the Kubernetes API: {}",
                    one_line(&error)
                ))
            })?;
            super::learned::read_for_run(client, &source)
                .await
                .map_err(ExplainError::Setup)?
        }
        None => None,
    };
    if let Some(view) = &learned {
        app = app.with_corrections(std::sync::Arc::new(view.clone()));
    }
    let facts = FileFacts::of(&objects);
    // The same decider as the server, with node-level credentials only (the pods' own
    // with `--credential-provider-sa-tokens`), and the file's Namespaces and Nodes as the
    // cluster's facts.
    let decider = app
        .decider(
            policy,
            admission_deadline,
            noe_webhook::metrics::DEFAULT_MAX_NAMESPACES,
            pull_secrets,
        )
        .map_err(|error| ExplainError::Setup(one_line(&error)))?
        .with_facts(std::sync::Arc::new(facts.clone()));
    let decider = match nodes {
        Some(nodes) => decider.with_selection(noe_webhook::selection::Selection::new(
            app.resolver.clone(),
            std::sync::Arc::new(app.credentials(None)),
            std::sync::Arc::new(noe_webhook::selection::StaticNodes(nodes)),
            noe_webhook::selection::Discovery::Everywhere,
        )),
        None => decider,
    };
    let hosts = Hosts::default();
    let context = Context {
        decider: &decider,
        app: &app,
        facts: &facts,
        hosts: &hosts,
        deadline: admission_deadline,
        pod_identity,
        learned: learned.as_ref(),
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
            Output::Text => write!(stdout, "{}", explained.text()),
        });
        printed.map_err(|source| ExplainError::Read {
            file: "stdout".into(),
            source,
        })?;
    }
    Ok(tally.exit(allow_lookup_errors))
}

/// The nodes of a `kubectl get nodes -o yaml` (or JSON) file, for `--nodes`.
fn read_nodes(path: &std::path::Path) -> Result<Vec<noe_core::selection::NodeFacts>, ExplainError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ExplainError::Read {
        file: name.clone(),
        source,
    })?;
    let objects = documents(&text).map_err(|error| ExplainError::Parse {
        file: name.clone(),
        reason: error.to_string(),
    })?;
    let nodes: Vec<_> = objects
        .iter()
        .filter(|o| o.get("kind").and_then(Value::as_str) == Some("Node"))
        .take(noe_core::selection::nodes::MAX_NODES)
        .filter_map(noe_core::selection::NodeFacts::from_node)
        .collect();
    if nodes.is_empty() {
        return Err(ExplainError::Empty(format!("{name} (no Node)")));
    }
    Ok(nodes)
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

/// What explaining needs: the decider, the shared parts (platform overrides), the file's facts.
pub struct Context<'a> {
    pub decider: &'a Decider,
    pub app: &'a App,
    pub facts: &'a FileFacts,
    /// The registry hosts of this run that timed out (their later images are not tried).
    pub hosts: &'a Hosts,
    /// `--admission-deadline`: how long an image's lookup may take.
    pub deadline: std::time::Duration,
    /// `--credential-provider-sa-tokens`: a pod running as a ServiceAccount is looked up as it,
    /// by the admission itself.
    pub pod_identity: bool,
    /// The learned store read (`--learned-namespace`): the corrections it holds are shown as
    /// "learned".
    pub learned: Option<&'a noe_controller::LearnedView>,
}

/// Decides for a Pod or the pod template of a workload, as the webhook would for its pods
/// (the engine is `noe_core::explain`; here are the lookups, the file's facts and the notes).
pub async fn explain(context: &Context<'_>, object: &Value) -> Explanation {
    let decider = context.decider;
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let fact = match kind {
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
        (Some(reason), _) => return Explanation::skipped(object, reason),
        (None, Err(no_pod)) => return Explanation::skipped(object, no_pod.to_string()),
        (None, Ok(pod_of)) => pod_of,
    };
    let namespace = pod_of.namespace;
    let pod = pod_of.pod.as_ref();
    let mut notes = override_notes(context.app, pod).await;
    let node = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    let debug = pod
        .pointer("/spec/ephemeralContainers")
        .and_then(Value::as_array)
        .is_some_and(|c| !c.is_empty());
    let mut explanation = if let (Some(node), true) = (node, debug) {
        // A bound pod with debug containers: they are checked as if just added.
        if !context.facts.has_node(node) {
            notes.push(format!(
                "debug containers not checked: node {node} is not in the file (add the Node to check them)"
            ));
        }
        let decision = decider.debug_decision(pod, None, namespace).await;
        Explanation::debug(&pod_of, decision)
    } else {
        let known = looked_up(context, pod).await;
        let decision = decider.decision_with(pod, namespace, known).await;
        Explanation::decided(&pod_of, decision)
    };
    explanation.notes = notes;
    if let Some(view) = context.learned {
        explanation.learned = explanation
            .applied()
            .into_iter()
            .filter(|(_, c)| view.knows(&c.digest, &c.platform))
            .map(|(image, c)| (image.to_owned(), c.clone()))
            .collect();
    }
    for failure in &mut explanation.lookup_errors {
        failure.error = with_plain_http_hint(&failure.image, &failure.error);
    }
    explanation
}

/// The images of `pod` looked up a few per registry host at a time ([`Hosts`]): those that
/// failed, with their error, for the admission to take as they are; a host's images after its
/// first timeout fail at once, not tried. The others are in the resolver's cache for the
/// admission.
async fn looked_up(context: &Context<'_>, pod: &Value) -> Lookups {
    let app = context.app;
    let account = pod
        .pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .is_some_and(|name| !name.is_empty());
    if context.pod_identity && account {
        // Its credentials are its account's: the admission looks its images up.
        return Lookups::new();
    }
    // What the admission looks up: containers, init containers and image volumes, each once.
    let images: Vec<&str> = pod
        .get("spec")
        .map(noe_core::images::of_spec)
        .unwrap_or_default()
        .into_iter()
        .map(|(image, _)| image)
        .collect();
    let lookups = images.into_iter().map(|image| async move {
        // A platform override answers in the admission, before any registry.
        if let Ok(Some(_)) = app.platform_override(image).await {
            return None;
        }
        let host = app.resolver.target(image).ok().map(|t| t.registry);
        let answer = context
            .hosts
            .run(host.as_deref(), context.deadline, app.resolve(image))
            .await;
        answer.err().map(|error| (image.to_owned(), Err(error)))
    });
    futures::future::join_all(lookups)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// A note per image of `pod` a `--platform-overrides` entry answers for.
async fn override_notes(app: &App, pod: &Value) -> Vec<String> {
    let mut notes = Vec::new();
    for image in noe_core::images::named(pod) {
        if let Ok(Some(found)) = app.platform_override(image).await {
            notes.push(format!(
                "platforms of {image} from --platform-overrides {} entry {} (pattern {}): {}",
                found.file.display(),
                found.matched.entry,
                found.matched.pattern,
                found.matched.platforms_text()
            ));
        }
    }
    notes
}

/// `error` with what to do when the registry answered plain HTTP to our TLS handshake (rustls
/// names the record it could not read).
fn with_plain_http_hint(image: &str, error: &str) -> String {
    if !super::plain_http::is_plain_http_text(error) {
        return error.to_owned();
    }
    let host = noe_registry::Reference::parse(image)
        .map(|reference| reference.registry)
        .unwrap_or_else(|_| "the registry".to_owned());
    format!("{error} ({})", super::plain_http::plain_http_hint(&host))
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
