//! The explain engine: what the webhook would do to an object, as an [`Explanation`] with a
//! text and a JSON rendering, shared by `noe explain` and whatever else explains a decision (a
//! report over a cluster, a lookup endpoint). Pure: the caller does the I/O.
//!
//! 1. The object stands for a pod ([`crate::workload::pod_of`]: a Pod as it is, a workload's pod
//!    template as its controller creates pods from it), or it is [`Explanation::skipped`].
//! 2. The caller looks that pod's images up and decides ([`crate::decide`]).
//! 3. [`Explanation::decided`] (or [`Explanation::debug`] for debug containers checked against
//!    the pod's node) reads the decision's [`Summary`](crate::decide::Summary) — never the patch
//!    again — and says in words what the webhook does: the denial, the constraint written
//!    (pinned to the preferred arch, or constrained to the common set), tolerations and node
//!    labels added, audit mode.

use serde_json::{json, Value};

use crate::decide::{Constraint, Decision, Signal, Verdict, AUDIT_ANNOTATION};
use crate::patch::{with_prefix, Op};
use crate::truth::Correction;
use crate::workload::PodOf;

/// What the webhook would do to one object.
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    /// The object's `kind`.
    pub kind: String,
    /// `namespace/name` (or `generateName`); a cluster-scoped object's name alone.
    pub name: String,
    pub outcome: Outcome,
    /// What else explains the outcome (where an image's platforms came from, what could not be
    /// checked), in the caller's words.
    pub notes: Vec<String>,
    /// Each image whose platforms could not be found, with its whole error (the admission
    /// warnings cut it to the API server's limit).
    pub lookup_errors: Vec<LookupError>,
    /// The corrections applied that the cluster's learned store holds, with their image, in
    /// the pod's order (set by the caller that read the store): shown as "learned".
    pub learned: Vec<(String, Correction)>,
}

/// An image whose platforms could not be found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LookupError {
    /// The reference as written in the pod.
    pub image: String,
    pub error: String,
}

/// Decided, or not a pod.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Not a Pod or a workload with a pod template (the reason).
    Skipped(String),
    Decided {
        decision: Box<Decision>,
        /// The patch against the object (pod template paths prefixed for workloads).
        patch: Vec<Op>,
        /// How the object's pods differ from what was decided.
        note: Option<Note>,
    },
}

/// A note on what was decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Note {
    /// A DaemonSet's pods are pinned to their node by its controller.
    DaemonSet,
    /// The pod's debug containers were checked against its node (`pods/ephemeralcontainers`).
    Debug,
}

impl Note {
    fn text(self) -> &'static str {
        match self {
            Self::DaemonSet => "DaemonSet pods are pinned to their node by the DaemonSet controller: no architecture constraint is added",
            Self::Debug => "debug containers checked against the pod's node",
        }
    }
}

/// `Kind namespace/name` of an object, `default` namespace when absent; a Namespace's or
/// Node's name alone.
fn shown_name(kind: &str, namespace: &str, name: &str) -> String {
    if matches!(kind, "Namespace" | "Node") {
        name.to_owned()
    } else {
        format!("{namespace}/{name}")
    }
}

/// The failed lookups the decision signalled, in order.
fn lookup_errors(decision: &Decision) -> Vec<LookupError> {
    decision
        .signals
        .iter()
        .filter_map(|signal| match signal {
            Signal::LookupFailed { image, error } => Some(LookupError {
                image: image.clone(),
                error: error.clone(),
            }),
            _ => None,
        })
        .collect()
}

impl Explanation {
    /// An object that is not decided, and why.
    pub fn skipped(object: &Value, reason: String) -> Self {
        let (kind, namespace, name) = crate::workload::identity(object);
        Self {
            kind: kind.to_owned(),
            name: shown_name(kind, namespace, name),
            outcome: Outcome::Skipped(reason),
            notes: Vec::new(),
            lookup_errors: Vec::new(),
            learned: Vec::new(),
        }
    }

    /// The decision for the pod `pod_of` stands for; its patch moved under the pod template.
    pub fn decided(pod_of: &PodOf<'_>, decision: Decision) -> Self {
        let patch = match &decision.verdict {
            Verdict::Patch { ops, .. } => with_prefix(ops.clone(), pod_of.template),
            _ => Vec::new(),
        };
        let note = (pod_of.kind == "DaemonSet").then_some(Note::DaemonSet);
        Self::of(pod_of, decision, patch, note)
    }

    /// The check of the debug containers of a pod bound to a node (nothing is patched).
    pub fn debug(pod_of: &PodOf<'_>, decision: Decision) -> Self {
        Self::of(pod_of, decision, Vec::new(), Some(Note::Debug))
    }

    fn of(pod_of: &PodOf<'_>, decision: Decision, patch: Vec<Op>, note: Option<Note>) -> Self {
        Self {
            kind: pod_of.kind.to_owned(),
            name: shown_name(pod_of.kind, pod_of.namespace, pod_of.name),
            lookup_errors: lookup_errors(&decision),
            outcome: Outcome::Decided {
                decision: Box::new(decision),
                patch,
                note,
            },
            notes: Vec::new(),
            learned: Vec::new(),
        }
    }

    /// The decision, unless the object was skipped.
    pub fn decision(&self) -> Option<&Decision> {
        match &self.outcome {
            Outcome::Decided { decision, .. } => Some(decision),
            Outcome::Skipped(_) => None,
        }
    }

    /// An image's platforms could not be found.
    pub fn lookup_failed(&self) -> bool {
        !self.lookup_errors.is_empty()
    }

    /// The pod would be denied.
    pub fn denied(&self) -> bool {
        self.decision()
            .is_some_and(|d| matches!(d.verdict, Verdict::Deny { .. }))
    }

    /// One sentence: the denial, what the patch does, or why nothing changed.
    pub fn message(&self) -> String {
        let (decision, note) = match &self.outcome {
            Outcome::Skipped(reason) => return format!("skipped: {reason}"),
            Outcome::Decided { decision, note, .. } => (decision, *note),
        };
        let message = match &decision.verdict {
            Verdict::Deny { message, .. } => message.clone(),
            Verdict::Patch { .. } => patch_summary(decision),
            Verdict::Unchanged { .. } if note == Some(Note::Debug) => {
                return "debug containers allowed (checked against the pod's node)".to_owned()
            }
            Verdict::Unchanged { reason } => format!("unchanged: {}", reason.as_str()),
        };
        match note {
            Some(note) => format!("{message} ({})", note.text()),
            None => message,
        }
    }

    /// `{"kind","name","allowed","message","warnings","patch"}` (`"notes"`, `"lookupErrors"`,
    /// `"corrections"` and `"learned"` when there are any), or `{"kind","name","skipped"}`.
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
        let corrections: Vec<Value> = self
            .applied()
            .into_iter()
            .map(|(image, c)| correction_json(image, c))
            .collect();
        if !corrections.is_empty() {
            json["corrections"] = Value::Array(corrections);
        }
        if !self.learned.is_empty() {
            json["learned"] = self
                .learned
                .iter()
                .map(|(image, c)| correction_json(image, c))
                .collect();
        }
        if !self.lookup_errors.is_empty() {
            json["lookupErrors"] = self
                .lookup_errors
                .iter()
                .map(|e| json!({"image": e.image, "error": e.error}))
                .collect();
        }
        json
    }

    /// Each platform correction the decision applied, with its image, images in the pod's
    /// order.
    pub fn applied(&self) -> Vec<(&str, &Correction)> {
        let Some(decision) = self.decision() else {
            return Vec::new();
        };
        decision
            .summary
            .images
            .iter()
            .flat_map(|entry| entry.corrections.iter().map(|c| (entry.image.as_str(), c)))
            .collect()
    }

    /// The verdict line, the message, warnings, lookup errors, notes and the patch (pretty JSON).
    pub fn text(&self) -> String {
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
        let mut out = format!(
            "{} {}: {verdict}\n  {}\n",
            self.kind,
            self.name,
            self.message()
        );
        for warning in warnings {
            // A warning cut to the API server's limit is a lookup's: its whole text follows.
            let cut = warning.ends_with("...")
                && warning.chars().count() >= crate::decide::MAX_WARNING_CHARS;
            if !cut || self.lookup_errors.is_empty() {
                out.push_str(&format!("  warning: {warning}\n"));
            }
        }
        for LookupError { image, error } in &self.lookup_errors {
            out.push_str(&format!("  lookup failed: {image}: {error}\n"));
        }
        for (image, c) in &self.learned {
            out.push_str(&format!(
                "  learned: {image} does not run on {} ({}: {})\n",
                c.platform, c.source, c.evidence
            ));
        }
        for note in &self.notes {
            out.push_str(&format!("  note: {note}\n"));
        }
        if !patch.is_empty() {
            let pretty = serde_json::to_string_pretty(patch).unwrap_or_default();
            out.push_str(&format!("patch:\n{pretty}\n"));
        }
        out
    }
}

/// `{"image","digest","platform","source","evidence"}`.
fn correction_json(image: &str, c: &Correction) -> Value {
    json!({"image": image, "digest": c.digest, "platform": c.platform.to_string(),
           "source": c.source.as_str(), "evidence": c.evidence})
}

/// What a patch does, in words, from the decision's summary: audit mode (nothing else is
/// written), the constraint (pinned to the preferred arch, or constrained to the common set,
/// with a soft preference), tolerations added, node labels copied.
fn patch_summary(decision: &Decision) -> String {
    let summary = &decision.summary;
    if let Some(value) = &summary.audit {
        return format!("audit mode: nothing enforced, annotated {AUDIT_ANNOTATION}={value}");
    }
    let mut parts = Vec::new();
    let common = || summary.common.as_deref().unwrap_or_default().join(",");
    match &summary.constraint {
        Constraint::Pinned { arch } => parts.push(format!(
            "pinned to the preferred architecture {arch} (every image supports {})",
            common()
        )),
        Constraint::Constrained { archs } => {
            let mut part = format!("constrained to the architectures {}", archs.join(","));
            if let Some(preferred) = &summary.preferred {
                part.push_str(&format!(", preferring {preferred}"));
            }
            parts.push(part);
        }
        Constraint::User { .. } | Constraint::None => {}
    }
    if !summary.tolerations.is_empty() {
        parts.push("tolerations added".to_owned());
    }
    if !summary.node_labels.is_empty() {
        parts.push(format!(
            "pod labels copied into nodeSelector: {}",
            summary.node_labels.join(", ")
        ));
    }
    if parts.is_empty() {
        parts.push("patched without an architecture constraint".to_owned());
    }
    parts.join("; ")
}
