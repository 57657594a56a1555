//! The pure decisions of pod remediation: is the pod in scope, and do its images run on its
//! node. Table-tested in `crates/controller/tests/controller/tables.rs`.

use crate::objects::{NodeRecord, PodRecord};
use crate::{ImageLookup, Platform, Remediate};

/// The longest Event note (the Events API caps `note` at 1 kB).
pub const MAX_NOTE: usize = 1024;

/// Why a pod is not judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// `deletionTimestamp` set.
    Deleting,
    /// Succeeded or Failed.
    Finished,
    /// A static pod's mirror (the kubelet owns it).
    Mirror,
    /// A DaemonSet pod (it is placed per node on purpose).
    DaemonSet,
    /// More distinct images than we judge.
    TooManyImages,
    /// No image at all.
    NoImages,
    /// Its node is not (yet) in the node reflector.
    NodeUnknown,
    /// Its node has no `kubernetes.io/arch` label.
    NodeWithoutArch,
}

impl Skip {
    /// Metric label (`noe_controller_pods_checked_total{result}`).
    pub fn label(self) -> &'static str {
        match self {
            Self::Deleting => "skipped_deleting",
            Self::Finished => "skipped_finished",
            Self::Mirror => "skipped_mirror",
            Self::DaemonSet => "skipped_daemonset",
            Self::TooManyImages => "skipped_too_many_images",
            Self::NoImages => "skipped_no_images",
            Self::NodeUnknown => "node_unknown",
            Self::NodeWithoutArch => "node_without_arch",
        }
    }
}

/// The node's platform when the pod is in scope.
pub fn screen(pod: &PodRecord, node: Option<&NodeRecord>) -> Result<Platform, Skip> {
    if pod.deleting {
        return Err(Skip::Deleting);
    }
    if pod.phase.is_finished() {
        return Err(Skip::Finished);
    }
    let owner_kind = pod.owner.as_ref().map(|owner| owner.kind.as_str());
    if pod.mirror || owner_kind == Some("Node") {
        return Err(Skip::Mirror);
    }
    if owner_kind == Some("DaemonSet") {
        return Err(Skip::DaemonSet);
    }
    if pod.too_many_images {
        return Err(Skip::TooManyImages);
    }
    if pod.images.is_empty() {
        return Err(Skip::NoImages);
    }
    let node = node.ok_or(Skip::NodeUnknown)?;
    node.platform().ok_or(Skip::NodeWithoutArch)
}

/// An image that cannot run on the node, with what it supports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Misfit {
    /// As written in the pod.
    pub image: String,
    /// What it supports (sorted).
    pub platforms: Vec<Platform>,
}

/// What to do about a misplaced pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Remedy {
    /// An Event and a metric.
    Report,
    /// Report, then evict.
    Evict,
    /// Evict mode, but the pod has no controller owner (nothing would recreate it): report.
    ReportNoController,
    /// Evict mode, but the pod's namespace is exempt from evictions (`kube-system`, noe's own
    /// namespace, or `--remediate-exempt-namespaces`): report.
    ReportExempt,
}

/// The verdict on a pod in scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every image runs on the node.
    Fits,
    /// Some image's platforms are unknown: never act on uncertainty.
    LookupFailed,
    /// Some image cannot run on the node.
    Misplaced {
        /// The images that cannot, in pod order.
        misfits: Vec<Misfit>,
        /// What to do.
        remedy: Remedy,
    },
}

/// Judges a pod in scope on `node` from its images' lookups.
pub fn judge(
    pod: &PodRecord,
    node: &Platform,
    lookups: &[ImageLookup],
    mode: Remediate,
) -> Verdict {
    let mut misfits = Vec::new();
    for image in &pod.images {
        let Some(lookup) = lookups.iter().find(|lookup| lookup.image == *image) else {
            return Verdict::LookupFailed;
        };
        let Ok(support) = &lookup.support else {
            return Verdict::LookupFailed;
        };
        if !support.runs_on(node) {
            let platforms = match support {
                crate::Support::Only(set) => set.iter().cloned().collect(),
                crate::Support::Any => Vec::new(),
            };
            misfits.push(Misfit {
                image: image.clone(),
                platforms,
            });
        }
    }
    if misfits.is_empty() {
        return Verdict::Fits;
    }
    let remedy = match mode {
        Remediate::Evict if pod.owner.is_some() => Remedy::Evict,
        Remediate::Evict => Remedy::ReportNoController,
        Remediate::Report | Remediate::Off => Remedy::Report,
    };
    Verdict::Misplaced { misfits, remedy }
}

/// `remedy` for a pod of `namespace`: an eviction becomes a report in an exempt namespace.
pub fn exempt(
    remedy: Remedy,
    namespace: &str,
    exempt_namespaces: &std::collections::BTreeSet<String>,
) -> Remedy {
    if remedy == Remedy::Evict && exempt_namespaces.contains(namespace) {
        Remedy::ReportExempt
    } else {
        remedy
    }
}

/// The Event note: the node's platform and each image that cannot run there, cut to
/// [`MAX_NOTE`] bytes.
pub fn note(node_name: &str, node: &Platform, misfits: &[Misfit], remedy: Remedy) -> String {
    let mut text = format!("node {node_name} is {node}; images that cannot run there:");
    for misfit in misfits {
        let platforms: Vec<String> = misfit.platforms.iter().map(ToString::to_string).collect();
        text.push_str(&format!(" {} [{}]", misfit.image, platforms.join(", ")));
    }
    match remedy {
        Remedy::Report => {}
        Remedy::Evict => text.push_str("; evicting"),
        Remedy::ReportNoController => {
            text.push_str("; not evicted: no controller owner would recreate it")
        }
        Remedy::ReportExempt => text.push_str("; not evicted: its namespace is exempt"),
    }
    shorten(text)
}

/// `text` cut to [`MAX_NOTE`] bytes (ending with `...` when cut).
pub fn shorten(mut text: String) -> String {
    if text.len() > MAX_NOTE {
        let mut end = MAX_NOTE.saturating_sub(3);
        while !text.is_char_boundary(end) {
            end = end.saturating_sub(1);
        }
        text.truncate(end);
        text.push_str("...");
    }
    text
}
