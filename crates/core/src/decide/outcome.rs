//! What the decision returns: a verdict, admission warnings and the signals the server counts.

use super::summary::Summary;
use super::text;

/// The HTTP status code of a denial.
pub const DENY_CODE: u16 = 403;

/// The result of [`decide`](crate::decide::decide) and
/// [`check_ephemeral`](crate::decide::check_ephemeral).
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// Allow unchanged, allow with a patch, or deny.
    pub verdict: Verdict,
    /// Admission warnings shown to the user (`kubectl` prints them): each at most
    /// [`MAX_WARNING_CHARS`](crate::decide::MAX_WARNING_CHARS) characters, all together at most
    /// [`MAX_WARNINGS_CHARS`](crate::decide::MAX_WARNINGS_CHARS).
    pub warnings: Vec<String>,
    /// Events for metrics and logs, in the order they happened.
    pub signals: Vec<Signal>,
    /// What the decision found, step by step (what `noe explain` shows).
    pub summary: Summary,
}

impl Decision {
    /// A decision with `verdict`, no warning, no signal and an empty summary.
    pub fn new(verdict: Verdict) -> Self {
        Self {
            verdict,
            warnings: Vec::new(),
            signals: Vec::new(),
            summary: Summary::default(),
        }
    }
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
        /// empty when no arch constraint was written (only matchNodeLabels or tolerations, or
        /// the audit annotation).
        common: Vec<String>,
        /// The JSON patch operations, paths relative to the pod object.
        ops: Vec<crate::patch::Op>,
    },
    /// Deny the pod.
    Deny {
        /// HTTP status code for the admission response (403).
        code: u16,
        /// Why, in a bounded set (metrics, the audit annotation).
        reason: DenyReason,
        /// The user-facing reason, at most
        /// [`MAX_MESSAGE_CHARS`](crate::decide::MAX_MESSAGE_CHARS) characters.
        message: String,
    },
}

impl Verdict {
    /// A denial (HTTP 403) for `reason`, its message bounded.
    pub(crate) fn deny(reason: DenyReason, message: String) -> Self {
        Self::Deny {
            code: DENY_CODE,
            reason,
            message: text::message(message),
        }
    }
}

/// Why a pod is (or, in audit mode, would be) denied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DenyReason {
    /// No architecture is supported by every image (step 6).
    NoCommonArch,
    /// An image lookup failed and `--on-lookup-error=deny` (step 5).
    LookupFailed,
    /// The pod's own arch constraint admits no architecture its images support and
    /// `--on-contradiction=deny` (step 6b).
    Contradiction,
    /// A Windows pod's images need different Windows builds (step 4).
    WindowsBuild,
    /// A debug (ephemeral) container's image cannot run on the pod's node and
    /// `--on-contradiction=deny` (step 3).
    DebugImage,
    /// Image selection by a compatibility artifact failed (docs/architecture.md, "Image
    /// selection").
    Compatibility,
}

impl DenyReason {
    /// The bounded value used in the audit annotation (`deny:<reason>`) and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoCommonArch => "no-common-arch",
            Self::LookupFailed => "lookup-failed",
            Self::Contradiction => "contradiction",
            Self::WindowsBuild => "windows-build",
            Self::DebugImage => "debug-image",
            Self::Compatibility => "compatibility",
        }
    }
}

/// Why the arch constraint was not added (the `reason` label of `noe_hook_update_skip_total`).
///
/// The values follow noe's naming (lower-case words, `… found` for what the pod already has), so
/// noe's three values stay as they were on users' dashboards; docs/configuration.md lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SkipReason {
    /// `spec.nodeName` is set: the pod is already scheduled.
    NodeName,
    /// The pod carries `arch.noe.adevinta.com/skip: "true"`.
    SkipLabel,
    /// `nodeSelector` already has `kubernetes.io/arch` or `beta.kubernetes.io/arch`.
    NodeSelector,
    /// Every required node selector term has an arch matchExpression.
    AffinityLabelSelector,
    /// A DaemonSet pod: a required term pins `metadata.name` and a DaemonSet owns the pod.
    AffinityFieldSelector,
    /// The required node selector terms are all empty (`{}`) or an explicit empty list: the pod
    /// matches no node, and adding an expression would widen it.
    EmptyNodeSelectorTerms,
    /// The pod has no image.
    NoImages,
    /// Lookups failed and `--on-lookup-error` leaves the pod alone.
    LookupFailed,
    /// Reinvocation: the constraints we wrote earlier are still right.
    AlreadyUpToDate,
}

impl SkipReason {
    /// Every value, for documentation and tests.
    pub const ALL: [SkipReason; 9] = [
        Self::NodeName,
        Self::SkipLabel,
        Self::NodeSelector,
        Self::AffinityLabelSelector,
        Self::AffinityFieldSelector,
        Self::EmptyNodeSelectorTerms,
        Self::NoImages,
        Self::LookupFailed,
        Self::AlreadyUpToDate,
    ];

    /// The bounded metric label value. The three arch-constraint values are noe's, verbatim.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NodeName => "node name found",
            Self::SkipLabel => "skip label found",
            Self::NodeSelector => "node-selector found",
            Self::AffinityLabelSelector => "node affinity label selector found",
            Self::AffinityFieldSelector => "node affinity field selector found",
            Self::EmptyNodeSelectorTerms => "empty node selector terms found",
            Self::NoImages => "no image found",
            Self::LookupFailed => "image lookup failed",
            Self::AlreadyUpToDate => "already up to date",
        }
    }
}

/// `selector` label values of `noe_hook_arch_selector_injected_total`.
pub mod selector {
    /// `nodeSelector` on the preferred arch (noe's value).
    pub const PREFERRED: &str = "preferred";
    /// Required affinity `In [common]` (noe's value).
    pub const AFFINITY: &str = "affinity";
    /// Required affinity plus a soft preference for the preferred arch (`preferred` mode, or a
    /// pod whose own arch terms rule out a hard preference).
    pub const PREFERRED_AFFINITY: &str = "preferred-affinity";
}

/// Something that happened during the decision, for metrics and logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signal {
    /// `noe_hook_update_skip_total{reason}`: the arch constraint was not added. Emitted for every
    /// `Verdict::Unchanged` of a pod creation and also when only matchNodeLabels or tolerations
    /// were applied.
    Skipped {
        /// Why.
        reason: SkipReason,
    },
    /// `noe_hook_arch_selector_injected_total{namespace,selector}`.
    ArchSelectorInjected {
        /// One of [`selector`]'s constants.
        selector: &'static str,
    },
    /// `noe_hook_preferred_architecture_not_available_total{namespace}`: a preferred arch (pod
    /// label, namespace label or flag) is not supported by every image.
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
    /// The pod's own arch constraint admits no architecture its images support (step 6b), or a
    /// debug container's image cannot run on its node.
    Contradiction,
    /// No node of the cluster has an architecture the pod may run on (`--watch-nodes`): it stays
    /// pending until one joins.
    NoNode {
        /// The architectures the pod may run on.
        archs: Vec<String>,
    },
}

/// What kind of failure left an image's platforms unknown: a bounded set, for metric labels,
/// warnings and the lookup endpoint's `error` field without reading the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LookupKind {
    /// The admission's deadline passed before the lookup finished.
    Deadline,
    /// The pod names more uncached images than one admission looks up; not looked up.
    TooManyImages,
    /// The reference does not follow the reference grammar.
    InvalidReference,
    /// The manifest does not exist.
    NotFound,
    /// Every credential (and anonymous access) was refused, or none could be tried.
    Unauthorized,
    /// The registry did not answer within its timeout.
    Timeout,
    /// The registry could not be reached or is held back (rate limit, open circuit, blocked).
    Unavailable,
    /// Anything else the registry or its content did wrong.
    Registry,
}

impl LookupKind {
    /// The label value: `deadline`, `too_many_images`, `invalid_reference`, `not_found`,
    /// `unauthorized`, `timeout`, `unavailable`, `registry`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deadline => "deadline",
            Self::TooManyImages => "too_many_images",
            Self::InvalidReference => "invalid_reference",
            Self::NotFound => "not_found",
            Self::Unauthorized => "unauthorized",
            Self::Timeout => "timeout",
            Self::Unavailable => "unavailable",
            Self::Registry => "registry",
        }
    }
}

/// Why the platforms of one image are not known: its [`LookupKind`], the bounded `registry`
/// metric label of its registry, and the one line users read (warnings, messages, `explain`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LookupError {
    pub kind: LookupKind,
    /// A bounded label value (`other` when the registry is not known).
    pub registry: String,
    pub message: String,
}

impl LookupError {
    pub fn new(kind: LookupKind, registry: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            kind,
            registry: registry.into(),
            message: message.into(),
        }
    }

    /// A failure known only by its message (kind [`LookupKind::Registry`], registry `other`).
    pub fn message(message: impl Into<String>) -> Self {
        Self::new(LookupKind::Registry, "other", message)
    }
}

impl std::fmt::Display for LookupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LookupError {}
