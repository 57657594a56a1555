//! The pure decisions of exec-format-error detection, once a container's status or log said it:
//! what is learned (or why not), whether the pod is evicted (or why not), and the Event's note.
//! Table-tested in `crates/controller/tests/controller/tables.rs`.

use std::collections::BTreeSet;

use noe_core::truth::{Correction, Source};

use super::signal::Origin;
use crate::learned::entry::is_digest;
use crate::{ImageLookup, Platform, Remediate, Support};

/// The Event reason of a detection.
pub const REASON: &str = "ExecFormatError";

/// What is known of a detection.
#[derive(Clone, Debug)]
pub struct Case<'a> {
    /// Who wrote the text that says exec format error.
    pub origin: Origin,
    /// The container's spec sets `command` or `args`.
    pub program_overridden: bool,
    /// The node's platform (`None`: the node is not in the reflector, or has no arch label).
    pub node: Option<&'a Platform>,
    /// The container status's `imageID`.
    pub image_id: &'a str,
    /// `--remediate`.
    pub mode: Remediate,
    /// The kind of the pod's controller owner.
    pub owner_kind: Option<&'a str>,
    /// A mirror pod of a static pod.
    pub mirror: bool,
    /// Being deleted.
    pub deleting: bool,
    /// Its namespace is exempt from evictions.
    pub exempt: bool,
}

/// Why nothing is learned from a detection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotLearned {
    /// The node is not in the reflector (or has no `kubernetes.io/arch`).
    NodeUnknown,
    /// `imageID` names no registry digest.
    NoDigest,
    /// The text came from the container's own output and its spec sets `command` or `args`:
    /// the program it ran may have written it.
    Overridden,
}

/// Why a pod is left in place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kept {
    /// `--remediate` is not `evict`.
    NotEvicting,
    /// Nothing was learned: its replacement would land on the same platform.
    NotLearned,
    /// No controller owner would recreate it.
    NoController,
    /// A DaemonSet recreates it on the same node.
    DaemonSet,
    /// The kubelet owns it (static pod).
    Mirror,
    /// Already being deleted.
    Deleting,
    /// Its namespace is exempt from evictions.
    Exempt,
    /// Its images have no platform in common on the cluster's nodes once the learned one is
    /// removed (the words say which).
    Nowhere(String),
}

/// What to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The digest and the platform to learn, or why not.
    pub learn: Result<(String, Platform), NotLearned>,
    /// Evict (once the other images are checked), or why not.
    pub evict: Result<(), Kept>,
}

/// The registry digest in an `imageID` (`registry/repo@sha256:...`, `docker-pullable://
/// repo@sha256:...`); `None` for a bare image ID (`sha256:...` of a config: a local image) or
/// anything else.
pub fn digest_of(image_id: &str) -> Option<&str> {
    let (_, digest) = image_id.rsplit_once('@')?;
    is_digest(digest).then_some(digest)
}

/// The platform learned from a node: its OS and architecture (nodes carry no variant, so the
/// correction covers every variant).
fn learned_platform(node: &Platform) -> Platform {
    Platform::new(node.os.clone(), node.architecture.clone(), None)
}

/// What to do about a detection.
pub fn plan(case: &Case<'_>) -> Plan {
    let learn = match (case.node, digest_of(case.image_id)) {
        _ if case.origin == Origin::Output && case.program_overridden => {
            Err(NotLearned::Overridden)
        }
        (None, _) => Err(NotLearned::NodeUnknown),
        (_, None) => Err(NotLearned::NoDigest),
        (Some(node), Some(digest)) => Ok((digest.to_owned(), learned_platform(node))),
    };
    let evict = if case.mode != Remediate::Evict {
        Err(Kept::NotEvicting)
    } else if learn.is_err() {
        Err(Kept::NotLearned)
    } else if case.deleting {
        Err(Kept::Deleting)
    } else if case.mirror || case.owner_kind == Some("Node") {
        Err(Kept::Mirror)
    } else if case.owner_kind == Some("DaemonSet") {
        Err(Kept::DaemonSet)
    } else if case.owner_kind.is_none() {
        Err(Kept::NoController)
    } else if case.exempt {
        Err(Kept::Exempt)
    } else {
        Ok(())
    };
    Plan { learn, evict }
}

/// Whether a replacement of the pod could run somewhere: a platform of the cluster's nodes that
/// every image supports, `failing`'s support without `learned`. `Err` names the images (or the
/// unknown lookup) in words.
pub fn placeable(
    lookups: &[ImageLookup],
    images: &[String],
    failing: &str,
    learned: &Platform,
    cluster: &BTreeSet<Platform>,
) -> Result<(), String> {
    let correction = Correction::new("", learned.clone(), Source::ExecFormatError, "");
    let covers = |platform: &Platform| correction.covers(platform);
    let mut supports: Vec<(&str, &Support)> = Vec::new();
    for image in images {
        let lookup = lookups.iter().find(|lookup| lookup.image == *image);
        match lookup.map(|lookup| &lookup.support) {
            Some(Ok(support)) => supports.push((image, support)),
            Some(Err(error)) => {
                return Err(format!(
                    "the platforms of {image} are unknown ({})",
                    error.reason
                ))
            }
            None => return Err(format!("the platforms of {image} are unknown")),
        }
    }
    let runs = |platform: &Platform| {
        supports.iter().all(|(image, support)| {
            support.runs_on(platform) && !(*image == failing && covers(platform))
        })
    };
    if cluster.iter().any(runs) {
        return Ok(());
    }
    let words: Vec<String> = supports
        .iter()
        .map(|(image, support)| {
            let platforms: Vec<String> = match support {
                Support::Any => vec!["*".to_owned()],
                Support::Only(set) => set
                    .iter()
                    .filter(|p| !(*image == failing && covers(p)))
                    .map(ToString::to_string)
                    .collect(),
            };
            format!("{image} [{}]", platforms.join(", "))
        })
        .collect();
    let nodes: Vec<String> = cluster.iter().map(ToString::to_string).collect();
    Err(format!(
        "no platform of the cluster's nodes ({}) runs all its images: {}",
        nodes.join(", "),
        words.join(" ")
    ))
}

/// What the Event tells.
#[derive(Clone, Debug)]
pub struct Told<'a> {
    /// The container.
    pub container: &'a str,
    /// Its image.
    pub image: &'a str,
    /// The node's name.
    pub node_name: &'a str,
    /// The node's platform, when known.
    pub node: Option<&'a Platform>,
    /// The line that says exec format error.
    pub evidence: &'a str,
    /// Where it was seen.
    pub seen: super::Seen,
    /// What was learned: `Ok(true)` written now, `Ok(false)` known already, `Err` why not.
    pub learned: Result<bool, NotLearned>,
    /// The digest and platform learned.
    pub correction: Option<(&'a str, &'a Platform)>,
    /// Whether the pod is evicted, or why not.
    pub evict: &'a Result<(), Kept>,
}

/// The Event note, cut to [`crate::remediate::MAX_NOTE`] bytes.
pub fn note(told: &Told<'_>) -> String {
    let node = match told.node {
        Some(platform) => format!("{} ({platform})", told.node_name),
        None => told.node_name.to_owned(),
    };
    let seen = match told.seen {
        super::Seen::Status => format!("its status says \"{}\"", told.evidence),
        super::Seen::Log => format!("its previous log says \"{}\"", told.evidence),
        super::Seen::Learned => format!("it crashed at once ({})", told.evidence),
    };
    let mut text = format!(
        "container {} (image {}) cannot run on node {node}: {seen}",
        told.container, told.image
    );
    match (&told.learned, told.correction) {
        (Ok(new), Some((digest, platform))) => text.push_str(&format!(
            "; {} {digest} does not run on {platform}",
            if *new { "learned:" } else { "known:" }
        )),
        (Err(NotLearned::NodeUnknown), _) => {
            text.push_str("; not learned: the node is not known (no kubernetes.io/arch)")
        }
        (Err(NotLearned::NoDigest), _) => {
            text.push_str("; not learned: its imageID names no registry digest")
        }
        (Err(NotLearned::Overridden), _) => text.push_str(
            "; not learned: the container sets command or args, so its output is no evidence",
        ),
        (Ok(_), None) => {}
    }
    match told.evict {
        Ok(()) => text.push_str("; evicting"),
        Err(Kept::NotEvicting | Kept::NotLearned) => {}
        Err(Kept::NoController) => {
            text.push_str("; not evicted: no controller owner would recreate it")
        }
        Err(Kept::DaemonSet) => {
            text.push_str("; not evicted: its DaemonSet would recreate it on the same node")
        }
        Err(Kept::Mirror) => text.push_str("; not evicted: a static pod"),
        Err(Kept::Deleting) => text.push_str("; not evicted: already being deleted"),
        Err(Kept::Exempt) => text.push_str("; not evicted: its namespace is exempt"),
        Err(Kept::Nowhere(why)) => text.push_str(&format!("; not evicted: {why}")),
    }
    crate::remediate::shorten(text)
}
