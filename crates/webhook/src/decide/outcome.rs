//! What the decision returns: a verdict, admission warnings and the signals the server counts.

/// The result of [`decide`](crate::decide::decide).
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// Allow unchanged, allow with a patch, or deny.
    pub verdict: Verdict,
    /// Admission warnings shown to the user (`kubectl` prints them).
    pub warnings: Vec<String>,
    /// Events for metrics and logs, in the order they happened.
    pub signals: Vec<Signal>,
}

/// Allow unchanged, allow with a patch, or deny.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Allow the pod as it is.
    Unchanged {
        /// Why nothing was changed.
        reason: SkipReason,
    },
    /// Allow the pod with an RFC 6902 patch.
    Patch {
        /// The sorted architectures every image supports (what the platforms annotation says);
        /// empty when no arch constraint was decided (only matchNodeLabels applied).
        common: Vec<String>,
        /// The JSON patch operations, paths relative to the pod object.
        ops: Vec<crate::patch::Op>,
    },
    /// Deny the pod.
    Deny {
        /// HTTP status code for the admission response (403).
        code: u16,
        /// The user-facing reason.
        message: String,
    },
}

/// Why the arch constraint was not added (the `reason` label of `noe_hook_update_skip_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum SkipReason {
    /// `spec.nodeName` is set: the pod is already scheduled.
    NodeName,
    /// The pod carries `arch.noe.adevinta.com/skip: "true"`.
    SkipLabel,
    /// `nodeSelector` already has `kubernetes.io/arch` or `beta.kubernetes.io/arch`.
    NodeSelector,
    /// A required node selector term has an arch matchExpression.
    AffinityLabelSelector,
    /// A required node selector term has a `metadata.name` matchField (DaemonSet pinning).
    AffinityFieldSelector,
    /// The pod has no image.
    NoImages,
    /// Lookups failed and `--on-lookup-error` leaves the pod alone.
    LookupFailed,
    /// Reinvocation: the constraints we wrote earlier are still right.
    AlreadyUpToDate,
}

impl SkipReason {
    /// The bounded metric label value; noe's own values are kept for the three arch-constraint
    /// reasons so existing dashboards keep working.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NodeName => "node-name",
            Self::SkipLabel => "skip-label",
            Self::NodeSelector => "node-selector found",
            Self::AffinityLabelSelector => "node affinity label selector found",
            Self::AffinityFieldSelector => "node affinity field selector found",
            Self::NoImages => "no-images",
            Self::LookupFailed => "lookup-failed",
            Self::AlreadyUpToDate => "already-up-to-date",
        }
    }
}

/// `selector` label values of `noe_hook_arch_selector_injected_total`.
pub mod selector {
    /// `nodeSelector` on the preferred arch (noe's value).
    pub const PREFERRED: &str = "preferred";
    /// Required affinity `In [common]` (noe's value).
    pub const AFFINITY: &str = "affinity";
    /// `preferred` mode: required affinity plus a soft preference for the preferred arch.
    pub const PREFERRED_AFFINITY: &str = "preferred-affinity";
}

/// Something that happened during the decision, for metrics and logs.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Signal {
    /// `noe_hook_update_skip_total{reason}`: the arch constraint was not added. Emitted for every
    /// `Verdict::Unchanged` and also when only matchNodeLabels were applied.
    Skipped {
        /// Why.
        reason: SkipReason,
    },
    /// `noe_hook_arch_selector_injected_total{namespace,selector}`.
    ArchSelectorInjected {
        /// One of [`selector`]'s constants.
        selector: &'static str,
    },
    /// `noe_hook_preferred_architecture_not_available_total{namespace}`: a preferred arch (label
    /// or flag) is not supported by every image.
    PreferredArchNotAvailable {
        /// The preferred arch that could not be used.
        arch: String,
    },
    /// `noe_hook_node_match_injections_total{namespace,label}`: a matchNodeLabels key was copied.
    NodeMatchInjection {
        /// The label key (one of the configured keys: bounded).
        label: String,
    },
    /// An image whose platforms could not be found (the server counts it per registry).
    LookupFailed {
        /// The image reference as written in the pod.
        image: String,
        /// The lookup error.
        error: String,
    },
    /// Every image lookup failed (ignore-image) or one did (allow-pod): the pod fails open.
    FailedOpen,
    /// Reinvocation: our earlier arch constraint was recomputed over the current images.
    Recomputed {
        /// The common set our annotation recorded before.
        previous: Vec<String>,
    },
}
