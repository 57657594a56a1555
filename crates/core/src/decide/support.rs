//! Steps 3–5, the second step of the pass: what each image supports (the architectures it can
//! use on the pod's OS), and what a failed lookup means under `--on-lookup-error`. Its output,
//! a [`Resolution`], is what [`intersect`](super::intersect) intersects.

use std::collections::BTreeSet;

use crate::truth::Correction;
use crate::Platform;

use super::correct::Applied;
use super::facts::Lookups;
use super::outcome::{Decision, DenyReason, Signal, SkipReason, Verdict};
use super::pod::ImageKind;
use super::policy::{OnLookupError, Policy};
use super::read::{Arch, Plan};
use super::summary::{ImageSummary, ImageSupport, Summary};
use super::text;

/// The error of a container image whose registry lists no platform: noe-rs never assumes amd64.
pub(crate) const NO_PLATFORM: &str = "the registry lists no platform for it";
/// The error of an image missing from the lookups.
pub(crate) const NO_RESULT: &str = "no lookup result";

/// An image whose platforms are known.
#[derive(Debug)]
pub(crate) struct Resolved<'a> {
    pub image: &'a str,
    /// The architectures a pod of this OS may use: OS equal or empty, arch schedulable.
    pub usable: BTreeSet<&'a str>,
    /// Every platform the registry lists (what messages show).
    pub platforms: &'a [Platform],
    /// Some platform was left out for its OS.
    pub other_os: bool,
    /// `--on-lookup-error=fallback`: the platforms were not found, the fallback arch is assumed.
    pub assumed: bool,
    /// The corrections that left platforms out of `platforms` (an image they left none supports
    /// no architecture).
    pub corrections: &'a [&'a Correction],
}

/// An image whose platforms could not be found.
#[derive(Debug)]
pub(crate) struct Failed<'a> {
    pub image: &'a str,
    pub error: &'a str,
}

/// Every image of the plan, resolved or failed; arch-neutral images (image volumes without a
/// platform, images a platform override declares `*`) are in neither.
#[derive(Debug, Default)]
pub(crate) struct Resolution<'a> {
    pub resolved: Vec<Resolved<'a>>,
    pub failed: Vec<Failed<'a>>,
}

/// The architectures of `platforms` a pod of `os` can use: OS equal to the pod's or empty,
/// architecture schedulable and non-empty; variants ignored.
fn usable<'a>(platforms: &'a [Platform], os: &str, policy: &Policy) -> (BTreeSet<&'a str>, bool) {
    let mut other_os = false;
    let mut archs = BTreeSet::new();
    for platform in platforms {
        if !platform.os.is_empty() && platform.os != os {
            other_os = true;
            continue;
        }
        if !platform.architecture.is_empty() && policy.is_schedulable(&platform.architecture) {
            archs.insert(platform.architecture.as_str());
        }
    }
    (archs, other_os)
}

/// Resolves every image against the lookups; each image's summary is recorded in `summary`, in
/// the pod's order.
fn resolve<'a>(
    images: &[(&'a str, ImageKind)],
    lookups: &'a Lookups,
    os: &str,
    policy: &'a Policy,
    applied: &'a Applied<'a>,
    summary: &mut Summary,
) -> Resolution<'a> {
    let mut out = Resolution::default();
    for &(image, kind) in images {
        let corrections = applied.of(image);
        let error = match lookups.get(image) {
            Some(Ok(platforms))
                if corrections.is_empty()
                    && ((platforms.is_empty() && kind == ImageKind::Volume)
                        || platforms.iter().any(Platform::is_any)) =>
            {
                summary.record(|s| {
                    s.images
                        .push(ImageSummary::new(image, ImageSupport::Neutral))
                });
                continue;
            }
            Some(Ok(platforms)) if platforms.is_empty() && corrections.is_empty() => NO_PLATFORM,
            Some(Ok(platforms)) => {
                let (usable, other_os) = usable(platforms, os, policy);
                summary.record(|s| {
                    let mut entry = ImageSummary::new(
                        image,
                        ImageSupport::Platforms {
                            platforms: std::sync::Arc::clone(platforms),
                            usable: usable.iter().map(|a| (*a).to_owned()).collect(),
                        },
                    );
                    entry.corrections = corrections.iter().map(|c| (*c).clone()).collect();
                    s.images.push(entry)
                });
                out.resolved.push(Resolved {
                    image,
                    usable,
                    platforms,
                    other_os,
                    assumed: false,
                    corrections,
                });
                continue;
            }
            Some(Err(error)) => error.message.as_str(),
            None => NO_RESULT,
        };
        summary.record(|s| {
            s.images.push(ImageSummary::new(
                image,
                ImageSupport::Failed {
                    error: error.to_owned(),
                },
            ))
        });
        out.failed.push(Failed { image, error });
    }
    out
}

/// Steps 3–5: every image resolved against the lookups, each failure counted. For a pod whose
/// arch constraint is ours, a failure then follows `--on-lookup-error`: `Err` with the verdict
/// when it settles the pod (denied, or allowed unchanged: it fails open).
pub(crate) fn assess<'a>(
    plan: &Plan<'a>,
    lookups: &'a Lookups,
    policy: &'a Policy,
    applied: &'a Applied<'a>,
    decision: &mut Decision,
) -> Result<Resolution<'a>, Verdict> {
    let mut resolution = resolve(
        &plan.images,
        lookups,
        plan.os,
        policy,
        applied,
        &mut decision.summary,
    );
    for failure in &resolution.failed {
        decision.signals.push(Signal::LookupFailed {
            image: failure.image.to_owned(),
            error: failure.error.to_owned(),
        });
    }
    // The pod's own constraint (step 2): failed lookups are only counted.
    if resolution.failed.is_empty() || matches!(plan.arch, Arch::User { .. }) {
        return Ok(resolution);
    }
    let fail_open = match policy.on_lookup_error {
        OnLookupError::Deny => {
            let failures = text::list(resolution.failed.iter().map(|f| {
                format!(
                    "{} ({})",
                    text::image(f.image),
                    text::truncate(f.error, 120)
                )
            }));
            let message = format!("could not find the platforms of {failures}");
            return Err(Verdict::deny(DenyReason::LookupFailed, message));
        }
        OnLookupError::AllowPod => true,
        OnLookupError::Fallback if policy.fallback().is_some() => false,
        OnLookupError::IgnoreImage | OnLookupError::Fallback => resolution.resolved.is_empty(),
    };
    if fail_open {
        for failure in &resolution.failed {
            decision.warnings.push(format!(
                "pod not constrained to an architecture: could not find the platforms of {} ({})",
                text::image(failure.image),
                failure.error
            ));
        }
        decision.signals.push(Signal::FailedOpen);
        decision.signals.push(Signal::Skipped {
            reason: SkipReason::LookupFailed,
        });
        return Err(Verdict::Unchanged {
            reason: SkipReason::LookupFailed,
        });
    }
    // `fallback` (with a fallback arch): failed images taken to support only that arch.
    let fallback = policy
        .fallback()
        .filter(|_| policy.on_lookup_error == OnLookupError::Fallback);
    let fell_back = match fallback {
        Some(_) => std::mem::take(&mut resolution.failed),
        None => Vec::new(),
    };
    for failure in &fell_back {
        let arch = fallback.unwrap_or_default();
        for entry in decision.summary.images.iter_mut() {
            if entry.image == failure.image {
                entry.support = ImageSupport::Assumed {
                    arch: arch.to_owned(),
                    error: failure.error.to_owned(),
                };
            }
        }
        resolution.resolved.push(Resolved {
            image: failure.image,
            usable: Some(arch)
                .filter(|a| policy.is_schedulable(a))
                .into_iter()
                .collect(),
            platforms: &[],
            other_os: false,
            assumed: true,
            corrections: &[],
        });
        decision.warnings.push(format!(
            "image {} taken to support only {arch}: could not find its platforms ({})",
            text::image(failure.image),
            failure.error
        ));
    }
    for failure in &resolution.failed {
        decision.warnings.push(format!(
            "image {} ignored for architecture selection: could not find its platforms ({})",
            text::image(failure.image),
            failure.error
        ));
    }
    Ok(resolution)
}
