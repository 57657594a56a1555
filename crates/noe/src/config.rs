//! The typed configuration of each command: what the flags turn into, and all that the code below
//! the command line ever sees of them.

mod architectures;

use std::path::PathBuf;
use std::time::Duration;

use noe_core::decide::Policy;
use noe_credentials::SourcesConfig;
use noe_webhook::server::Addresses;

pub use architectures::{parse_architectures, ArchitecturesError};

/// How registries are reached and where credentials come from.
#[derive(Clone, Debug)]
pub struct RegistrySettings {
    /// The resolver's configuration; its `hosts` are filled from the containerd configuration
    /// the credential sources read.
    pub resolver: noe_registry::Config,
    pub sources: SourcesConfig,
    /// `--cloud-credentials`: the clouds whose registries get the pod's own workload identity.
    pub cloud: Vec<noe_cloud::Provider>,
    /// Bounds on the registry lookups of admissions.
    pub lookups: noe_webhook::resolve::LookupLimits,
}

/// Where the serving certificate comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CertSource {
    /// `tls.crt` and `tls.key` in a directory, re-read when they change.
    Dir(PathBuf),
    /// A generated self-signed certificate (local trials only).
    SelfSigned,
}

/// The serving process.
#[derive(Clone, Debug)]
pub struct ServerSettings {
    pub cert: CertSource,
    pub addresses: Addresses,
    /// What the admission reads from the cluster besides pull secrets.
    pub facts: FactSettings,
    /// After SIGTERM: not ready, still answering for this long, then drain.
    pub shutdown_delay: Duration,
    /// Distinct `namespace` metric label values at most.
    pub metrics_max_namespaces: usize,
    /// The policy engines' lookup endpoint (`--lookup-addr`); `None`: off.
    pub lookup: Option<LookupSettings>,
    /// `--verify-binaries=background`: images of cold lookups are verified in the background.
    pub verify_binaries: bool,
}

/// The policy engines' lookup endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LookupSettings {
    pub addr: std::net::SocketAddr,
    /// Callers with a client certificate this PEM bundle verifies are admitted.
    pub client_ca: Option<PathBuf>,
    /// Callers with a Bearer token valid for this audience (TokenReview) are admitted.
    pub token_audience: Option<String>,
    /// Each request answers within this (at most 2 s).
    pub deadline: Duration,
    /// TokenReviews of tokens not known, per second at most.
    pub token_review_qps: u32,
}

/// How the Kubernetes API is reached.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeSettings {
    /// Out-of-cluster API access; `None`: the in-cluster configuration.
    pub kubeconfig: Option<PathBuf>,
}

/// The controllers, and what the admission reads of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControllerSettings {
    /// What `noe_controller` runs (nothing by default).
    pub config: noe_controller::Config,
    /// The admission reads the node reflector: the cluster's archs (warnings, and the
    /// schedulable archs with `auto`) and the node of a pod that gets a debug container.
    pub node_facts: bool,
    /// Leader election was asked for (with no writing controller there is nothing to elect).
    pub leader_elect: bool,
    /// `--lookup-mode`: the admission gates pods unless `inline`.
    pub lookup_mode: noe_webhook::admission::gate::LookupMode,
    /// `--hybrid-budget`.
    pub hybrid_budget: Duration,
    /// noe's namespace (`POD_NAMESPACE`): its pods are never gated.
    pub own_namespace: Option<String>,
    /// `--gate-object-selector`: only the pods it selects are gated.
    pub gate_object_selector: noe_webhook::admission::gate::selector::Selector,
    /// `--gate-namespace-selector`: only the pods of the namespaces it selects are gated.
    pub gate_namespace_selector: noe_webhook::admission::gate::selector::Selector,
    /// `--image-selection` (`None`: off).
    pub image_selection: Option<ImageSelection>,
    /// `--gate-verify`: a gated pod is held while its images' verifications run.
    pub gate_verify: bool,
}

/// Image selection by compatibility artifacts (`--image-selection`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageSelection {
    /// `--image-compatibility-all-namespaces`: NFD artifacts are looked for in every
    /// namespace, not only the labelled ones.
    pub all_namespaces: bool,
    /// `--watch-node-features`: NFD's `NodeFeature` objects give the features that are no
    /// node labels.
    pub node_features: bool,
    /// `--image-compatibility-negative-ttl`: how long an image's lack of an NFD artifact is
    /// remembered.
    pub negative_ttl: Duration,
}

/// What the admission reads from the Kubernetes API about a pod's surroundings; each part
/// needs its own RBAC, so each is off unless asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FactSettings {
    /// The namespace's `arch.noe.adevinta.com/preferred` label (`get namespaces`).
    pub namespace_preference: bool,
    /// Debug containers checked against their pod's node (`get nodes`).
    pub ephemeral_containers: bool,
}

/// The decision and its deadline.
#[derive(Clone, Debug)]
pub struct Decision {
    pub policy: Policy,
    /// The whole admission answers within this.
    pub admission_deadline: Duration,
}

/// `text` for people, `json` for programs (one object per line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    #[default]
    Text,
    Json,
}

/// `noe` / `noe serve`.
#[derive(Clone, Debug)]
pub struct Serve {
    pub server: ServerSettings,
    pub kube: KubeSettings,
    pub decision: Decision,
    pub registry: RegistrySettings,
    pub controllers: ControllerSettings,
}

/// `noe untaint`.
#[derive(Clone, Debug)]
pub struct Untaint {
    pub kube: KubeSettings,
}

/// `noe learned`.
#[derive(Clone, Debug)]
pub struct Learned {
    pub kube: KubeSettings,
    /// `--learned-store`.
    pub store: String,
    /// `-n`; `None`: the kubeconfig context's namespace.
    pub namespace: Option<String>,
    pub command: LearnedCommand,
}

/// Where `noe explain` and `noe report` read the learned store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LearnedSource {
    /// `--learned-store`.
    pub store: String,
    /// `--learned-namespace`; `None`: the kubeconfig context's namespace.
    pub namespace: Option<String>,
}

/// What `noe learned` does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LearnedCommand {
    /// `list` (`-o json`: `json`).
    List { json: bool },
    /// `forget IMAGE|DIGEST...` or `forget --all`.
    Forget { targets: Vec<String>, all: bool },
}

/// `noe ungate`.
#[derive(Clone, Debug)]
pub struct Ungate {
    pub kube: KubeSettings,
    pub decision: Decision,
    pub registry: RegistrySettings,
    /// `None`: every namespace.
    pub namespace: Option<String>,
    pub deadline: Duration,
    pub force: bool,
    /// `--gate-max-attempts`.
    pub max_attempts: u32,
    /// Deleted before anything is released.
    pub delete_webhook_configuration: Option<String>,
    /// The facts the server's decision reads (`--namespace-preference`).
    pub facts: FactSettings,
    /// `--watch-nodes`: the cluster's nodes are listed (their architectures are facts).
    pub watch_nodes: bool,
}

/// `noe inspect`.
#[derive(Clone, Debug)]
pub struct Inspect {
    pub images: Vec<String>,
    pub output: Output,
    pub show: InspectShow,
    pub registry: RegistrySettings,
    /// `--service-account NAMESPACE/NAME`: resolve as a pod running as it.
    pub service_account: Option<(String, String)>,
    pub kube: KubeSettings,
}

/// What `noe inspect` shows beyond an image's resolution.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InspectShow {
    /// `--raw`: the manifest, index or config blob exactly as served.
    pub raw: bool,
    /// `--platform`: one platform of an index (or a single image that must match).
    pub platform: Option<noe_registry::inspect::PlatformSpec>,
    /// `--config`: the image config summary.
    pub config: bool,
    /// `--digest`: the digest alone.
    pub digest: bool,
    /// `--verify`: each platform proven by its own program's ELF header.
    pub verify: bool,
    /// `--upgrades`: the architectures to search upgrade paths for.
    pub upgrades: Vec<String>,
}

impl InspectShow {
    /// Any of the flags that look at what the registry serves (not only platforms).
    pub fn asks_registry(&self) -> bool {
        self.raw || self.platform.is_some() || self.config || self.digest
    }
}

/// `noe explain`.
#[derive(Clone, Debug)]
pub struct Explain {
    /// A file, or `-` for stdin.
    pub file: PathBuf,
    pub output: Output,
    /// Exit 0 even when an image lookup failed.
    pub allow_lookup_errors: bool,
    /// `--nodes`: the cluster's nodes, for image selection offline.
    pub nodes: Option<PathBuf>,
    pub decision: Decision,
    pub registry: RegistrySettings,
    /// The API reached with `--credential-provider-sa-tokens`, for the pods' ServiceAccounts
    /// (and their pull secrets), and for the learned store.
    pub kube: KubeSettings,
    /// With `--learned-namespace`: the learned store's corrections count.
    pub learned: Option<LearnedSource>,
}

/// `noe report`.
#[derive(Clone, Debug)]
pub struct Report {
    pub settings: ReportSettings,
    /// The cluster's API, when no file is given (or `--learned-namespace` is).
    pub kube: KubeSettings,
    pub registry: RegistrySettings,
    /// The learned store, read from the cluster (by default when no file is given).
    pub learned: Option<LearnedSource>,
}

/// Which namespaces `noe report` reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReportScope {
    /// Every namespace (`-A`; with files and no `-n`, every namespace of the files).
    All,
    /// One namespace (`-n`).
    Namespace(String),
    /// The kubeconfig context's namespace.
    Current,
}

/// How `noe report` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    #[default]
    Table,
    Json,
    Csv,
    Markdown,
    Html,
}

/// What `noe report` reads and how it prints.
#[derive(Clone, Debug)]
pub struct ReportSettings {
    /// Files to read instead of a cluster (`-` is stdin).
    pub files: Vec<PathBuf>,
    pub scope: ReportScope,
    /// `-l`: as given (sent to the API) and parsed (applied to files).
    pub selector: Option<(String, noe_webhook::admission::gate::selector::Selector)>,
    /// Pods and nodes are read too: where each workload's pods run now.
    pub include_pods: bool,
    /// The architectures assessed, in order, each once.
    pub targets: Vec<String>,
    /// Images resolved at the same time.
    pub concurrency: usize,
    pub format: ReportFormat,
    /// Verdicts that make the exit code 1.
    pub fail_on: Vec<noe_core::report::Verdict>,
    /// `--verify`: each image's platforms proven by its own programs; a mismatch is no support.
    pub verify: bool,
    /// Upgrade paths are searched for the images that block.
    pub upgrades: bool,
}
