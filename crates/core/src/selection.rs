//! Image selection by compatibility artifacts (docs/architecture.md, "Image selection"): the
//! formats, the one rule form both compile to, its three-valued evaluation against nodes, the
//! choice and the patch. Pure: the artifact bytes come from the registry crate, the nodes from
//! the node reflector (or a `kubectl get nodes -o yaml` file for `noe explain --nodes`).
//!
//! - [`spec`]: ocifit-k8s's compatibilities JSON (explicit mode) and NFD's image-compatibility
//!   spec (discovered mode), bounded while they are read.
//! - [`rule`]: the rule form, its evaluation against one node, and its translation into node
//!   selector terms (DNF, capped before it is built).
//! - [`feature_labels`]: which NFD feature becomes which node label.
//! - [`nodes`]: what a node is to the evaluation (labels, optional NFD features) and which nodes
//!   a pod's own constraints already admit.
//! - [`features`]: NFD's raw features of a node, bounded while read, stored once per distinct
//!   content, merged as NFD merges a node's objects.
//! - [`yaml`]: YAML from registries read into JSON, bounded while read.
//! - [`choose`]: the choice (explicit) and the constraint (discovered), and their patch.

pub mod choose;
pub mod feature_labels;
pub mod features;
pub mod nodes;
pub mod rule;
pub mod spec;
pub mod yaml;

pub use choose::{choose, constrain, Choice, Constraint, Pinning};
pub use features::NodeFeatures;
pub use nodes::{candidates, NodeFacts};
pub use rule::{Rule, Tri};
pub use spec::{CompatSet, Format, Spec};

/// Pod label enabling explicit selection (value `"true"`), as ocifit-k8s names it.
pub const ENABLED_LABEL: &str = "oci.image.compatibilities.selection/enabled";
/// Pod annotation naming the compatibility artifact (required in explicit mode).
pub const IMAGE_REF_ANNOTATION: &str = "oci.image.compatibilities.selection/image-ref";
/// Pod annotation naming the container image string to replace.
pub const TARGET_IMAGE_ANNOTATION: &str = "oci.image.compatibilities.selection/target-image";
/// [`TARGET_IMAGE_ANNOTATION`]'s default.
pub const DEFAULT_TARGET_IMAGE: &str = "placeholder:latest";
/// ocifit-k8s's ML selection annotation: refused as unsupported.
pub const MODEL_ANNOTATION: &str = "oci.image.compatibilities.selection/model";
/// Namespace label enabling discovered selection (value [`DISCOVERY_ENABLED`]), and pod
/// annotation making a discovery failure deny (value [`DISCOVERY_REQUIRE`]).
pub const DISCOVERY_KEY: &str = "arch.noe.adevinta.com/image-compatibility";
/// [`DISCOVERY_KEY`] on a namespace: discovery on.
pub const DISCOVERY_ENABLED: &str = "enabled";
/// [`DISCOVERY_KEY`] on a pod: a discovery failure denies.
pub const DISCOVERY_REQUIRE: &str = "require";
/// Annotation written with the digest of the artifact a choice came from.
pub const ARTIFACT_ANNOTATION: &str = "arch.noe.adevinta.com/compatibility-artifact";
/// Annotation written with the chosen set's tag (explicit: the new image).
pub const TAG_ANNOTATION: &str = "arch.noe.adevinta.com/compatibility-tag";
/// Annotation written when the pod was pinned to node names (what did not map to labels).
pub const PINNED_ANNOTATION: &str = "arch.noe.adevinta.com/compatibility-pinned";

/// Layer media type of ocifit-k8s's compatibilities JSON.
pub const OCIFIT_MEDIA_TYPE: &str = "application/vnd.oci.image.compatibilities.v1+json";
/// Layer media type of ocifit-k8s's ML specs (unsupported).
pub const OCIFIT_MODEL_MEDIA_TYPE: &str = "application/vnd.oci.image.model-compatibilities.v1+json";
/// `artifactType` of NFD image-compatibility artifacts.
pub const NFD_ARTIFACT_TYPE: &str = "application/vnd.nfd.image-compatibility.v1alpha1";
/// Layer media type of NFD's spec.
pub const NFD_MEDIA_TYPE: &str = "application/vnd.nfd.image-compatibility.spec.v1alpha1+yaml";

/// Limits on what an artifact may ask of us (docs/configuration.md, "Image selection").
pub mod limits {
    /// Bytes of a spec.
    pub const SPEC_BYTES: usize = 256 * 1024;
    /// Levels of nesting of a YAML spec (sequences and mappings; NFD's own shape needs 12),
    /// checked while it is read.
    pub const DEPTH: usize = 64;
    /// Nodes of a YAML spec (scalars, sequences, mappings; an alias counts the nodes it
    /// repeats): a spec of [`SPEC_BYTES`] without aliases has fewer.
    pub const NODES: usize = 128 * 1024;
    /// Compatibility sets per spec.
    pub const SETS: usize = 64;
    /// Rules per set.
    pub const RULES: usize = 32;
    /// `matchAny` branches per rule.
    pub const ANY: usize = 16;
    /// Feature terms per `matchFeatures`, and expressions per term.
    pub const EXPRESSIONS: usize = 64;
    /// Values per expression.
    pub const VALUES: usize = 64;
    /// Characters of a value (a label value never exceeds 63; longer values cannot match).
    pub const VALUE_CHARS: usize = 63;
    /// Characters of a key, feature or element name (a label key is at most 317).
    pub const KEY_CHARS: usize = 317;
    /// Characters of a tag or description.
    pub const TEXT_CHARS: usize = 1024;
    /// Characters of a regular expression.
    pub const REGEX_CHARS: usize = 256;
    /// Compiled size of a regular expression (each of its automata).
    pub const REGEX_BYTES: usize = 64 * 1024;
    /// Compiled bytes of a spec's regular expressions together (each distinct pattern once,
    /// with one search cache).
    pub const SPEC_REGEX_BYTES: usize = 2 * 1024 * 1024;
    /// Compiled bytes of the regular expressions of every spec alive in the process.
    pub const PROCESS_REGEX_BYTES: usize = 32 * 1024 * 1024;
    /// The lazy DFA's cache of a regular expression, per thread that searches with it.
    pub const REGEX_CACHE_BYTES: usize = 64 * 1024;
    /// Node selector terms a rule may expand to (DNF), checked before it is built.
    pub const TERMS: usize = 16;
    /// Expressions per node selector term.
    pub const TERM_EXPRESSIONS: usize = 64;
    /// Comparisons one selection may make: the cost of the specs' rules (their values and
    /// patterns, [`super::Rule::cost`]) times the candidate nodes, checked before evaluating.
    pub const EVALUATIONS: usize = 8_000_000;
    /// Nodes a pod may be pinned to by name.
    pub const PINNED_NODES: usize = 100;
}

/// Why a spec or a selection failed. Messages name the cause, for the denial a user reads.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectionError {
    /// The spec is not valid JSON/YAML of the expected shape.
    #[error("the compatibility spec cannot be read: {0}")]
    Parse(String),
    /// The spec goes past a limit.
    #[error("the compatibility spec has too many {what} (at most {limit})")]
    TooMany {
        /// What there are too many of.
        what: &'static str,
        /// The limit.
        limit: usize,
    },
    /// The spec is larger than [`limits::SPEC_BYTES`].
    #[error("the compatibility spec is larger than {0} bytes")]
    TooLarge(usize),
    /// A field is invalid (unknown op, wrong value count, bad regex, ...).
    #[error("the compatibility spec is invalid: {0}")]
    Invalid(String),
    /// The process's budget for compiled regular expressions is held by other specs: try again
    /// later (not a property of the spec; never cached).
    #[error("the compatibility spec cannot be compiled now: {0}")]
    Busy(String),
    /// No set fits any candidate node.
    #[error("no compatibility set fits any of the {candidates} candidate nodes")]
    NoMatch {
        /// Nodes the pod's own constraints admit.
        candidates: usize,
    },
    /// The pod's own constraints admit no node.
    #[error("no node is admitted by the pod's nodeSelector and required node affinity")]
    NoCandidates,
    /// No container or init container has the target image.
    #[error("no container or init container has the image {0:?}")]
    NoTarget(String),
    /// The choice needs a pin by node name and too many nodes fit.
    #[error("the chosen set needs node features that are not node labels, and {nodes} nodes fit (at most {limit} can be pinned by name)")]
    TooManyToPin {
        /// Nodes that fit.
        nodes: usize,
        /// [`limits::PINNED_NODES`].
        limit: usize,
    },
}
