//! What the decision found, step by step, as data: each image's platforms (or why they are not
//! known), the common set, the constraint written, the preferred arch, the tolerations and node
//! labels added, the audit annotation. `noe explain` (and whatever else explains a decision)
//! reads it here, never again from the patch.

/// The decision's findings; [`Decision::summary`](super::Decision::summary).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Each image looked up, in the pod's order (empty when the pod was skipped before).
    pub images: Vec<ImageSummary>,
    /// The architectures every image supports on the pod's OS (steps 4–6); `None` when no image
    /// was resolved.
    pub common: Option<Vec<String>>,
    /// The arch constraint the pod has once admitted.
    pub constraint: Constraint,
    /// The preferred arch honoured (step 7): pinned (see [`Constraint::Pinned`]) or a soft
    /// preference.
    pub preferred: Option<String>,
    /// The architectures whose configured tolerations were added (step 9).
    pub tolerations: Vec<String>,
    /// The pod labels copied into `nodeSelector` (step 8, matchNodeLabels).
    pub node_labels: Vec<String>,
    /// Audit mode: the `arch.noe.adevinta.com/audit` value (what enforcement would have done).
    pub audit: Option<String>,
    /// Nothing is recorded ([`decide_verdict`](crate::decide::decide_verdict)).
    off: bool,
}

impl Summary {
    /// A summary the steps record nothing in.
    pub(crate) fn off() -> Self {
        Self {
            off: true,
            ..Self::default()
        }
    }

    /// Records a step's findings with `write`, unless the summary is off (nothing `write` would
    /// build is built then).
    pub(crate) fn record(&mut self, write: impl FnOnce(&mut Self)) {
        if !self.off {
            write(self);
        }
    }
}

/// One image and what its lookup gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageSummary {
    /// The reference as written in the pod.
    pub image: String,
    pub support: ImageSupport,
    /// The platforms proven false that its support leaves out ([`crate::truth`]).
    pub corrections: Vec<crate::truth::Correction>,
}

impl ImageSummary {
    pub(crate) fn new(image: &str, support: ImageSupport) -> Self {
        Self {
            image: image.to_owned(),
            support,
            corrections: Vec::new(),
        }
    }
}

/// What an image supports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageSupport {
    /// The platforms its registry (or a platform override) lists.
    Platforms {
        /// Every platform, as the lookup gave them (shared with it: building a decision copies
        /// none).
        platforms: std::sync::Arc<[crate::Platform]>,
        /// The architectures a pod of its OS may use (OS equal or empty, arch schedulable).
        usable: Vec<String>,
    },
    /// Arch-neutral: an image volume without a platform, or a platform override's `*`.
    Neutral,
    /// Its platforms could not be found; `--on-lookup-error=fallback` took it to support `arch`.
    Assumed { arch: String, error: String },
    /// Its platforms could not be found.
    Failed { error: String },
}

/// The arch constraint a pod has once admitted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Constraint {
    /// None written and none of the pod's own (skipped, failed open, nothing to decide, denied).
    #[default]
    None,
    /// The pod's own constraint, left as written; `archs` are those of it its images support.
    User { archs: Vec<String> },
    /// `nodeSelector["kubernetes.io/arch"]`: pinned to the preferred arch.
    Pinned { arch: String },
    /// `kubernetes.io/arch In [archs]` in the required node affinity.
    Constrained { archs: Vec<String> },
}
