//! From a pod's images to their platforms, under one deadline. The admission asks
//! [`Resolve::platforms`] once per pod; nothing else talks to registries.
//!
//! One path, one cache hierarchy (docs/architecture.md, Caches): the pod's pull secrets, when
//! it names some, are read (cached) for their credential [`Scope`]; each image is then one read
//! of the registry crate's cache (an answer any pod may use, else one found in this scope).
//! Only the images that missed are routed (parsed, proxies, hosts: once each), get credential
//! candidates matched for that route (pull secrets, then the node-level sources) and are looked
//! up through one more cache probe, the shared cache and the registries, within
//! [`LookupLimits`]: at most so many distinct images per admission (the rest answered as
//! lookup errors), at most so many lookups in flight for one admission (its share), and at most
//! so many in the whole process, so one pod naming thousands of images on thousands of hosts
//! cannot open thousands of connections, nor make another pod's lookups wait for its own.
//!
//! The two seams, [`PlatformLookup`] (the registry crate's resolver) and [`CredentialSource`]
//! (pull secrets and node-level credentials), are traits so tests can script them.

pub mod credentials;
pub mod pull_secrets;
pub mod service_accounts;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use noe_core::Platform;
use noe_registry::cache::Scope;

pub use credentials::{
    Anonymous, CredentialSource, Credentials, PodAccess, PodCredentials, PodSecrets,
};
use noe_core::decide::{LookupKind, Lookups};

/// Why the platforms of one image are not known.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LookupError {
    /// The admission's deadline passed before the lookup finished.
    #[error("deadline exceeded")]
    Deadline {
        /// The bounded `registry` metric label of the image's registry.
        registry: String,
    },
    /// The pod names more distinct uncached images than one admission looks up; this one was
    /// not looked up.
    #[error("not looked up: the pod names more than {limit} uncached images (--max-images-per-admission)")]
    TooManyImages {
        limit: usize,
        /// The bounded `registry` metric label of the image's registry.
        registry: String,
    },
    /// The registry (or the way to it) failed; `message` is one line naming the cause.
    #[error("{message}")]
    Registry {
        /// What kind of failure (from the registry crate's error).
        kind: LookupKind,
        /// One line, from the registry crate's error and its sources.
        message: String,
        /// The bounded `registry` metric label of the image's registry.
        registry: String,
    },
}

impl LookupError {
    /// The bounded `registry` label of `noe_hook_registry_errors_total`.
    pub fn registry(&self) -> &str {
        match self {
            Self::Deadline { registry }
            | Self::TooManyImages { registry, .. }
            | Self::Registry { registry, .. } => registry,
        }
    }

    /// What kind of failure it is.
    pub fn kind(&self) -> LookupKind {
        match self {
            Self::Deadline { .. } => LookupKind::Deadline,
            Self::TooManyImages { .. } => LookupKind::TooManyImages,
            Self::Registry { kind, .. } => *kind,
        }
    }
}

impl From<LookupError> for noe_core::decide::LookupError {
    /// The decision's view: the kind, the bounded registry label and the message users read.
    fn from(error: LookupError) -> Self {
        let message = error.to_string();
        let kind = error.kind();
        let registry = match error {
            LookupError::Deadline { registry }
            | LookupError::TooManyImages { registry, .. }
            | LookupError::Registry { registry, .. } => registry,
        };
        Self::new(kind, registry, message)
    }
}

/// The [`LookupKind`] of a registry crate error.
pub fn kind_of(error: &noe_registry::Error) -> LookupKind {
    use noe_registry::Error as E;
    match error {
        E::InvalidReference { .. } => LookupKind::InvalidReference,
        E::NotFound { .. } => LookupKind::NotFound,
        E::Unauthorized { .. }
        | E::Renewal { .. }
        | E::NoCredentials { .. }
        | E::Token { .. }
        | E::RedirectedChallenge { .. } => LookupKind::Unauthorized,
        E::Timeout { .. } => LookupKind::Timeout,
        E::Transport { .. }
        | E::Blocked { .. }
        | E::Unresolvable { .. }
        | E::CircuitOpen { .. }
        | E::RateLimited { .. } => LookupKind::Unavailable,
        _ => LookupKind::Registry,
    }
}

/// Finds the platforms of one image with the given credential candidates (tried in order).
pub trait PlatformLookup: Send + Sync + 'static {
    /// The platforms of `image` if a fresh answer any pod may use, or one found in `scope`, is
    /// cached: no I/O (the warm path). `None` sends the image to [`PlatformLookup::lookup`].
    fn cached(&self, _image: &str, _scope: Option<Scope>) -> Option<Arc<[Platform]>> {
        None
    }

    /// The platforms, or why they are not known, looked up in `scope`: the image routed once,
    /// with the candidates `credentials` gives for that route.
    fn lookup<'a>(
        &'a self,
        image: &'a str,
        scope: Option<Scope>,
        credentials: &'a PodCredentials<'a>,
    ) -> BoxFuture<'a, Result<Arc<[Platform]>, LookupError>>;

    /// The bounded `registry` metric label of `image`'s registry (for an image not routed).
    fn registry_label(&self, _image: &str) -> String {
        "other".to_owned()
    }

    /// The digest `image` resolved to, when its fresh answer is cached (any pod's, or one found
    /// in `scope`): no I/O. `None` for an answer without one (a platform override).
    fn digest(&self, _image: &str, _scope: Option<Scope>) -> Option<String> {
        None
    }
}

/// The registry crate's resolver as a [`PlatformLookup`].
#[derive(Clone, Debug)]
pub struct RegistryLookup {
    resolver: noe_registry::Resolver,
}

impl RegistryLookup {
    pub fn new(resolver: noe_registry::Resolver) -> Self {
        Self { resolver }
    }
}

impl PlatformLookup for RegistryLookup {
    fn cached(&self, image: &str, scope: Option<Scope>) -> Option<Arc<[Platform]>> {
        self.resolver.cached(image, scope)
    }

    fn digest(&self, image: &str, scope: Option<Scope>) -> Option<String> {
        self.resolver.cached_digest(image, scope)
    }

    fn lookup<'a>(
        &'a self,
        image: &'a str,
        scope: Option<Scope>,
        credentials: &'a PodCredentials<'a>,
    ) -> BoxFuture<'a, Result<Arc<[Platform]>, LookupError>> {
        Box::pin(async move {
            let failed = |error: noe_registry::Error| LookupError::Registry {
                kind: kind_of(&error),
                message: one_line(&error),
                registry: self.resolver.error_label(&error),
            };
            let routed = self.resolver.routed(image).await.map_err(failed)?;
            let registry = self.resolver.registry_label(&routed.target().registry);
            let candidates = credentials.candidates(&routed, registry).await;
            self.resolver
                .platforms_routed(&routed, scope, &candidates)
                .await
                .map_err(failed)
        })
    }

    /// The label of the registry actually contacted (after proxies); `other` for a reference
    /// that does not parse.
    fn registry_label(&self, image: &str) -> String {
        match self.resolver.target(image) {
            Ok(target) => self.resolver.registry_label(&target.registry),
            Err(error) => self.resolver.error_label(&error),
        }
    }
}

/// An error and its sources on one line (a source already quoted by its parent is not repeated).
pub fn one_line(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let inner_text = inner.to_string();
        if !text.contains(&inner_text) {
            text.push_str(": ");
            text.push_str(&inner_text);
        }
        source = inner.source();
    }
    text.replace(['\n', '\r'], " ")
}

/// What [`Resolve::platforms`] found for one pod.
#[derive(Debug, Default)]
pub struct Resolved {
    /// Per image (as written in the pod): its platforms or why they are not known.
    pub lookups: Lookups,
    /// The bounded `registry` label of every failed lookup (one entry per failed image).
    pub failed_registries: Vec<String>,
    /// Pull secrets of the pod that could not be used.
    pub failed_pull_secrets: usize,
    /// The credential scope its answers were found in (`None`: node-level credentials only):
    /// where [`Resolve::digest`] finds them.
    pub scope: Option<Scope>,
}

/// Bounds on the registry lookups of admissions (`--max-images-per-admission`,
/// `--max-concurrent-lookups`, `--max-concurrent-lookups-per-admission`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LookupLimits {
    /// Distinct uncached images one admission looks up; the others are answered as
    /// [`LookupError::TooManyImages`].
    pub max_images: usize,
    /// Lookups in flight across all admissions of the process (each holds at most a few
    /// connections: the registry or mirror, a token realm).
    pub max_concurrent: usize,
    /// Lookups in flight for one admission: its share of `max_concurrent`, so one pod with many
    /// images leaves permits for the others.
    pub max_concurrent_per_admission: usize,
}

impl Default for LookupLimits {
    fn default() -> Self {
        Self {
            max_images: 256,
            max_concurrent: 256,
            max_concurrent_per_admission: 32,
        }
    }
}

/// Pods with fewer images than this find repeated ones without building a set.
const SMALL_POD: usize = 16;

/// Looks up a pod's images under one deadline.
pub struct Resolve {
    lookup: Arc<dyn PlatformLookup>,
    credentials: Arc<dyn CredentialSource>,
    budget: Duration,
    limits: LookupLimits,
    /// `limits.max_concurrent` permits, shared by every admission.
    in_flight: Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for Resolve {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolve")
            .field("budget", &self.budget)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Resolve {
    /// Lookups finish within `deadline` minus a margin to decide and answer (a tenth, at most
    /// 100 ms).
    pub fn new(
        lookup: Arc<dyn PlatformLookup>,
        credentials: Arc<dyn CredentialSource>,
        deadline: Duration,
    ) -> Self {
        let margin = (deadline / 10).min(Duration::from_millis(100));
        let limits = LookupLimits::default();
        Self {
            lookup,
            credentials,
            budget: deadline.saturating_sub(margin),
            in_flight: Arc::new(tokio::sync::Semaphore::new(limits.max_concurrent)),
            limits,
        }
    }

    /// The same, with these bounds on lookups (each at least 1).
    #[must_use]
    pub fn with_limits(mut self, limits: LookupLimits) -> Self {
        let limits = LookupLimits {
            max_images: limits.max_images.max(1),
            max_concurrent: limits
                .max_concurrent
                .clamp(1, tokio::sync::Semaphore::MAX_PERMITS),
            max_concurrent_per_admission: limits.max_concurrent_per_admission.max(1),
        };
        self.in_flight = Arc::new(tokio::sync::Semaphore::new(limits.max_concurrent));
        self.limits = limits;
        self
    }

    /// `work` bounded by the same budget as the lookups; `None` when it did not finish in time.
    pub async fn bounded<T>(&self, work: impl std::future::Future<Output = T>) -> Option<T> {
        tokio::time::timeout(self.budget, work).await.ok()
    }

    /// The platforms of `images` of a pod in `namespace` with these `imagePullSecrets` names:
    /// each image from the cache when it holds an answer this pod may use, the others looked
    /// up, all at once, within the budget.
    pub async fn platforms<S: AsRef<str> + Sync>(
        &self,
        namespace: &str,
        pull_secrets: &[String],
        images: &[S],
    ) -> Resolved {
        self.platforms_traced(namespace, pull_secrets, images, tracing::Span::none)
            .await
    }

    /// [`Resolve::platforms`], with the lookups that go to a registry inside `span` (so registry
    /// logs name the pod). `span` is called only then: building a span with formatted fields for
    /// every warm admission costs a visible share of the throughput (docs/benchmarks.md).
    pub async fn platforms_traced<S: AsRef<str> + Sync>(
        &self,
        namespace: &str,
        pull_secrets: &[String],
        images: &[S],
        span: impl FnOnce() -> tracing::Span,
    ) -> Resolved {
        let access = PodAccess {
            pull_secrets,
            service_account: None,
        };
        self.platforms_for(namespace, access, images, span).await
    }

    /// [`Resolve::platforms_traced`] for a pod with this `access`: its pull secrets, and its
    /// service account for the credential providers that ask for its token (when enabled).
    pub async fn platforms_for<S: AsRef<str> + Sync>(
        &self,
        namespace: &str,
        access: PodAccess<'_>,
        images: &[S],
        span: impl FnOnce() -> tracing::Span,
    ) -> Resolved {
        use tracing::Instrument as _;
        let pull_secrets = access.pull_secrets;
        if images.is_empty() {
            return Resolved::default();
        }
        // The clock is read only when something may wait: pull secrets, or a cache miss.
        let mut deadline = None;
        let mut deadline =
            || *deadline.get_or_insert_with(|| tokio::time::Instant::now() + self.budget);
        // Read on every admission of a pod that names pull secrets (the reads are cached), so an
        // unusable secret is counted each time.
        let by_account =
            access.service_account.is_some() && self.credentials.uses_service_accounts();
        let pod = if pull_secrets.is_empty() && !by_account {
            PodSecrets::default()
        } else {
            let read = self.credentials.pod_as(namespace, access);
            match tokio::time::timeout_at(deadline(), read).await {
                Ok(pod) => pod,
                Err(_) => {
                    let mut resolved = Resolved::default();
                    for image in images {
                        let image = image.as_ref();
                        resolved.record(image, Err(self.deadline(image)));
                    }
                    return resolved;
                }
            }
        };
        let mut resolved = Resolved {
            failed_pull_secrets: pod.failed_pull_secrets,
            scope: pod.scope,
            ..Resolved::default()
        };
        let mut missed: Vec<&str> = Vec::new();
        // Repeated images are looked up once: a small pod compares with the images before it,
        // a set is built only for a pod with many.
        let mut seen: Option<std::collections::HashSet<&str>> = None;
        for (index, image) in images.iter().enumerate() {
            let image = image.as_ref();
            let repeated = if index < SMALL_POD {
                images.iter().take(index).any(|i| i.as_ref() == image)
            } else {
                !seen
                    .get_or_insert_with(|| images.iter().take(index).map(AsRef::as_ref).collect())
                    .insert(image)
            };
            if repeated {
                continue;
            }
            match self.lookup.cached(image, pod.scope) {
                Some(platforms) => resolved.record(image, Ok(platforms)),
                None if missed.len() < self.limits.max_images => missed.push(image),
                None => {
                    let error = LookupError::TooManyImages {
                        limit: self.limits.max_images,
                        registry: self.lookup.registry_label(image),
                    };
                    resolved.record(image, Err(error));
                }
            }
        }
        if missed.is_empty() {
            return resolved;
        }
        let deadline = deadline();
        let pod = &pod;
        // This admission's share of the process-wide permits: taken first, so it never holds
        // (nor queues for) more than its share of them.
        let share = tokio::sync::Semaphore::new(self.limits.max_concurrent_per_admission);
        let share = &share;
        let lookups = missed.into_iter().map(|image| async move {
            let credentials = PodCredentials::new(&*self.credentials, namespace, pull_secrets, pod);
            let result = tokio::time::timeout_at(deadline, async {
                let (Ok(_share), Ok(_in_flight)) =
                    (share.acquire().await, self.in_flight.acquire().await)
                else {
                    return Err(self.deadline(image));
                };
                self.lookup.lookup(image, pod.scope, &credentials).await
            })
            .await
            .unwrap_or_else(|_| {
                // Cut short: labelled by its route when it got that far.
                Err(match credentials.registry() {
                    Some(registry) => LookupError::Deadline {
                        registry: registry.to_owned(),
                    },
                    None => self.deadline(image),
                })
            });
            (image, result)
        });
        let results = futures::future::join_all(lookups).instrument(span()).await;
        for (image, result) in results {
            resolved.record(image, result);
        }
        resolved
    }

    /// The digest `image` resolved to, from the cache its answer is in (found in `scope`, or by
    /// any pod): no I/O.
    pub fn digest(&self, image: &str, scope: Option<Scope>) -> Option<String> {
        self.lookup.digest(image, scope)
    }

    fn deadline(&self, image: &str) -> LookupError {
        LookupError::Deadline {
            registry: self.lookup.registry_label(image),
        }
    }
}

impl Resolved {
    fn record(&mut self, image: &str, result: Result<Arc<[Platform]>, LookupError>) {
        let result = result.map_err(|error| {
            self.failed_registries.push(error.registry().to_owned());
            noe_core::decide::LookupError::from(error)
        });
        self.lookups.insert(image.to_owned(), result);
    }
}
