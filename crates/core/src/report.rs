//! `noe report`'s pure half: workloads and their images' platforms in, a readiness report out
//! (docs/configuration.md, "noe report"). No I/O: the command line lists the workloads, resolves
//! each unique image once and hands the answers here.
//!
//! - [`quantity`]: Kubernetes quantities, exact (integer milli-units and bytes).
//! - [`read`](mod@read): one object → a workload (its pod template's images, OS, pull secrets,
//!   requests and replicas), an object its owner stands for, or a node.
//! - here: the verdict per target architecture (`ready`, `blocked`, `unknown`: an image that
//!   could not be resolved is never counted as ready), the images that block, the common
//!   platforms, requests × replicas, totals per architecture and namespace, pods placed where
//!   they run now.
//! - [`render`]: JSON (`report.noe.adevinta.com/v1` `ReadinessReport`), table, CSV, Markdown.

pub mod objects;
pub mod quantity;
pub mod render;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::images::ImageKind;
use crate::upgrade::Upgrade;
use crate::{Platform, Support};
pub use objects::{read, Owner, Read, ReadError, Requests, Running, Workload};

/// The JSON report's `apiVersion`.
pub const API_VERSION: &str = "report.noe.adevinta.com/v1";
/// The JSON report's `kind`.
pub const KIND: &str = "ReadinessReport";

/// Why an image's platforms could not be found: a class (`not_found`, `unauthorized`,
/// `timeout`, ...) and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LookupFailure {
    pub kind: String,
    pub message: String,
}

/// An image's platforms as the registry (or a platform override) lists them, or why not.
pub type Answer = Result<Arc<[Platform]>, Arc<LookupFailure>>;

/// A workload's readiness for one architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// Every image runs on it.
    Ready,
    /// Some image does not run on it.
    Blocked,
    /// No image blocks, but some image's platforms are not known.
    Unknown,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::Blocked => "blocked",
            Self::Unknown => "unknown",
        }
    }
}

/// One image of a workload and what it runs on.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageEntry {
    pub image: String,
    pub kind: ImageKind,
    pub answer: Answer,
    /// The corrections applied to its platforms ([`crate::truth`]): with `noe report --verify`,
    /// platforms its registry lists that its own programs prove false (docs/architecture.md
    /// "Verification"), and those the server's sources of platform truth know for its digest;
    /// already left out of `answer`.
    pub corrections: Vec<crate::truth::Correction>,
    /// Those of `corrections` the cluster's learned store holds (exec format errors seen on its
    /// nodes, verification mismatches it keeps).
    pub learned: Vec<crate::truth::Correction>,
}

/// What one image says about one architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Runs {
    Yes,
    No,
    Unknown,
}

impl ImageEntry {
    fn support(&self) -> Option<Support> {
        support_of(&self.answer, self.kind)
    }
}

/// What an image of `kind` whose lookup gave `answer` runs on: `Some(Support::Any)` for an
/// arch-neutral one (an image volume without platform, an override's `*`); `None` when not
/// known (a failed lookup, a container image whose registry lists no platform: never taken as
/// any architecture).
pub fn support_of(answer: &Answer, kind: ImageKind) -> Option<Support> {
    let platforms = answer.as_ref().ok()?;
    if platforms.is_empty() && kind == ImageKind::Container {
        return None;
    }
    Support::of(platforms)
}

/// Whether an image of `kind` whose lookup gave `answer` blocks `os/arch` (known not to run
/// there), as a workload's verdict counts it.
pub fn blocks(answer: &Answer, kind: ImageKind, os: &str, arch: &str) -> bool {
    support_of(answer, kind).is_some_and(|s| !s.runs_on(&Platform::new(os, arch, None)))
}

/// One workload of the report.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    /// The workload, its `images` moved into [`Item::images`].
    pub workload: Workload,
    pub images: Vec<ImageEntry>,
    /// The `os/arch` every image supports, for the pod's OS (`*` when every image is
    /// arch-neutral); `None` when an image's platforms are not known.
    pub common: Option<Vec<String>>,
    /// Per target architecture, in the order asked.
    pub verdicts: Vec<(String, Verdict)>,
    /// Per target architecture, the images that do not run on it.
    pub blocking: Vec<(String, Vec<String>)>,
    /// `requests × replicas`; `None` when the replicas are not known.
    pub total: Option<Requests>,
    /// With `--include-pods`: its pods now, per architecture of their node (`unscheduled`,
    /// `unknown` for a node not listed).
    pub running_on: Option<BTreeMap<String, u64>>,
    /// With `--upgrades`: per target architecture, the upgrade path of each image that blocks
    /// (in the order of [`Item::blocking`]).
    pub upgrades: Vec<(String, Vec<Arc<Upgrade>>)>,
}

impl Item {
    /// The item for `workload`, whose images' answers are `answers`, in the same order.
    /// The workload's image list moves into [`Item::images`] (`workload.images` is left
    /// empty): each reference is held once.
    pub fn new(mut workload: Workload, answers: Vec<Answer>, targets: &[String]) -> Self {
        let images: Vec<ImageEntry> = std::mem::take(&mut workload.images)
            .into_iter()
            .zip(answers)
            .map(|((image, kind), answer)| ImageEntry {
                image,
                kind,
                answer,
                corrections: Vec::new(),
                learned: Vec::new(),
            })
            .collect();
        let supports: Vec<Option<Support>> = images.iter().map(ImageEntry::support).collect();
        let runs = |support: &Option<Support>, arch: &str| match support {
            None => Runs::Unknown,
            Some(support) if support.runs_on(&Platform::new(workload.os.as_str(), arch, None)) => {
                Runs::Yes
            }
            Some(_) => Runs::No,
        };
        let mut verdicts = Vec::with_capacity(targets.len());
        let mut blocking = Vec::with_capacity(targets.len());
        for arch in targets {
            let blockers: Vec<String> = images
                .iter()
                .zip(&supports)
                .filter(|(_, support)| runs(support, arch) == Runs::No)
                .map(|(entry, _)| entry.image.clone())
                .collect();
            let verdict = if !blockers.is_empty() {
                Verdict::Blocked
            } else if supports.iter().any(Option::is_none) {
                Verdict::Unknown
            } else {
                Verdict::Ready
            };
            verdicts.push((arch.clone(), verdict));
            blocking.push((arch.clone(), blockers));
        }
        let common = common(&supports, &workload.os);
        let total = workload.replicas.map(|n| workload.requests.times(n));
        Self {
            workload,
            images,
            common,
            verdicts,
            blocking,
            total,
            running_on: None,
            upgrades: Vec::new(),
        }
    }

    /// The images that block `arch`.
    pub fn blocking(&self, arch: &str) -> &[String] {
        self.blocking
            .iter()
            .find(|(a, _)| a == arch)
            .map_or(&[], |(_, images)| images.as_slice())
    }

    /// The upgrade paths of the images that block `arch`.
    pub fn upgrades(&self, arch: &str) -> &[Arc<Upgrade>] {
        self.upgrades
            .iter()
            .find(|(a, _)| a == arch)
            .map_or(&[], |(_, upgrades)| upgrades.as_slice())
    }

    /// The verdict for `arch`.
    pub fn verdict(&self, arch: &str) -> Option<Verdict> {
        self.verdicts
            .iter()
            .find(|(a, _)| a == arch)
            .map(|(_, v)| *v)
    }

    /// The total CPU and memory, zero when not known (for sorting and sums).
    fn total_or_zero(&self) -> Requests {
        self.total.unwrap_or_default()
    }
}

/// The architectures (for `os`) every image supports, as `os/arch`; `*` when all are
/// arch-neutral; `None` when an image is not known.
fn common(supports: &[Option<Support>], os: &str) -> Option<Vec<String>> {
    let mut archs: Option<BTreeSet<&str>> = None;
    for support in supports {
        match support.as_ref()? {
            Support::Any => {}
            Support::Only(platforms) => {
                let these: BTreeSet<&str> = platforms
                    .iter()
                    .filter(|p| p.os.is_empty() || p.os == os)
                    .map(|p| p.architecture.as_str())
                    .collect();
                archs = Some(match archs {
                    None => these,
                    Some(before) => before.intersection(&these).copied().collect(),
                });
            }
        }
    }
    Some(match archs {
        None => vec![crate::platform::ANY_ARCH.to_owned()],
        Some(archs) => archs
            .into_iter()
            .map(|arch| format!("{os}/{arch}"))
            .collect(),
    })
}

/// Ready, blocked and unknown workloads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub ready: u64,
    pub blocked: u64,
    pub unknown: u64,
}

impl Counts {
    fn add(&mut self, verdict: Verdict) {
        self.add_n(verdict, 1);
    }

    fn add_n(&mut self, verdict: Verdict, n: u64) {
        let count = match verdict {
            Verdict::Ready => &mut self.ready,
            Verdict::Blocked => &mut self.blocked,
            Verdict::Unknown => &mut self.unknown,
        };
        *count = count.saturating_add(n);
    }

    /// Ready, blocked and unknown together.
    pub fn all(&self) -> u64 {
        self.ready
            .saturating_add(self.blocked)
            .saturating_add(self.unknown)
    }
}

/// Total requests (× replicas) per verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestsByVerdict {
    pub ready: Requests,
    pub blocked: Requests,
    pub unknown: Requests,
}

impl RequestsByVerdict {
    fn add(&mut self, verdict: Verdict, requests: Requests) {
        let slot = match verdict {
            Verdict::Ready => &mut self.ready,
            Verdict::Blocked => &mut self.blocked,
            Verdict::Unknown => &mut self.unknown,
        };
        *slot = slot.plus(requests);
    }
}

/// Workloads, their replicas and their total requests per verdict; the capacity that could
/// move is the total requests of the ready ones. A workload whose replicas are not known (a
/// DaemonSet read from a file without its status) counts no replica and no request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub workloads: Counts,
    pub replicas: Counts,
    pub requests: RequestsByVerdict,
    /// `requests.ready`.
    pub movable: Requests,
}

impl Tally {
    fn add(&mut self, item: &Item, verdict: Verdict) {
        self.workloads.add(verdict);
        self.replicas
            .add_n(verdict, item.workload.replicas.unwrap_or_default());
        self.requests.add(verdict, item.total_or_zero());
        self.movable = self.requests.ready;
    }
}

/// An image that blocks workloads from a target architecture, and what it holds back: the
/// workloads it blocks, their replicas and total requests (a workload blocked by two images
/// counts whole for each).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Blocker {
    pub image: String,
    pub workloads: u64,
    pub replicas: u64,
    pub requests: Requests,
    /// Its upgrade path for the architecture (with `--upgrades`).
    pub upgrade: Option<Arc<Upgrade>>,
}

/// The totals for one target architecture.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArchSummary {
    pub all: Tally,
    /// The images that block, ranked by what they hold back: total CPU requests, then
    /// replicas, then workloads (most first), then by name.
    pub blocking_images: Vec<Blocker>,
    pub namespaces: BTreeMap<String, Tally>,
}

/// An image that could not be resolved, and how many workloads name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageError {
    pub image: String,
    pub failure: Arc<LookupFailure>,
    pub workloads: u64,
}

/// Something of the source that could not be read (a list the API refused, an object that is
/// not valid); the rest of the report stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceError {
    /// What was being read (`list deployments in team-a`, `Deployment team-a/web`).
    pub source: String,
    pub message: String,
}

/// The report.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub targets: Vec<String>,
    /// Sorted by movable CPU (total CPU requests, most first), then memory, namespace, kind,
    /// name.
    pub items: Vec<Item>,
    /// Per target architecture, in the order asked.
    pub summary: Vec<(String, ArchSummary)>,
    /// By error class, then image.
    pub image_errors: Vec<ImageError>,
    pub source_errors: Vec<SourceError>,
    /// `--include-pods` was given: items carry [`Item::running_on`].
    pub include_pods: bool,
    /// `--upgrades` was on: items carry [`Item::upgrades`] ([`Report::with_upgrades`]).
    pub upgrades: bool,
}

/// Where pods run now: the objects owned by others, and the nodes' architectures.
#[derive(Clone, Debug, Default)]
pub struct Placement {
    pub owned: Vec<Owner>,
    /// Node name → `kubernetes.io/arch`.
    pub nodes: HashMap<String, String>,
}

impl Placement {
    /// The architecture a pod is on: its node's, `unscheduled`, or `unknown`.
    fn arch_of(&self, running: &Running) -> String {
        match running {
            Running::Unscheduled => "unscheduled".to_owned(),
            Running::Node(node) => self
                .nodes
                .get(node)
                .filter(|arch| !arch.is_empty())
                .cloned()
                .unwrap_or_else(|| "unknown".to_owned()),
        }
    }

    /// Pods per top-level workload `(kind, namespace, name)` and architecture: a pod's owner,
    /// followed through a ReplicaSet or Job to its own owner.
    fn pods(&self) -> HashMap<(String, String, String), BTreeMap<String, u64>> {
        let parents: HashMap<(&str, &str, &str), (&str, &str)> = self
            .owned
            .iter()
            .filter(|o| o.kind != "Pod")
            .map(|o| {
                (
                    (o.kind.as_str(), o.namespace.as_str(), o.name.as_str()),
                    (o.owner_kind.as_str(), o.owner_name.as_str()),
                )
            })
            .collect();
        let mut out: HashMap<(String, String, String), BTreeMap<String, u64>> = HashMap::new();
        for pod in self.owned.iter().filter(|o| o.kind == "Pod") {
            let Some(running) = &pod.running_on else {
                continue;
            };
            let mut top = (pod.owner_kind.as_str(), pod.owner_name.as_str());
            if let Some(parent) = parents.get(&(top.0, pod.namespace.as_str(), top.1)) {
                top = *parent;
            }
            let key = (top.0.to_owned(), pod.namespace.clone(), top.1.to_owned());
            let count = out
                .entry(key)
                .or_default()
                .entry(self.arch_of(running))
                .or_default();
            *count = count.saturating_add(1);
        }
        out
    }
}

impl Report {
    /// The report of `items` for `targets`; with `placement`, where their pods run now.
    pub fn new(
        targets: Vec<String>,
        mut items: Vec<Item>,
        placement: Option<&Placement>,
        source_errors: Vec<SourceError>,
    ) -> Self {
        if let Some(placement) = placement {
            let mut pods = placement.pods();
            for item in &mut items {
                let w = &item.workload;
                let mut running = pods
                    .remove(&(w.kind.clone(), w.namespace.clone(), w.name.clone()))
                    .unwrap_or_default();
                if let Some(on) = &w.running_on {
                    let count = running.entry(placement.arch_of(on)).or_default();
                    *count = count.saturating_add(1);
                }
                item.running_on = Some(running);
            }
        }
        items.sort_by(|a, b| {
            let (ta, tb) = (a.total_or_zero(), b.total_or_zero());
            tb.cpu
                .cmp(&ta.cpu)
                .then(tb.memory.cmp(&ta.memory))
                .then_with(|| a.workload.namespace.cmp(&b.workload.namespace))
                .then_with(|| a.workload.kind.cmp(&b.workload.kind))
                .then_with(|| a.workload.name.cmp(&b.workload.name))
        });
        let summary = targets
            .iter()
            .map(|arch| (arch.clone(), summarize(&items, arch)))
            .collect();
        Self {
            targets,
            image_errors: image_errors(&items),
            items,
            summary,
            source_errors,
            include_pods: placement.is_some(),
            upgrades: false,
        }
    }

    /// The report with its items' upgrade paths shown ([`Item::upgrades`]).
    pub fn with_upgrades(mut self) -> Self {
        self.upgrades = true;
        self
    }

    /// Some workload has one of `verdicts` for some target architecture.
    pub fn any(&self, verdicts: &[Verdict]) -> bool {
        self.items
            .iter()
            .any(|item| item.verdicts.iter().any(|(_, v)| verdicts.contains(v)))
    }
}

fn summarize(items: &[Item], arch: &str) -> ArchSummary {
    let mut summary = ArchSummary::default();
    let mut blockers: HashMap<&str, Blocker> = HashMap::new();
    for item in items {
        let Some(verdict) = item.verdict(arch) else {
            continue;
        };
        summary.all.add(item, verdict);
        summary
            .namespaces
            .entry(item.workload.namespace.clone())
            .or_default()
            .add(item, verdict);
        let upgrades = item.upgrades(arch);
        for (at, image) in item.blocking(arch).iter().enumerate() {
            let blocker = blockers.entry(image.as_str()).or_default();
            blocker.workloads = blocker.workloads.saturating_add(1);
            blocker.replicas = blocker
                .replicas
                .saturating_add(item.workload.replicas.unwrap_or_default());
            blocker.requests = blocker.requests.plus(item.total_or_zero());
            if blocker.upgrade.is_none() {
                blocker.upgrade = upgrades.get(at).cloned();
            }
        }
    }
    let mut blockers: Vec<Blocker> = blockers
        .into_iter()
        .map(|(image, blocker)| Blocker {
            image: image.to_owned(),
            ..blocker
        })
        .collect();
    blockers.sort_by(|a, b| {
        b.requests
            .cpu
            .cmp(&a.requests.cpu)
            .then(b.replicas.cmp(&a.replicas))
            .then(b.workloads.cmp(&a.workloads))
            .then_with(|| a.image.cmp(&b.image))
    });
    summary.blocking_images = blockers;
    summary
}

/// Every image that could not be resolved, with how many workloads name it, by error class,
/// then image.
fn image_errors(items: &[Item]) -> Vec<ImageError> {
    let mut errors: BTreeMap<&str, ImageError> = BTreeMap::new();
    for item in items {
        for entry in &item.images {
            let Err(failure) = &entry.answer else {
                continue;
            };
            let error = errors
                .entry(entry.image.as_str())
                .or_insert_with(|| ImageError {
                    image: entry.image.clone(),
                    failure: failure.clone(),
                    workloads: 0,
                });
            error.workloads = error.workloads.saturating_add(1);
        }
    }
    let mut errors: Vec<ImageError> = errors.into_values().collect();
    errors.sort_by(|a, b| {
        a.failure
            .kind
            .cmp(&b.failure.kind)
            .then_with(|| a.image.cmp(&b.image))
    });
    errors
}

#[cfg(test)]
mod tests;
