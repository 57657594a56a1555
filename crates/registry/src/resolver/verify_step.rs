//! Verification's fetch (`crate::verify`): a [`Step`] of the lookup's own endpoint and
//! credential loop (`fetch.rs`), so manifests, configs and layers come through the same hosts,
//! proxies, mirrors, credentials in order then anonymous access (unless private), insecure
//! registries, TLS, address guard, throttle and client as every lookup; a redirect to blob
//! storage carries no registry `Authorization` (the client's rule). Each platform has a request
//! budget of its own ([`MAX_REQUESTS_PER_PLATFORM`]) and holds one of the process's
//! [`crate::verify::VerifyConfig::concurrency`] permits while it runs.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Weak};
use std::time::Instant;

use futures::future::BoxFuture;
use futures::StreamExt as _;
use noe_core::binary::{Reason, Report, Run, Verification};

use super::fetch::{At, Step};
use super::{Resolver, Routed};
use crate::auth::Session;
use crate::budget::{Budget, Context};
use crate::manifest::{self, Parsed};
use crate::verify::queue::Job;
use crate::verify::worker::{Read, Stop};
use crate::verify::{
    ImageManifest, ImageReport, Options, PlatformReport, Queue, Storage, Worker,
    MAX_REQUESTS_PER_PLATFORM,
};
use crate::walk::{Fetcher, MAX_CONCURRENT_FETCHES};
use crate::Error;
use noe_core::platform::MAX_PLATFORMS;
use noe_core::Platform;
use noe_credentials::CredentialCandidate;

/// Verification's step at one endpoint with one credential.
struct Verify<'o> {
    options: &'o Options,
}

impl Step for Verify<'_> {
    type Output = ImageReport;

    fn fetch<'s, 'a>(&'s self, at: At<'s, 'a>) -> BoxFuture<'s, Result<ImageReport, Error>> {
        Box::pin(at.resolver.verify_as(at, self.options))
    }
}

/// One platform manifest to verify.
struct Target {
    digest: String,
    /// As the index states it; `None`: from the config.
    platform: Option<Platform>,
    /// The manifest's body when it is already at hand (a single-platform image).
    body: Option<bytes::Bytes>,
}

impl Resolver {
    /// Starts the background verification (`--verify-binaries=background`): from now on every
    /// cold lookup offers its image to the returned queue, whose consumer verifies
    /// `--verify-concurrency` images at a time, decompressing on idle-class threads. Started
    /// once; a second call returns the same queue. Needs a tokio runtime.
    pub fn start_background_verification(&self) -> Arc<Queue> {
        let inner = &self.inner;
        if let Some(queue) = inner.queue.get() {
            return queue.clone();
        }
        let (queue, jobs) = Queue::new(inner.metrics.verification_queue_depth.clone());
        let queue = Arc::new(queue);
        if inner.queue.set(queue.clone()).is_err() {
            // Another caller started it first.
            return inner.queue.get().cloned().unwrap_or(queue);
        }
        let concurrency = inner.config.verification.concurrency.max(1);
        tokio::spawn(consume(
            Arc::downgrade(&self.inner),
            Arc::downgrade(&queue),
            jobs,
            concurrency,
        ));
        queue
    }

    /// Verifies every platform of the image `routed` (docs/architecture.md "Verification"):
    /// the image's manifest as a lookup fetches it, then each platform's manifest, config and
    /// as many layers (from the top) as its program's verdict needs. A platform whose fetch
    /// fails is `unverifiable: registry-error`; the image's own manifest failing is an error.
    pub async fn verify(
        &self,
        routed: &Routed,
        credentials: &[CredentialCandidate],
        options: &Options,
    ) -> Result<ImageReport, Error> {
        let request = routed.request(credentials, true);
        let (report, _) = self
            .fetch(&request, &Verify { options })
            .await
            .inspect_err(|e| self.count_error(e))?;
        Ok(report)
    }

    async fn verify_as(&self, at: At<'_, '_>, options: &Options) -> Result<ImageReport, Error> {
        let fetcher = at.fetcher();
        let resolved = at.request.resolved;
        let response = fetcher.manifest(resolved.object()).await?;
        let (_, parsed) = fetcher.parse(&response)?;
        let digest = manifest::digest_of(&response.body, resolved.digest.as_deref());
        let targets: Vec<Target> = match parsed {
            Parsed::Index(entries) => entries
                .into_iter()
                .filter(|entry| !entry.is_attestation())
                .filter(|entry| {
                    entry
                        .media_type
                        .as_deref()
                        .is_none_or(manifest::is_image_manifest)
                })
                .filter(|entry| crate::reference::validate_digest(&entry.digest).is_ok())
                .take(MAX_PLATFORMS)
                .map(|entry| Target {
                    platform: entry.platform().ok().flatten(),
                    digest: entry.digest,
                    body: None,
                })
                .collect(),
            Parsed::Image(_) => vec![Target {
                digest: digest.clone(),
                platform: None,
                body: Some(response.body.clone()),
            }],
            Parsed::Artifact => Vec::new(),
        };
        let image_digest = digest.as_str();
        let platforms = futures::stream::iter(targets)
            .map(|target| self.known_or_verified(&at, image_digest, target, options))
            .buffered(MAX_CONCURRENT_FETCHES)
            .collect::<Vec<_>>()
            .await;
        Ok(ImageReport {
            image: at.request.reference.to_string(),
            digest,
            platforms,
        })
    }

    /// A platform's verdict from this process's verdicts, else from the shared cache, else
    /// verified (and then kept in both, unless it may change on another try).
    async fn known_or_verified(
        &self,
        at: &At<'_, '_>,
        image_digest: &str,
        target: Target,
        options: &Options,
    ) -> PlatformReport {
        let inner = &*self.inner;
        let answered = |known: PlatformReport| PlatformReport { bytes: 0, ..known };
        if let Some(known) = inner.verdicts.report(&target.digest) {
            let known = answered((*known).clone());
            inner.verdicts.record(image_digest, &known);
            return known;
        }
        let repository = at.request.resolved.name();
        if let Some(shared) = &inner.shared {
            if let Some(value) = shared.verdict(&repository, &target.digest).await {
                let known = PlatformReport {
                    platform: value.platform,
                    digest: target.digest,
                    report: value.report,
                    bytes: 0,
                    transient: false,
                };
                inner.verdicts.record(image_digest, &known);
                return known;
            }
        }
        let verified = self.verify_platform(at, target, options).await;
        if !verified.transient {
            inner.verdicts.record(image_digest, &verified);
            if let Some(shared) = &inner.shared {
                let value = crate::shared::VerdictValue {
                    platform: verified.platform.clone(),
                    report: verified.report.clone(),
                    bytes: verified.bytes,
                };
                shared.remember_verdict(&repository, &verified.digest, &value);
            }
        }
        verified
    }

    /// One platform, within the process's permits, its own request budget, the byte budget
    /// and the wall time.
    async fn verify_platform(
        &self,
        at: &At<'_, '_>,
        target: Target,
        options: &Options,
    ) -> PlatformReport {
        let inner = &*self.inner;
        let config = &inner.config.verification;
        let _permit = inner.verify_permits.acquire().await.ok();
        let started = Instant::now();
        let session = Session {
            ctx: Context {
                budget: Budget::new(MAX_REQUESTS_PER_PLATFORM),
                ..at.session.ctx.clone()
            },
            host: at.session.host.clone(),
            base: at.session.base.clone(),
            repository: at.session.repository.clone(),
            headers: at.session.headers.clone(),
            candidate: at.session.candidate,
            used: AtomicBool::new(false),
        };
        let fetcher = Fetcher {
            http: at.http,
            auth: &inner.auth,
            session: &session,
        };
        let mut worker = None;
        let mut bytes = 0u64;
        let mut platform = target.platform.clone();
        let timed = tokio::time::timeout(
            config.timeout,
            self.read_platform(
                &fetcher,
                &target,
                options,
                &mut worker,
                &mut bytes,
                &mut platform,
            ),
        )
        .await;
        let (report, timed_out) = match timed {
            Ok(report) => (report, false),
            Err(_elapsed) => {
                let evidence = format!("more than {} s", config.timeout.as_secs());
                let report = match worker.as_mut() {
                    Some(worker) => worker.fail(Reason::Budget, evidence).await,
                    None => Report::unverifiable(Reason::Budget, None, evidence),
                };
                (report, true)
            }
        };
        let transient = timed_out || report.reason == Some(Reason::RegistryError);
        inner
            .metrics
            .count_verification(&report, bytes, started.elapsed());
        PlatformReport {
            platform: platform.unwrap_or_else(|| Platform::new("", "unknown", None)),
            digest: target.digest,
            report,
            bytes,
            transient,
        }
    }

    /// The platform's manifest, config and layers, top first, until its report.
    async fn read_platform(
        &self,
        fetcher: &Fetcher<'_>,
        target: &Target,
        options: &Options,
        worker: &mut Option<Worker>,
        bytes: &mut u64,
        platform: &mut Option<Platform>,
    ) -> Report {
        let failed =
            |error: Error| Report::unverifiable(Reason::RegistryError, None, error.to_string());
        let body = match &target.body {
            Some(body) => body.clone(),
            None => match fetcher.manifest(&target.digest).await {
                Ok(response) => response.body,
                Err(error) => return failed(error),
            },
        };
        let image = match ImageManifest::parse(&body) {
            Ok(image) => image,
            Err(reason) => return Report::unverifiable(Reason::RegistryError, None, reason),
        };
        if !manifest::is_image_config(&image.config) {
            return Report::unverifiable(Reason::NotElf, None, "an artifact, not an image");
        }
        let config = match fetcher.blob(&image.config.digest).await {
            Ok(config) => config,
            Err(error) => return failed(error),
        };
        let stated = match platform.clone() {
            Some(stated) => stated,
            None => match manifest::platform_from_config(&config) {
                Ok(from_config) => from_config,
                Err(e) => {
                    return Report::unverifiable(Reason::RegistryError, None, format!("{e:?}"))
                }
            },
        };
        *platform = Some(stated.clone());
        let run = match Run::from_config(&config) {
            Ok(run) => run,
            Err(reason) => return Report::unverifiable(Reason::RegistryError, None, reason),
        };
        let verification = match Verification::new(&stated, &run, image.layers.len()) {
            Ok(verification) => verification,
            Err(report) => return report,
        };
        let worker = match Worker::spawn(verification, options.background) {
            Ok(spawned) => worker.insert(spawned),
            Err(error) => {
                return Report::unverifiable(
                    Reason::Budget,
                    None,
                    format!("the verification threads did not start ({error})"),
                )
            }
        };
        let max_bytes = self.inner.config.verification.max_bytes;
        for layer in image.layers.iter().rev() {
            if layer.storage() == Storage::Foreign {
                let evidence = format!(
                    "layer {} ({}) is not read: foreign or non-distributable",
                    layer.digest,
                    crate::error::bounded(&layer.media_type, 128)
                );
                return worker.fail(Reason::ForeignLayer, evidence).await;
            }
            if *bytes >= max_bytes {
                return worker.fail(Reason::Budget, over_budget(max_bytes)).await;
            }
            let response = match fetcher.layer(&layer.digest).await {
                Ok(response) => response,
                Err(error) => return worker.fail(Reason::RegistryError, error.to_string()).await,
            };
            let Some(body) = response.stream else {
                let evidence = format!("layer {} answered without a body", layer.digest);
                return worker.fail(Reason::RegistryError, evidence).await;
            };
            let read = worker
                .layer(
                    &layer.digest,
                    body,
                    layer.size,
                    max_bytes,
                    bytes,
                    options.progress.as_ref(),
                )
                .await;
            let (reason, evidence) = match read {
                Ok(Read::Decided(report)) => return report,
                Ok(Read::Next) => continue,
                Err(Stop::Budget) => (Reason::Budget, over_budget(max_bytes)),
                Err(Stop::Oversized) => (
                    Reason::RegistryError,
                    format!(
                        "layer {} is longer than the {} bytes its descriptor states",
                        layer.digest,
                        layer.size.unwrap_or_default()
                    ),
                ),
                Err(Stop::Body(detail)) => (
                    Reason::RegistryError,
                    format!("reading layer {} failed: {detail}", layer.digest),
                ),
            };
            return worker.fail(reason, evidence).await;
        }
        worker
            .fail(Reason::NotFound, "no layer decided".to_owned())
            .await
    }
}

/// The background verification's consumer: `concurrency` images at a time, until the
/// resolver (which holds the queue, so its sender) is gone.
async fn consume(
    resolver: Weak<super::Inner>,
    queue: Weak<Queue>,
    mut jobs: tokio::sync::mpsc::Receiver<Job>,
    concurrency: usize,
) {
    let permits = Arc::new(tokio::sync::Semaphore::new(concurrency));
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let Some(job) = jobs.recv().await else {
            return;
        };
        let (Some(inner), Some(queue)) = (resolver.upgrade(), queue.upgrade()) else {
            return;
        };
        queue.started();
        let resolver = Resolver { inner };
        tokio::spawn(async move {
            let options = Options {
                background: true,
                progress: None,
            };
            let Job {
                routed,
                credentials,
                digest,
            } = job;
            match resolver.verify(&routed, &credentials, &options).await {
                Ok(report) => {
                    for platform in &report.platforms {
                        if platform.report.verdict == noe_core::binary::Verdict::Mismatch {
                            tracing::warn!(
                                image = %routed.image(),
                                %digest,
                                platform = %platform.platform,
                                evidence = %platform.report.evidence,
                                "An image lies about a platform: its program is of another machine"
                            );
                        }
                    }
                }
                Err(error) => {
                    tracing::debug!(image = %routed.image(), %error, "Background verification failed");
                }
            }
            queue.finished(routed.image());
            drop(permit);
        });
    }
}

fn over_budget(max_bytes: u64) -> String {
    format!("more than {max_bytes} compressed bytes (--verify-max-bytes)")
}
